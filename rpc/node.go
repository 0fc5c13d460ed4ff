package rpc

import (
	"slices"
	"time"

	"github.com/weft-sched/weft/scheduler"
)

// NodeRegisterRequest registers an agent (Node.Register). Secret is the
// node secret the agent keeps in its data dir (SPEC §15): the first
// registration of a node name sets it, and every later registration,
// heartbeat and deregistration of that name must present it.
type NodeRegisterRequest struct {
	RequestHeader
	ID       string              `codec:"id"`
	Address  string              `codec:"address"` // the agent's RPC address
	Rack     string              `codec:"rack"`
	Capacity scheduler.Resources `codec:"capacity"`
	Secret   string              `codec:"secret" json:"-"`
	// MintKey is the public half of the node's own Ed25519 key, with
	// which its AMRMProxy signs the tokens of the opportunistic
	// containers it allocates. The servers record it with the node
	// secret and certify it (NodeRegisterResponse.MintCert).
	MintKey []byte `codec:"mint_key"`
	// JoinToken is a node-join token (`weft node join-token create`): with
	// ACLs on, a node the servers do not know registers only with one.
	JoinToken string `codec:"join_token" json:"-"`
}

// NodeDeregisterRequest tells the servers an agent is leaving gracefully
// (Node.Deregister): its node is DOWN at once, at that epoch. With Leaving
// set the agent is only beginning to leave: the node is DRAINING, without
// a deadline, so that nothing more is placed there while its containers
// stop; a second call without it takes the node DOWN.
type NodeDeregisterRequest struct {
	RequestHeader
	ID      string `codec:"id"`
	Epoch   uint64 `codec:"epoch"`
	Secret  string `codec:"secret" json:"-"`
	Leaving bool   `codec:"leaving,omitempty"`
}

// NodeRegisterResponse answers Node.Register. WorkloadKeys are the
// servers' public keys, with which the agent verifies workload tokens;
// MintCert certifies the node's MintKey, with which its AMRMProxy signs.
type NodeRegisterResponse struct {
	Epoch        uint64        `codec:"epoch"`
	Servers      []string      `codec:"servers"`
	WorkloadKeys []WorkloadKey `codec:"workload_keys"`
	MintCert     string        `codec:"mint_cert"`
	// Federation, when the agent's sub-cluster belongs to a federation,
	// names it and its routers: the AMRMProxy splits spanning apps' asks
	// with them (SPEC §18).
	Federation *AgentFederation `codec:"federation,omitempty"`
}

// AgentFederation is what an agent learns of its sub-cluster's federation.
type AgentFederation struct {
	Subcluster string   `codec:"subcluster"`
	Routers    []string `codec:"routers"`
}

func (f *AgentFederation) equal(g *AgentFederation) bool {
	return f == g || f.Subcluster == g.Subcluster && slices.Equal(f.Routers, g.Routers)
}

// ContainerReport is an agent's view of one container in a heartbeat.
type ContainerReport struct {
	ID string `codec:"id"`
	// AppID, Attempt, AskID, Resources, ExecutionType and AllocatedAt let
	// the leader record opportunistic containers that an AMRMProxy
	// allocated without it.
	AppID         string                   `codec:"app_id"`
	Attempt       int                      `codec:"attempt"`
	AskID         uint64                   `codec:"ask_id"`
	Resources     scheduler.Resources      `codec:"resources"`
	ExecutionType string                   `codec:"execution_type"`
	State         scheduler.ContainerState `codec:"state"`
	ExitCode      *int                     `codec:"exit_code"`
	Reason        scheduler.ExitReason     `codec:"reason"`
	Diagnostics   string                   `codec:"diagnostics"`
	AllocatedAt   int64                    `codec:"allocated_at"` // Unix ns
	StartedAt     int64                    `codec:"started_at"`   // Unix ns; 0 if it never ran
	At            int64                    `codec:"at"`           // Unix ns of the last change
	// Token is an opportunistic container's container token, sent until
	// the servers have recorded the container (HeartbeatResponse.Recorded):
	// it proves which node's AMRMProxy allocated it.
	Token string `codec:"token,omitempty" json:"-"`
}

