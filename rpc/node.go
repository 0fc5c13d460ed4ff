package rpc

import "github.com/weft-sched/weft/scheduler"

// NodeRegisterRequest registers an agent (Node.Register).
type NodeRegisterRequest struct {
	RequestHeader
	ID       string              `codec:"id"`
	Address  string              `codec:"address"` // the agent's RPC address
	Rack     string              `codec:"rack"`
	Capacity scheduler.Resources `codec:"capacity"`
}

// NodeRegisterResponse answers Node.Register.
type NodeRegisterResponse struct {
	Epoch   uint64   `codec:"epoch"`
	Servers []string `codec:"servers"`
}

// ContainerReport is an agent's view of one container in a heartbeat.
type ContainerReport struct {
	ID          string                   `codec:"id"`
	State       scheduler.ContainerState `codec:"state"`
	ExitCode    *int                     `codec:"exit_code"`
	Reason      scheduler.ExitReason     `codec:"reason"`
	Diagnostics string                   `codec:"diagnostics"`
	At          int64                    `codec:"at"` // Unix ns of the last change
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
}

// HeartbeatRequest is an agent's periodic report (Node.Heartbeat). It lists
// every container the agent knows, including completed ones until the
// leader acknowledges them.
type HeartbeatRequest struct {
	RequestHeader
	NodeID     string            `codec:"node_id"`
	Epoch      uint64            `codec:"epoch"`
	Containers []ContainerReport `codec:"containers"`
	Load       NodeLoad          `codec:"load"`
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
	Token     string        `codec:"token"`
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
	// LeastLoaded is the leader's current least-loaded node list, for the
	// agent's distributed opportunistic scheduler.
	LeastLoaded []scheduler.LeastLoadedNode `codec:"least_loaded"`
	// QueueLimit is the opportunistic queue length the agent must shed to.
	QueueLimit int `codec:"queue_limit"`
}

// NodeInfo is one node as `weft node list -json` shows it.
type NodeInfo struct {
	ID                     string              `json:"id"`
	Address                string              `json:"address"`
	Rack                   string              `json:"rack"`
	Status                 string              `json:"status"`
	StatusReason           string              `json:"status_reason,omitempty"`
	Epoch                  uint64              `json:"epoch"`
	Capacity               scheduler.Resources `json:"capacity"`
	AllocatedGuaranteed    scheduler.Resources `json:"allocated_guaranteed"`
	AllocatedOpportunistic scheduler.Resources `json:"allocated_opportunistic"`
	RunningGuaranteed      int                 `json:"running_guaranteed"`
	RunningOpportunistic   int                 `json:"running_opportunistic"`
	Queued                 int                 `json:"queued"`
}

// NewNodeInfo describes a node.
func NewNodeInfo(n *scheduler.Node) NodeInfo {
	return NodeInfo{
		ID: n.ID, Address: n.Address, Rack: n.Rack, Status: string(n.Status), StatusReason: n.StatusReason,
		Epoch: n.Epoch, Capacity: n.Capacity, AllocatedGuaranteed: n.AllocatedGuaranteed,
		AllocatedOpportunistic: n.AllocatedOpportunistic, RunningGuaranteed: n.RunningGuaranteed,
		RunningOpportunistic: n.RunningOpportunistic,
	}
}

// NodeListResponse answers Node.List.
type NodeListResponse struct {
	ResponseMeta `codec:"meta" json:"-"`
	Nodes        []NodeInfo `json:"nodes"`
}

// NodeStatusRequest asks for one node (Node.Status).
type NodeStatusRequest struct {
	RequestHeader
	ID string `json:"id"`
}

// NodeStatusResponse answers Node.Status.
type NodeStatusResponse struct {
	ResponseMeta `codec:"meta" json:"-"`
	Node         NodeInfo        `json:"node"`
	Containers   []ContainerInfo `json:"containers"`
}
