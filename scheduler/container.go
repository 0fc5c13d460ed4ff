package scheduler

import "strconv"

// ExecutionType says whether a container's resources are guaranteed by the
// leader or used opportunistically at an agent (SPEC §10).
type ExecutionType string

// Execution types.
const (
	Guaranteed    ExecutionType = "GUARANTEED"
	Opportunistic ExecutionType = "OPPORTUNISTIC"
)

// Valid reports whether t is a known execution type.
func (t ExecutionType) Valid() bool { return t == Guaranteed || t == Opportunistic }

// ContainerState is where a container is in its life (SPEC §12).
type ContainerState string

// Container states.
const (
	ContainerAllocated ContainerState = "ALLOCATED" // placed, not started yet
	ContainerQueued    ContainerState = "QUEUED"    // waiting at an agent
	ContainerRunning   ContainerState = "RUNNING"
	// ContainerPaused is an opportunistic container its agent stopped to
	// make room for guaranteed work (opportunistic.pause): it keeps its
	// memory, runs no more until resumed, and counts as neither running
	// nor queued.
	ContainerPaused    ContainerState = "PAUSED"
	ContainerCompleted ContainerState = "COMPLETED"
)

// Live reports whether a container in state s holds or may soon hold
// resources on its node.
func (s ContainerState) Live() bool { return s != ContainerCompleted }

// ExitReason says why a container completed (SPEC §12).
type ExitReason string

// Exit reasons.
const (
	ReasonExited    ExitReason = "exited"    // the process ended by itself
	ReasonKilled    ExitReason = "killed"    // by its AM or a user
	ReasonPreempted ExitReason = "preempted" // fair-share preemption
	ReasonEvicted   ExitReason = "evicted"   // opportunistic, killed for a guaranteed arrival
	ReasonShed      ExitReason = "shed"      // dropped from an agent queue by rebalancing
	ReasonRejected  ExitReason = "rejected"  // agent queue full
	ReasonLost      ExitReason = "lost"      // its node went down
	ReasonExpired   ExitReason = "expired"   // allocated but never started in time
	ReasonFailed    ExitReason = "failed"    // the agent could not start it
	ReasonDrained   ExitReason = "drained"   // its node's drain deadline passed (SPEC §20)
	// ReasonNodeStopped: its node's agent was stopped gracefully (SIGTERM,
	// as for an upgrade or a reboot) and stopped it on its way out.
	ReasonNodeStopped ExitReason = "node_stopped"
	// ReasonOOM: the kernel killed it for passing its memory limit (where
	// the agent enforces limits with cgroups).
	ReasonOOM ExitReason = "oom"
)

// Retryable reports whether work in a container that completed for this
// reason should be run again: the container was taken away, it did not
// fail. An AM attempt whose container ended so does not count against
// max_am_attempts.
func (r ExitReason) Retryable() bool {
	switch r {
	case ReasonPreempted, ReasonEvicted, ReasonShed, ReasonRejected, ReasonLost, ReasonExpired, ReasonDrained, ReasonNodeStopped:
		return true
	}
	return false
}

// Container is one allocation: resources on a node for an app.
type Container struct {
	ID            string         `codec:"id"`
	AppID         string         `codec:"app_id"`
	Attempt       int            `codec:"attempt"` // the AM attempt that owns it
	NodeID        string         `codec:"node_id"`
	AskID         uint64         `codec:"ask_id"`
	Resources     Resources      `codec:"resources"`
	ExecutionType ExecutionType  `codec:"execution_type"`
	IsAM          bool           `codec:"is_am"`
	State         ContainerState `codec:"state"`
	// PreemptKillAt, if set, is when the leader kills this container for
	// PreemptFor (an app) because of PreemptReason; until then its AM is
	// warned.
	PreemptKillAt int64  `codec:"preempt_kill_at"`
	PreemptFor    string `codec:"preempt_for"`
	PreemptReason string `codec:"preempt_reason"`
	// Distributed marks an opportunistic container allocated by an agent's
	// AMRMProxy and recorded from its node's reports: its AM learned of it
	// from the proxy, never from the servers.
	Distributed bool `codec:"distributed"`
	// Promoted marks a container that started opportunistic and was
	// promoted to guaranteed (ExecutionType is then Guaranteed).
	Promoted bool `codec:"promoted"`
	// KillRequested asks the node's agent to stop the container.
	KillRequested bool       `codec:"kill_requested"`
	KillReason    ExitReason `codec:"kill_reason"`
	ExitCode      *int       `codec:"exit_code"`
	Reason        ExitReason `codec:"reason"`
	Diagnostics   string     `codec:"diagnostics"`
	AllocatedAt   int64      `codec:"allocated_at"` // Unix ns
	StartedAt     int64      `codec:"started_at"`
	FinishedAt    int64      `codec:"finished_at"`
	// CreateIndex and ModifyIndex are the Raft indexes of the container's
	// creation and last change; AMs use them to see what is new.
	CreateIndex uint64 `codec:"create_index"`
	ModifyIndex uint64 `codec:"modify_index"`
}

// Copy returns a copy of c that may be modified.
func (c *Container) Copy() *Container {
	n := *c
	if c.ExitCode != nil {
		v := *c.ExitCode
		n.ExitCode = &v
	}
	return &n
}

// GuaranteedContainerID is the ID of the pos-th placement of the plan
// committed at Raft index: unique across leader changes by construction.
// (Centrally allocated opportunistic containers get one too.)
func GuaranteedContainerID(index uint64, pos int) string {
	// "c-%d-%d", built without fmt: every placement makes one.
	var b [48]byte
	id := strconv.AppendUint(append(b[:0], "c-"...), index, 10)
	id = strconv.AppendInt(append(id, '-'), int64(pos), 10)
	return string(id)
}

// PlacedContainerID is the ID of the pos-th placement of the plan
// committed at index, made for app a: GuaranteedContainerID, led by the
// sub-cluster's ID and a dot when a is an unmanaged AM's app, so that the
// containers of an app spanning sub-clusters have IDs unique across the
// federation (SPEC §18). The prefix comes from the replicated app record:
// every server derives the same ID.
func PlacedContainerID(a *App, index uint64, pos int) string {
	id := GuaranteedContainerID(index, pos)
	if a != nil && a.Unmanaged != nil {
		return a.Unmanaged.Subcluster + "." + id
	}
	return id
}

// AgentContainerIDPrefix begins the ID of every container an AMRMProxy
// allocates: o-NODE-EPOCH-SEQ. Leader placements begin with "c-", so the
// two never collide.
const AgentContainerIDPrefix = "o-"

// PlacedSince counts, per ask ID, the containers the servers placed for an
// app's attempt after Raft index: non-AM containers of that attempt with
// CreateIndex > index, of either execution type. Containers an AMRMProxy
// allocated (Distributed) do not count: their AMs knew of them before any
// server did. An AM that has seen the state only up to index has not heard
// of the counted containers, so they are taken off what it still asks for
// and it never gets them twice. cs is the app's containers.
func PlacedSince(cs []*Container, attempt int, index uint64) map[uint64]int {
	out := map[uint64]int{}
	for _, c := range cs {
		if c.Attempt == attempt && !c.IsAM && !c.Distributed && c.CreateIndex > index {
			out[c.AskID]++
		}
	}
	return out
}