// NodeLoad is what a heartbeat reports of the node's load (SPEC §10).
type NodeLoad struct {
	// QueueCapacity is the most opportunistic containers the node queues.
	QueueCapacity        int                 `codec:"queue_capacity"`
	RunningGuaranteed    int                 `codec:"running_guaranteed"`
	RunningOpportunistic int                 `codec:"running_opportunistic"`
	Queued               int                 `codec:"queued"`
	Used                 scheduler.Resources `codec:"used"`
	UsedOpportunistic    scheduler.Resources `codec:"used_opportunistic"`
	// EstimatedQueueWait is how long a container arriving now would wait.
	EstimatedQueueWait time.Duration `codec:"estimated_queue_wait"`
	// OpportunisticDemand is how many opportunistic containers the AMs of
	// the node's AMRMProxy asked for that it could not place from its
	// window of the least-loaded list: the leader deals windows by it.
	OpportunisticDemand int `codec:"opportunistic_demand,omitempty"`
	// Enforcement says how the agent holds containers to their limits
	// ("cgroup v2", "cgroup v1", or "accounted only").
	Enforcement string `codec:"enforcement,omitempty"`
	// Measured is what the node's containers were last measured to use
	// (nil: not measured), and UseLimit, with overcommit on, the measured
	// use opportunistic containers may take the node to (a resource at 0
	// is not overcommitted): the leader lists the room between them.
	Measured *scheduler.Resources `codec:"measured,omitempty"`
	UseLimit *scheduler.Resources `codec:"use_limit,omitempty"`
}

// HeartbeatRequest is an agent's periodic report (Node.Heartbeat). It lists
// every container the agent knows, including completed ones until the
// leader acknowledges them.
type HeartbeatRequest struct {
	RequestHeader
	NodeID     string            `codec:"node_id"`
	Epoch      uint64            `codec:"epoch"`
	Secret     string            `codec:"secret" json:"-"`
	Containers []ContainerReport `codec:"containers"`
	Load       NodeLoad          `codec:"load"`
	// LeastLoadedAt is the computation of the least-loaded list the agent
	// holds; the leader sends a list only when it has a newer one.
	LeastLoadedAt int64 `codec:"least_loaded_at"`
	// SameListOK says the agent understands LeastLoadedSame: the leader
	// may leave out a recomputed list identical to the one it holds.
	SameListOK bool `codec:"same_list_ok"`
	// WorkloadKeyID is the newest workload key the agent holds (0: none);
	// the answer carries the keys only when the servers' newest differs.
	WorkloadKeyID uint32 `codec:"workload_key_id"`
	// MintCertExpiry is when the node's certificate ends (Unix ns; 0: it
	// holds none): the answer carries a new one once half of it has passed.
	MintCertExpiry int64 `codec:"mint_cert_expiry"`
	// Seq numbers the agent's heartbeats within a registration, from 1
	// (0: not numbered). The leader refuses a heartbeat older than one it
	// has already applied: an attempt that reached it late (its agent gave
	// up and moved to another server) would otherwise report containers
	// started since as gone, and have them recorded lost.
	Seq uint64 `codec:"seq"`
	// AppsToCheck asks which of these apps still run: the agent keeps
	// their completed containers' directories past log_retention until
	// they end (at most MaxAppsToCheck; omitted when none).
	AppsToCheck []string `codec:"apps_to_check,omitempty"`
}

// MaxAppsToCheck bounds HeartbeatRequest.AppsToCheck.
const MaxAppsToCheck = 256

// MaxHeartbeatBatch bounds the heartbeats of one Node.HeartbeatBatch.
const MaxHeartbeatBatch = 256

// HeartbeatBatchRequest carries heartbeats that agents sent to a follower
// on to the leader in one call (Node.HeartbeatBatch, servers only): the
// leader answers each as Node.Heartbeat would, at the cost of one call
// instead of one per agent.
type HeartbeatBatchRequest struct {
	RequestHeader
	Heartbeats []HeartbeatRequest `codec:"heartbeats"`
}

// HeartbeatBatchResponse answers Node.HeartbeatBatch: Results[i] answers
// Heartbeats[i].
type HeartbeatBatchResponse struct {
	Results []HeartbeatResult `codec:"results"`
	// LeastLoaded is the list that results with SharedList carry: an
	// answer holds a least-loaded list once, not once per heartbeat.
	LeastLoaded []scheduler.LeastLoadedNode `codec:"least_loaded"`
	// Federation is what every answered result carries of the federation
	// (the leader's, the same for all), held once (ShareFederation).
	Federation *AgentFederation `codec:"federation,omitempty"`
}

