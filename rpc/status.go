package rpc

import (
	"time"

	"github.com/weft-sched/weft/scheduler"
)

// Member is one member of the serf pool, as `weft members` shows it.
type Member struct {
	Name    string            `codec:"name" json:"name"`
	Address string            `codec:"address" json:"address"`
	Role    string            `codec:"role" json:"role"`
	Status  string            `codec:"status" json:"status"`
	Tags    map[string]string `codec:"tags" json:"tags"`
}

// MembersResponse answers Status.Members.
type MembersResponse struct {
	Members []Member `codec:"members" json:"members"`
}

// LeaderResponse answers Status.Leader. Both fields are empty when the
// answering server knows no leader.
type LeaderResponse struct {
	ID      string `codec:"id" json:"id"`
	Address string `codec:"address" json:"address"`
}

// SelfResponse answers Status.Self: the answering server's own ID and RPC
// address (a leader checks them before it makes a serf member a voter).
type SelfResponse struct {
	ID      string `codec:"id" json:"id"`
	Address string `codec:"address" json:"address"`
}

// PeersResponse answers Status.Peers: the RPC addresses in the answering
// server's Raft configuration (empty on a server that was never bootstrapped).
type PeersResponse struct {
	Peers []string `codec:"peers" json:"peers"`
}

// NodeCounts counts agent nodes by state.
type NodeCounts struct {
	Ready    int `codec:"ready" json:"ready"`
	Draining int `codec:"draining" json:"draining"`
	Down     int `codec:"down" json:"down"`
}

// ClusterStatus answers Status.Cluster; it is the `weft status -json` shape.
type ClusterStatus struct {
	ResponseMeta      `codec:"meta" json:"-"`
	Leader            string              `codec:"leader" json:"leader"`
	Servers           []RaftServer        `codec:"servers" json:"servers"`
	Nodes             NodeCounts          `codec:"nodes" json:"nodes"`
	Capacity          scheduler.Resources `codec:"capacity" json:"capacity"`
	UsedGuaranteed    scheduler.Resources `codec:"used_guaranteed" json:"used_guaranteed"`
	UsedOpportunistic scheduler.Resources `codec:"used_opportunistic" json:"used_opportunistic"`
	// Totals over READY nodes of the node list's columns.
	RunningGuaranteed    int            `codec:"running_guaranteed" json:"running_guaranteed"`
	RunningOpportunistic int            `codec:"running_opportunistic" json:"running_opportunistic"`
	Queued               int            `codec:"queued" json:"queued"`
	Apps                 map[string]int `codec:"apps" json:"apps"`
	// Raft is the answering server's own Raft state (with -stale, any
	// server's; else the leader's).
	Raft RaftStatus `codec:"raft" json:"raft"`
	// Subclusters names the sub-clusters a federation's router totalled
	// (Servers and Raft are then the routers'); Unreachable those it
	// could not ask, each with why.
	Subclusters []string `codec:"subclusters,omitempty" json:"subclusters,omitempty"`
	Unreachable []string `codec:"unreachable,omitempty" json:"unreachable,omitempty"`
}

// RaftServer is one server of the Raft configuration.
type RaftServer struct {
	ID      string `codec:"id" json:"id"`
	Address string `codec:"address" json:"address"`
	// State is "leader" or "follower" as seen by the answering server.
	State string `codec:"state" json:"state"`
	Voter bool   `codec:"voter" json:"voter"`
}

// RaftStatus answers Status.Raft: one server's own Raft state.
type RaftStatus struct {
	ID           string        `codec:"id" json:"id"`
	Address      string        `codec:"address" json:"address"`
	State        string        `codec:"state" json:"state"` // Leader, Follower, Candidate or Shutdown
	Term         uint64        `codec:"term" json:"term"`
	LastIndex    uint64        `codec:"last_index" json:"last_index"`
	CommitIndex  uint64        `codec:"commit_index" json:"commit_index"`
	AppliedIndex uint64        `codec:"applied_index" json:"applied_index"`
	Leader       string        `codec:"leader" json:"leader"`
	LeaderID     string        `codec:"leader_id" json:"leader_id"`
	LastContact  time.Duration `codec:"last_contact" json:"last_contact"`
}

// RaftConfigurationResponse answers Operator.RaftGetConfiguration.
type RaftConfigurationResponse struct {
	ResponseMeta `codec:"meta" json:"-"`
	Servers      []RaftServer `codec:"servers" json:"servers"`
}

// RaftRemovePeerRequest asks the leader to remove a server from the Raft
// configuration, by ID or by address.
type RaftRemovePeerRequest struct {
	RequestHeader
	ID      string `codec:"id" json:"id"`
	Address string `codec:"address" json:"address"`
}

// WriteResponse answers a write: the Raft index at which it was applied,
// and anything the writer should know about what it did.
type WriteResponse struct {
	Index    uint64   `codec:"index" json:"index"`
	Warnings []string `codec:"warnings" json:"warnings,omitempty"`
}
