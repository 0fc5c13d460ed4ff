package rpc

import (
	"github.com/weft-sched/weft/scheduler"
	"github.com/weft-sched/weft/scheduler/federation"
)

// The routers' RPC methods (SPEC §18): Federation.Heartbeat, which a
// sub-cluster's leader calls every subcluster_heartbeat, and the
// operators' Federation.Subclusters, Federation.PolicyApply and
// Federation.PolicyList.

// SubclusterReport is what a sub-cluster's leader says of it.
type SubclusterReport struct {
	ID string `codec:"id" json:"id"`
	// Healthy says the sub-cluster can take work; Reason says why not.
	Healthy  bool     `codec:"healthy" json:"healthy"`
	Reason   string   `codec:"reason,omitempty" json:"reason,omitempty"`
	Servers  []string `codec:"servers" json:"servers"`
	HTTPAddr string   `codec:"http_addr,omitempty" json:"http_addr,omitempty"`
	Leader   string   `codec:"leader" json:"leader"`
	// Term and Seq order the reports: the leader's Raft term, then a
	// number that grows within it.
	Term       uint64              `codec:"term" json:"term"`
	Seq        uint64              `codec:"seq" json:"seq"`
	Capacity   scheduler.Resources `codec:"capacity" json:"capacity"`
	Used       scheduler.Resources `codec:"used" json:"used"`
	Pending    scheduler.Resources `codec:"pending" json:"pending"`
	NodesReady int                 `codec:"nodes_ready" json:"nodes_ready"`
	NodesTotal int                 `codec:"nodes_total" json:"nodes_total"`
	// AppsRunning counts the apps whose home is here and that have not
	// ended: an app spanning here from elsewhere counts in UnmanagedAMs
	// instead, so that the federation counts each app once.
	AppsRunning int                              `codec:"apps_running" json:"apps_running"`
	Queues      map[string]*federation.QueueLoad `codec:"queues" json:"queues"`
	Racks       []string                         `codec:"racks" json:"racks"`
	// UnmanagedAMs counts the apps that span here from other sub-clusters
	// and have not ended (SPEC §18).
	UnmanagedAMs int `codec:"unmanaged_ams" json:"unmanaged_ams"`
}

// FederationHeartbeatRequest is a sub-cluster's report to the routers.
type FederationHeartbeatRequest struct {
	RequestHeader
	Report SubclusterReport `codec:"report" json:"report"`
}

// FederationHeartbeatResponse answers Federation.Heartbeat: the
// sub-cluster's state as the routers now hold it, and the routers' RPC
// addresses (the sub-cluster refreshes its list of routers from them).
type FederationHeartbeatResponse struct {
	State   federation.State `codec:"state" json:"state"`
	Routers []string         `codec:"routers" json:"routers"`
}

// SubclusterInfo is one sub-cluster as `weft federation subclusters -json`
// shows it. Times are Unix nanoseconds.
type SubclusterInfo struct {
	SubclusterReport
	State         federation.State    `codec:"state" json:"state"`
	Routed        scheduler.Resources `codec:"routed" json:"routed"`
	Homes         int                 `codec:"homes" json:"homes"`
	FirstSeen     int64               `codec:"first_seen" json:"first_seen"`
	LastHeartbeat int64               `codec:"last_heartbeat" json:"last_heartbeat"`
	StateSince    int64               `codec:"state_since" json:"state_since"`
}

// FederationSubclustersRequest asks for every sub-cluster.
type FederationSubclustersRequest struct {
	RequestHeader
}

// FederationSubclustersResponse answers Federation.Subclusters.
type FederationSubclustersResponse struct {
	ResponseMeta
	Subclusters []SubclusterInfo `codec:"subclusters" json:"subclusters"`
}

// FederationPolicyApplyRequest sets the queues' federation policies: all
// of them (Replace) or those it names.
type FederationPolicyApplyRequest struct {
	RequestHeader
	Policies []federation.Policy `codec:"policies" json:"policies"`
	Replace  bool                `codec:"replace" json:"replace"`
}