// HeartbeatResult is the leader's answer to one heartbeat of a batch.
type HeartbeatResult struct {
	Response HeartbeatResponse `codec:"response"`
	// Error is the heartbeat's error as it would cross the wire alone
	// ("[code] message"), or empty.
	Error string `codec:"error"`
	// SharedList says Response.LeastLoaded is the batch's LeastLoaded.
	SharedList bool `codec:"shared_list"`
}

// NewHeartbeatResult returns the result of one heartbeat of a batch.
func NewHeartbeatResult(resp *HeartbeatResponse, err error) HeartbeatResult {
	if err != nil {
		return HeartbeatResult{Error: encodeError(err)}
	}
	return HeartbeatResult{Response: *resp}
}

// Err is the heartbeat's error, coded as the leader coded it, or nil.
func (r *HeartbeatResult) Err() error {
	if r.Error == "" {
		return nil
	}
	return decodeError(r.Error)
}

// ShareLeastLoaded moves the least-loaded lists of the results into the
// batch's answer: every result whose list is the first one's (the same
// slice: the leader deals each agent a window of its list, and answers the
// agents that hold the same window with one slice) leaves its copy out.
func (r *HeartbeatBatchResponse) ShareLeastLoaded() {
	for i := range r.Results {
		resp := &r.Results[i].Response
		if resp.LeastLoaded == nil {
			continue
		}
		if r.LeastLoaded == nil {
			r.LeastLoaded = resp.LeastLoaded
		}
		if sameSlice(resp.LeastLoaded, r.LeastLoaded) {
			resp.LeastLoaded, r.Results[i].SharedList = nil, true
		}
	}
}

// sameSlice reports whether a and b are one slice.
func sameSlice[T any](a, b []T) bool {
	return len(a) == len(b) && (len(a) == 0 || &a[0] == &b[0])
}

// ShareFederation moves the results' Federation into the batch's answer:
// each answered heartbeat carries the leader's, one value, so the answer
// holds it once. Should the leader's have changed while the batch was
// answered, every result keeps its own.
func (r *HeartbeatBatchResponse) ShareFederation() {
	var shared *AgentFederation
	for i := range r.Results {
		res := &r.Results[i]
		if res.Error != "" {
			continue
		}
		f := res.Response.Federation
		if f == nil || shared != nil && !f.equal(shared) {
			return
		}
		shared = f
	}
	if shared == nil {
		return
	}
	r.Federation = shared
	for i := range r.Results {
		r.Results[i].Response.Federation = nil
	}
}

// Unshare gives result i its list and its federation back (see
// ShareLeastLoaded and ShareFederation).
func (r *HeartbeatBatchResponse) Unshare(i int) {
	res := &r.Results[i]
	if res.SharedList {
		res.Response.LeastLoaded = r.LeastLoaded
	}
	if r.Federation != nil && res.Error == "" && res.Response.Federation == nil {
		res.Response.Federation = r.Federation
	}
}

// KillOrder asks an agent to stop a container, and says why.
type KillOrder struct {
	ID     string               `codec:"id"`
	Reason scheduler.ExitReason `codec:"reason"`
}

// AMLaunch asks an agent to launch an app's AM in a container placed on it.
type AMLaunch struct {
	Container ContainerInfo `codec:"container"`
	AppName   string        `codec:"app_name"`
	AMType    string        `codec:"am_type"`
	// Token is the attempt's AM token (the AM gets it as a file: rpc.SecretAMToken).
	Token string `codec:"token"`
}

