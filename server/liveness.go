package server

import (
	"fmt"
	"time"

	wrpc "github.com/weft-sched/weft/rpc"
	"github.com/weft-sched/weft/scheduler"
)

// Node liveness settings (SPEC §12, §13).
const (
	// DefaultNodeTTL is how long a node may go without a heartbeat.
	DefaultNodeTTL = 10 * time.Second
	// DefaultNodeGossipGrace is how long a node gossip reports failed (or
	// gone) may go without a heartbeat before it is DOWN: two independent
	// signals agree, so this is much shorter than the TTL.
	DefaultNodeGossipGrace = 3 * time.Second
	// ContainerStartTimeout is how long an allocation may wait to be started.
	ContainerStartTimeout = 10 * time.Minute
)

// gossipStatus is what the serf pool says of a node's agent.
type gossipStatus uint8

const (
	gossipUnknown gossipStatus = iota
	gossipAlive
	gossipFailed
	gossipLeft
)

func (g gossipStatus) String() string {
	return [...]string{"unknown", "alive", "failed", "left"}[g]
}

// liveness is the leader's memory of when each node last heartbeated, what
// load it reported and what gossip says of its agent, and the rule that
// decides when a node is DOWN. It is a state machine: its inputs are
// heartbeats, gossip reports and Tick(now); it reads no clock and takes no
// lock (the server serializes calls). It is not replicated: a new leader
// starts every clock afresh (the grace period of SPEC §13).
//
// A node is marked DOWN only on evidence a healthy node cannot produce:
//
//   - it sent no heartbeat for the TTL while the leader heard from at least
//     half of its nodes (the leader is reachable by the node's peers, so the
//     silence is the node's own, not the leader's isolation); or
//   - gossip reports its agent failed or gone and it sent no heartbeat for
//     the gossip grace.
//
// When the leader hears from fewer than half of its nodes (it is cut off,
// or was paused), TTL expiry is suspended; once it hears from most of them
// again, every clock restarts, so that the nodes still reconnecting get a
// full TTL.
type liveness struct {
	ttl         time.Duration
	gossipGrace time.Duration

	nodes map[string]*nodeSeen
	// gossip holds what serf last said of each agent, by node ID; it
	// outlives registrations.
	gossip map[string]gossipStatus
	// isolated is set while the leader hears from fewer than half its nodes.
	isolated bool
}

type nodeSeen struct {
	epoch    uint64
	seq      uint64    // the newest numbered heartbeat applied at this epoch
	last     time.Time // last heartbeat at this epoch, or the start of its grace
	load     wrpc.NodeLoad
	reported bool // a heartbeat has reported load at this epoch
}

// nodeDown is the decision to mark a node DOWN at its epoch.
type nodeDown struct {
	ID     string
	Epoch  uint64
	Reason string
}

func newLiveness(ttl, gossipGrace time.Duration) *liveness {
	return &liveness{ttl: ttl, gossipGrace: gossipGrace, nodes: map[string]*nodeSeen{}, gossip: map[string]gossipStatus{}}
}

// Heartbeat records that a node heartbeated at epoch at now, and the load
// it reported.
func (l *liveness) Heartbeat(id string, epoch uint64, now time.Time, load *wrpc.NodeLoad) {
	n, ok := l.nodes[id]
	if !ok || n.epoch != epoch {
		n = &nodeSeen{epoch: epoch}
		l.nodes[id] = n
	}
	if now.After(n.last) {
		n.last = now
	}
	if load != nil {
		n.load, n.reported = *load, true
	}
}

// Sequence reports whether heartbeat seq of a node at epoch may be
// applied: it is not older than every numbered one accepted before at that
// epoch, and it remembers the newest. The newest itself again is a retry
// (a follower that forwarded it in a batch that timed out sends it alone),
// and applying it again changes nothing its first time did not. An
// unnumbered heartbeat (seq 0) is always taken.
func (l *liveness) Sequence(id string, epoch, seq uint64) bool {
	if seq == 0 {
		return true
	}
	n, ok := l.nodes[id]
	if !ok || n.epoch != epoch {
		n = &nodeSeen{epoch: epoch}
		l.nodes[id] = n
	}
	if seq < n.seq {
		return false
	}
	n.seq = seq
	return true
}

// Gossip records what the serf pool says of a node's agent.
func (l *liveness) Gossip(id string, status gossipStatus) { l.gossip[id] = status }

// Reset starts every node's clock at now and forgets their loads, which
// may be a term old: called when leadership begins.
func (l *liveness) Reset(now time.Time) {
	for _, n := range l.nodes {
		n.last = now
		n.load, n.reported = wrpc.NodeLoad{}, false
	}
	l.isolated = false
}

// Tick decides, at now, which of the given nodes are DOWN. Nodes this
// leader has not seen at their current epoch get their clock started now.
func (l *liveness) Tick(now time.Time, nodes []*scheduler.Node) []nodeDown {
	tracked, fresh := 0, 0
	for _, n := range nodes {
		if n.Status == scheduler.NodeDown {
			continue
		}
		tracked++
		seen, ok := l.nodes[n.ID]
		if !ok || seen.epoch != n.Epoch {
			seen = &nodeSeen{epoch: n.Epoch, last: now}
			l.nodes[n.ID] = seen
		}
		if now.Sub(seen.last) <= l.ttl {
			fresh++
		}
	}
	peersHeard := tracked >= 2 && 2*fresh >= tracked
	switch {
	case !peersHeard && tracked >= 2:
		l.isolated = true
	case peersHeard && l.isolated:
		// Back in touch with most nodes: whoever is still reconnecting
		// gets a full TTL from now.
		for _, seen := range l.nodes {
			if seen.last.Before(now) {
				seen.last = now
			}
		}
		l.isolated = false
	}
	var out []nodeDown
	for _, n := range nodes {
		if n.Status == scheduler.NodeDown {
			continue
		}
		silent := now.Sub(l.nodes[n.ID].last)
		g := l.gossip[n.ID]
		switch {
		case (g == gossipFailed || g == gossipLeft) && silent > l.gossipGrace:
			out = append(out, nodeDown{n.ID, n.Epoch, fmt.Sprintf("gossip reports the agent %s and it sent no heartbeat for %s", g, silent.Round(time.Second))})
		case silent > l.ttl && peersHeard:
			out = append(out, nodeDown{n.ID, n.Epoch, fmt.Sprintf("no heartbeat for %s while %d of %d nodes were heard", silent.Round(time.Second), fresh, tracked)})
		}
	}
	l.forgetGone(nodes)
	return out
}

// forgetGone drops the clocks of nodes the state no longer holds as live.
func (l *liveness) forgetGone(nodes []*scheduler.Node) {
	if len(l.nodes) <= len(nodes) {
		return
	}
	keep := make(map[string]bool, len(nodes))
	for _, n := range nodes {
		if n.Status != scheduler.NodeDown {
			keep[n.ID] = true
		}
	}
	for id := range l.nodes {
		if !keep[id] {
			delete(l.nodes, id)
		}
	}
}

// Load returns the load a node last reported at its current epoch, if it
// has reported one.
func (l *liveness) Load(id string) (*wrpc.NodeLoad, bool) {
	if n, ok := l.nodes[id]; ok && n.reported {
		return &n.load, true
	}
	return nil, false
}

// Isolated reports whether the leader hears from fewer than half its nodes.
func (l *liveness) Isolated() bool { return l.isolated }