// FederationPolicyApplyResponse answers Federation.PolicyApply.
type FederationPolicyApplyResponse struct {
	// Policies is how many policies the federation holds now.
	Policies int    `codec:"policies" json:"policies"`
	Index    uint64 `codec:"index" json:"index"`
}

// FederationPolicyListRequest asks for the policies and generated weights.
type FederationPolicyListRequest struct {
	RequestHeader
}

// QueueWeights is the policy generator's weights for one queue.
type QueueWeights struct {
	Queue   string            `codec:"queue" json:"queue"`
	Weights map[string]uint32 `codec:"weights" json:"weights"`
}

// FederationPolicyListResponse answers Federation.PolicyList.
type FederationPolicyListResponse struct {
	ResponseMeta
	Policies  []federation.Policy `codec:"policies" json:"policies"`
	Generated []QueueWeights      `codec:"generated" json:"generated"`
}

// FederationSubclusterAdminRequest is an operator's action on a
// sub-cluster: decommission (it gets no new apps, whatever it reports),
// recommission (NEW again until its next healthy report) or forget (drop
// a decommissioned one).
type FederationSubclusterAdminRequest struct {
	RequestHeader
	ID     string `codec:"id" json:"id"`
	Action string `codec:"action" json:"action"`
}

// FederationSubclusterAdminResponse answers Federation.SubclusterAdmin:
// the sub-cluster after the action (empty after forget).
type FederationSubclusterAdminResponse struct {
	Subcluster *SubclusterInfo `codec:"subcluster" json:"subcluster,omitempty"`
	Index      uint64          `codec:"index" json:"index"`
}

// FederationSplitViewRequest asks the routers what an AMRMProxy needs to
// split a spanning app's asks (federation.Split): the queue's AMRMProxy
// policy and the sub-clusters as candidates. Agents ask it (CapAgent).
type FederationSplitViewRequest struct {
	RequestHeader
	Queue string `codec:"queue" json:"queue"`
}

// FederationSplitViewResponse answers Federation.SplitView.
type FederationSplitViewResponse struct {
	ResponseMeta `codec:"meta" json:"-"`
	Policy       federation.AMRMPolicyType `codec:"policy" json:"policy"`
	Candidates   []SplitCandidate          `codec:"candidates" json:"candidates"`
}

// SplitCandidate is a sub-cluster as a split sees it, with the servers an
// AMRMProxy relays its part to.
type SplitCandidate struct {
	ID       string              `codec:"id" json:"id"`
	State    federation.State    `codec:"state" json:"state"`
	Weight   uint32              `codec:"weight" json:"weight"`
	Capacity scheduler.Resources `codec:"capacity" json:"capacity"`
	Used     scheduler.Resources `codec:"used" json:"used"`
	Pending  scheduler.Resources `codec:"pending" json:"pending"`
	Racks    []string            `codec:"racks" json:"racks"`
	Servers  []string            `codec:"servers" json:"servers"`
}

// MaxResolveNodes bounds the nodes one Federation.ResolveNodes or
// Node.Which names.
const MaxResolveNodes = 1024

// NodeWhichRequest asks a sub-cluster's server which of Nodes it holds
// (Node.Which): how the routers resolve nodes to sub-clusters.
type NodeWhichRequest struct {
	RequestHeader
	Nodes []string `codec:"nodes" json:"nodes"`
}

// NodeWhichResponse names the nodes of the request the cluster holds.
type NodeWhichResponse struct {
	Nodes []string `codec:"nodes" json:"nodes"`
}

// FederationResolveNodesRequest asks the routers which sub-cluster holds
// each of Nodes (Federation.ResolveNodes): an AMRMProxy sending a node ask
// to the sub-cluster that owns the node. Agents ask it (CapAgent).
type FederationResolveNodesRequest struct {
	RequestHeader
	Nodes []string `codec:"nodes" json:"nodes"`
}