// HeartbeatResponse answers Node.Heartbeat.
type HeartbeatResponse struct {
	// ReRegister tells an agent the servers no longer know it at its epoch
	// (it was marked down, or restarted): it must stop its containers and
	// register again.
	ReRegister bool        `codec:"re_register"`
	Servers    []string    `codec:"servers"`
	Kill       []KillOrder `codec:"kill"`
	LaunchAMs  []AMLaunch  `codec:"launch_ams"`
	// Acked lists completed containers the servers have recorded; the agent
	// may forget them.
	Acked []string `codec:"acked"`
	// LeastLoaded is the leader's least-loaded node list, for the agent's
	// distributed opportunistic scheduler, and LeastLoadedAt identifies its
	// computation (Unix ns). LeastLoadedAt 0 means "no new list": the
	// agent keeps the one it has.
	LeastLoaded   []scheduler.LeastLoadedNode `codec:"least_loaded"`
	LeastLoadedAt int64                       `codec:"least_loaded_at"`
	// LeastLoadedAge is how long ago the list was computed, as the leader
	// answers: an agent places the computation on its own clock with it.
	LeastLoadedAge time.Duration `codec:"least_loaded_age"`
	// LeastLoadedSame (to an agent that sent SameListOK) says the list
	// computed at LeastLoadedAt, left out, is entry for entry the one
	// computed at the request's LeastLoadedAt, which the agent holds: it
	// takes it as the new computation.
	LeastLoadedSame bool `codec:"least_loaded_same"`
	// LeastLoadedCandidates is how many nodes the whole list had, of which
	// LeastLoaded is this agent's window: with an empty window it tells
	// "other proxies hold the room" (a number) from "no node can take
	// opportunistic work" (0). 0 from a leader that deals no windows.
	LeastLoadedCandidates int `codec:"least_loaded_candidates,omitempty"`
	// MaxAllocationsPerAM caps the opportunistic containers one AM.Allocate
	// gets at the AMRMProxy (opportunistic.max_allocations_per_am_heartbeat;
	// 0: no cap).
	MaxAllocationsPerAM int `codec:"max_allocations_per_am,omitempty"`
	// QueueLimit is the opportunistic queue length the agent must shed to
	// (0: no limit known).
	QueueLimit int `codec:"queue_limit"`
	// Centralized tells the agent's AMRMProxy to forward opportunistic asks
	// to the leader (opportunistic.distributed = false).
	Centralized bool `codec:"centralized"`
	// Promote lists containers on the node that were promoted to
	// guaranteed: the agent must no longer evict them. Demote lists
	// containers the agent reports guaranteed that the servers hold as
	// opportunistic (it was told of a promotion that never happened).
	Promote []string `codec:"promote"`
	Demote  []string `codec:"demote"`
	// AppsRunning is, of the request's AppsToCheck, the apps that have not
	// ended; the others have (or are unknown).
	AppsRunning []string `codec:"apps_running,omitempty"`
	// WorkloadKeys, when not empty, replaces the agent's workload keys:
	// the servers' set changed since the request's WorkloadKeyID.
	WorkloadKeys []WorkloadKey `codec:"workload_keys"`
	// MintCert, when set, replaces the node's certificate (its old one is
	// past half its life, or the servers' key changed).
	MintCert string `codec:"mint_cert,omitempty"`
	// Recorded lists the opportunistic containers of the request that the
	// servers hold now: the agent stops sending their tokens.
	Recorded []string `codec:"recorded,omitempty"`
	// Federation, when the cluster is a federation's sub-cluster, names
	// it and the routers its leader last heard of (SPEC §18): the
	// AMRMProxy splits spanning apps' asks with them. Servers share one
	// value between answers: never modify it.
	Federation *AgentFederation `codec:"federation,omitempty"`
}

// NodeInfo is one node as `weft node list -json` shows it.
type NodeInfo struct {
	ID string `codec:"id" json:"id"`
	// Subcluster is the node's sub-cluster, when a federation's router
	// answered (SPEC §18).
	Subcluster             string              `codec:"subcluster,omitempty" json:"subcluster,omitempty"`
	Address                string              `codec:"address" json:"address"`
	Rack                   string              `codec:"rack" json:"rack"`
	Status                 string              `codec:"status" json:"status"`
	StatusReason           string              `codec:"status_reason" json:"status_reason,omitempty"`
	Epoch                  uint64              `codec:"epoch" json:"epoch"`
	Capacity               scheduler.Resources `codec:"capacity" json:"capacity"`
	AllocatedGuaranteed    scheduler.Resources `codec:"allocated_guaranteed" json:"allocated_guaranteed"`
	AllocatedOpportunistic scheduler.Resources `codec:"allocated_opportunistic" json:"allocated_opportunistic"`
	RunningGuaranteed      int                 `codec:"running_guaranteed" json:"running_guaranteed"`
	RunningOpportunistic   int                 `codec:"running_opportunistic" json:"running_opportunistic"`
	Queued                 int                 `codec:"queued" json:"queued"`
	// EstimatedQueueWait is the node's last reported estimate, known only
	// to the leader (0 in stale reads from followers).
	EstimatedQueueWait time.Duration `codec:"estimated_queue_wait" json:"estimated_queue_wait_ns"`
	// Measured is what the node's containers were last measured to use,
	// UseLimit the measured use its overcommit allows (nil: it does not
	// overcommit), and Enforcement how it holds containers to their
	// limits; like EstimatedQueueWait, known only to the leader.
	Measured    *scheduler.Resources `codec:"measured,omitempty" json:"measured,omitempty"`
	UseLimit    *scheduler.Resources `codec:"use_limit,omitempty" json:"use_limit,omitempty"`
	Enforcement string               `codec:"enforcement,omitempty" json:"enforcement,omitempty"`
	// DrainDeadline is when a DRAINING node's remaining containers are
	// killed (Unix ns, like every time in these types); 0 unless it is DRAINING.
	DrainDeadline int64 `codec:"drain_deadline" json:"drain_deadline,omitempty"`
	// Reservation is the container of a capacity queue the node is held
	// for until it fits; nil: none.
	Reservation *ReservationInfo `codec:"reservation,omitempty" json:"reservation,omitempty"`
}

