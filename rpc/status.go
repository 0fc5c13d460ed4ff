package rpc

import (
	"time"

	"github.com/weft-sched/weft/scheduler"
)

// Member is one member of the serf pool, as `weft members` shows it.
type Member struct {
	Name    string            `json:"name"`
	Address string            `json:"address"`
	Role    string            `json:"role"`
	Status  string            `json:"status"`
	Tags    map[string]string `json:"tags"`
}

// MembersResponse answers Status.Members.
type MembersResponse struct {
	Members []Member `json:"members"`
}

// LeaderResponse answers Status.Leader. Both fields are empty when the
// answering server knows no leader.
type LeaderResponse struct {
	ID      string `json:"id"`
	Address string `json:"address"`
}

// PeersResponse answers Status.Peers: the RPC addresses in the answering
// server's Raft configuration (empty on a server that was never bootstrapped).
type PeersResponse struct {
	Peers []string `json:"peers"`
}

// NodeCounts counts agent nodes by state.
type NodeCounts struct {
	Ready int `json:"ready"`
	Down  int `json:"down"`
}

// ClusterStatus answers Status.Cluster; it is the `weft status -json` shape.
type ClusterStatus struct {
	ResponseMeta      `codec:"meta" json:"-"`
	Leader            string              `json:"leader"`
	Servers           []RaftServer        `json:"servers"`
	Nodes             NodeCounts          `json:"nodes"`
	Capacity          scheduler.Resources `json:"capacity"`
	UsedGuaranteed    scheduler.Resources `json:"used_guaranteed"`
	UsedOpportunistic scheduler.Resources `json:"used_opportunistic"`
	// Totals over READY nodes of the node list's columns.
	RunningGuaranteed    int            `json:"running_guaranteed"`
	RunningOpportunistic int            `json:"running_opportunistic"`
	Queued               int            `json:"queued"`
	Apps                 map[string]int `json:"apps"`
	// Raft is the answering server's own Raft state (with -stale, any
	// server's; else the leader's).
	Raft RaftStatus `json:"raft"`
}

// RaftServer is one server of the Raft configuration.
type RaftServer struct {
	ID      string `json:"id"`
	Address string `json:"address"`
	// State is "leader" or "follower" as seen by the answering server.
	State string `json:"state"`
	Voter bool   `json:"voter"`
}

// RaftStatus answers Status.Raft: one server's own Raft state.
type RaftStatus struct {
	ID           string        `json:"id"`
	Address      string        `json:"address"`
	State        string        `json:"state"` // Leader, Follower, Candidate or Shutdown
	Term         uint64        `json:"term"`
	LastIndex    uint64        `json:"last_index"`
	CommitIndex  uint64        `json:"commit_index"`
	AppliedIndex uint64        `json:"applied_index"`
	Leader       string        `json:"leader"`
	LeaderID     string        `json:"leader_id"`
	LastContact  time.Duration `json:"last_contact"`
}

// RaftConfigurationResponse answers Operator.RaftGetConfiguration.
type RaftConfigurationResponse struct {
	ResponseMeta `codec:"meta" json:"-"`
	Servers      []RaftServer `json:"servers"`
}

// RaftRemovePeerRequest asks the leader to remove a server from the Raft
// configuration, by ID or by address.
type RaftRemovePeerRequest struct {
	RequestHeader
	ID      string `json:"id"`
	Address string `json:"address"`
}

// WriteResponse answers a write: the Raft index at which it was applied,
// and anything the writer should know about what it did.
type WriteResponse struct {
	Index    uint64   `json:"index"`
	Warnings []string `json:"warnings,omitempty"`
}