// FederationResolveNodesResponse maps each node found to its sub-cluster
// (the first by ID when several hold a node of that name); Unreachable
// names the sub-clusters that could not be asked, each with why.
type FederationResolveNodesResponse struct {
	Owners      map[string]string `codec:"owners" json:"owners"`
	Unreachable []string          `codec:"unreachable,omitempty" json:"unreachable,omitempty"`
}

// AMVerifyRequest asks an app's home whether Token is a valid AM token of
// the app's current attempt (AM.Verify, CapFederation): how the routers
// check an AMRMProxy that asks for an unmanaged AM in another sub-cluster,
// whose servers never trust the home's workload keys.
type AMVerifyRequest struct {
	RequestHeader
	AppID   string `codec:"app_id" json:"app_id"`
	Attempt int    `codec:"attempt" json:"attempt"`
	Token   string `codec:"token" json:"token"`
}

// AMVerifyResponse answers AM.Verify for a valid token: the app's queue
// (a leaf path), user, priority, name and state.
type AMVerifyResponse struct {
	Queue    string `codec:"queue" json:"queue"`
	User     string `codec:"user" json:"user"`
	Priority int32  `codec:"priority" json:"priority"`
	Name     string `codec:"name" json:"name"`
	State    string `codec:"state" json:"state"`
}

// AppSubmitUnmanagedRequest creates, or brings to the home's attempt, the
// unmanaged AM of a spanning app in this sub-cluster (App.SubmitUnmanaged,
// CapFederation: the routers call it once they have checked the AM). The
// app's ID here is the federation's. A later attempt replaces an earlier
// one: the earlier attempt's containers here are stopped.
type AppSubmitUnmanagedRequest struct {
	RequestHeader
	AppID string `codec:"app_id" json:"app_id"`
	// Home is the sub-cluster the AM runs in; Subcluster this one, which
	// the servers check is theirs.
	Home       string `codec:"home" json:"home"`
	Subcluster string `codec:"subcluster" json:"subcluster"`
	Attempt    int    `codec:"attempt" json:"attempt"`
	Queue      string `codec:"queue" json:"queue"`
	User       string `codec:"user" json:"user"`
	Priority   int32  `codec:"priority" json:"priority"`
	Name       string `codec:"name" json:"name"`
}

// AppSubmitUnmanagedResponse gives the AM token of the unmanaged attempt,
// minted by this sub-cluster: the AMRMProxy's AM.Allocate and AM.Finish
// here carry it.
type AppSubmitUnmanagedResponse struct {
	AppID   string `codec:"app_id" json:"app_id"`
	Attempt int    `codec:"attempt" json:"attempt"`
	AMToken string `codec:"am_token" json:"am_token"`
	Index   uint64 `codec:"index" json:"index"`
}

// FederationRegisterSpanRequest asks the routers for an unmanaged AM of an
// app in another sub-cluster (Federation.RegisterSpan, CapAgent): the
// AMRMProxy of the AM's node sends it with the AM's token, which the
// routers check with the home.
type FederationRegisterSpanRequest struct {
	RequestHeader
	Home string `codec:"home" json:"home"`
	// AppID and Attempt are the app's at its home; Token its AM token.
	AppID      string `codec:"app_id" json:"app_id"`
	Attempt    int    `codec:"attempt" json:"attempt"`
	Token      string `codec:"token" json:"token"`
	Subcluster string `codec:"subcluster" json:"subcluster"`
}

// FederationRegisterSpanResponse answers Federation.RegisterSpan: the
// unmanaged AM's app ID (the federation's), attempt and AM token in the
// secondary, and its servers.
type FederationRegisterSpanResponse struct {
	FederationID string   `codec:"federation_id" json:"federation_id"`
	Attempt      int      `codec:"attempt" json:"attempt"`
	AMToken      string   `codec:"am_token" json:"am_token"`
	Servers      []string `codec:"servers" json:"servers"`
}