// ReservationInfo is a node held for one container of an app (a capacity
// queue's reservation): its ask (or the AM container of Attempt), its
// size, and since when (Unix ns).
type ReservationInfo struct {
	AppID     string              `codec:"app_id" json:"app_id"`
	NodeID    string              `codec:"node_id" json:"node_id"`
	Attempt   int                 `codec:"attempt" json:"attempt"`
	AskID     uint64              `codec:"ask_id" json:"ask_id"`
	IsAM      bool                `codec:"is_am" json:"is_am"`
	Resources scheduler.Resources `codec:"resources" json:"resources"`
	Since     int64               `codec:"since" json:"since"`
}

// NewReservationInfo describes a reservation.
func NewReservationInfo(r *scheduler.Reservation) *ReservationInfo {
	return &ReservationInfo{AppID: r.AppID, NodeID: r.NodeID, Attempt: r.Attempt, AskID: r.AskID, IsAM: r.IsAM,
		Resources: r.Resources, Since: r.Since}
}

// NewNodeInfo describes a node.
func NewNodeInfo(n *scheduler.Node) NodeInfo {
	info := NodeInfo{
		ID: n.ID, Address: n.Address, Rack: n.Rack, Status: string(n.Status), StatusReason: n.StatusReason,
		Epoch: n.Epoch, Capacity: n.Capacity, AllocatedGuaranteed: n.AllocatedGuaranteed,
		AllocatedOpportunistic: n.AllocatedOpportunistic, RunningGuaranteed: n.RunningGuaranteed,
		RunningOpportunistic: n.RunningOpportunistic, Queued: n.Queued,
		DrainDeadline: n.DrainDeadline,
	}
	if n.Reservation != nil {
		info.Reservation = NewReservationInfo(n.Reservation)
	}
	return info
}

// DefaultDrainDeadline is how long a drain lets containers run when the
// request gives no deadline.
const DefaultDrainDeadline = time.Hour

// NodeDrainRequest drains a node (Node.Drain, SPEC §20): it becomes
// DRAINING, takes no new containers, and what still runs there Deadline
// from now (0: DefaultDrainDeadline) is killed with reason "drained".
// Disable ends the drain: the node is READY again.
type NodeDrainRequest struct {
	RequestHeader
	ID       string        `codec:"id" json:"id"`
	Deadline time.Duration `codec:"deadline" json:"deadline"`
	Disable  bool          `codec:"disable" json:"disable"`
}

// NodeListRequest lists nodes (Node.List), optionally only those in one
// State (READY, DRAINING or DOWN).
type NodeListRequest struct {
	RequestHeader
	State string `codec:"state" json:"state"`
}

// NodeListResponse answers Node.List.
type NodeListResponse struct {
	ResponseMeta `codec:"meta" json:"-"`
	Nodes        []NodeInfo `codec:"nodes" json:"nodes"`
	// Unreachable names the sub-clusters a router could not list, each
	// with why: a federation's answer.
	Unreachable []string `codec:"unreachable,omitempty" json:"unreachable,omitempty"`
}

// NodeStatusRequest asks for one node (Node.Status).
type NodeStatusRequest struct {
	RequestHeader
	ID string `codec:"id" json:"id"`
}

// NodeStatusResponse answers Node.Status.
type NodeStatusResponse struct {
	ResponseMeta `codec:"meta" json:"-"`
	Node         NodeInfo        `codec:"node" json:"node"`
	Containers   []ContainerInfo `codec:"containers" json:"containers"`
}

// AgentLoadResponse answers Agent.Load on agents: the node's capacity and
// load, for AMRMProxies whose least-loaded list has gone stale (no leader).
type AgentLoadResponse struct {
	NodeID   string              `codec:"node_id"`
	Rack     string              `codec:"rack"`
	Capacity scheduler.Resources `codec:"capacity"`
	Load     NodeLoad            `codec:"load"`
}
