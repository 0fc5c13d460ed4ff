package raftnode

import (
	"sync"
	"time"

	"github.com/hashicorp/raft"
)

// A blocking read (a read with a min_query_index) is answered by the
// member it reaches, from its own state, while that member is fresh: the
// leader once it is ready; a follower that knows the leader, heard from it
// within MaxStale and has applied all but at most MaxStaleEntries of the
// entries it knows to be committed. A member that is not fresh forwards
// blocking reads to the leader, as it does every consistent read (as
// Consul's servers answer `?stale` reads, bounded by MaxStaleDuration). So
// a flood of blocking reads through a follower waits on the follower's
// state, not on the leader, and the cluster's watchers spread over every
// server.
const (
	// MaxStale bounds how long ago a follower last heard from the leader
	// and still answers blocking reads itself.
	MaxStale = 5 * time.Second
	// MaxStaleEntries bounds how many committed entries a follower may
	// not have applied yet and still answer blocking reads itself.
	MaxStaleEntries = 256
	// freshnessInterval is how often a member looks again at whether it is
	// fresh.
	freshnessInterval = 250 * time.Millisecond
)

// freshness is this member's fitness to answer blocking reads, as the
// freshness loop last saw it: staleCh is closed the moment the member
// stops being fresh, and a new one made when it is fresh again, so that
// every blocking read it answers from its own state learns at once that it
// no longer should.
type freshness struct {
	mu      sync.Mutex
	fresh   bool
	staleCh chan struct{}
}

func newFreshness() *freshness {
	f := &freshness{staleCh: make(chan struct{})}
	close(f.staleCh) // not fresh until the loop says so
	return f
}

// set records whether the member is fresh now.
func (f *freshness) set(fresh bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	switch {
	case fresh && !f.fresh:
		f.staleCh = make(chan struct{})
	case !fresh && f.fresh:
		close(f.staleCh)
	}
	f.fresh = fresh
}

func (f *freshness) get() (bool, <-chan struct{}) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.fresh, f.staleCh
}

// Fresh reports whether this member answers blocking reads from its own
// state (see MaxStale), and returns a channel that is closed once it no
// longer should: a blocking read it answers waits on that channel too and
// answers at once with what it has (and says how stale that is) when it
// closes. When fresh is false the channel is already closed.
func (n *Node) Fresh() (fresh bool, stale <-chan struct{}) {
	return n.freshness.get()
}

// freshNow decides whether this member is fresh at this moment.
func (n *Node) freshNow() bool {
	if n.halted() {
		return false
	}
	if n.raft.State() == raft.Leader {
		return n.ready.Load()
	}
	if addr, _ := n.raft.LeaderWithID(); addr == "" || string(addr) == n.addr {
		return false
	}
	last := n.raft.LastContact()
	if last.IsZero() || time.Since(last) > MaxStale { // raft keeps real time
		return false
	}
	var applied uint64
	if n.hooks.AppliedIndex != nil {
		applied = n.hooks.AppliedIndex()
	}
	commit := n.raft.CommitIndex()
	return commit <= applied || commit-applied <= MaxStaleEntries
}

// freshnessLoop keeps the member's freshness up to date until shutdown
// (the leader's also changes with its readiness, in leaderLoop). It ticks
// in real time, as Raft keeps its contact times.
func (n *Node) freshnessLoop() {
	ticker := time.NewTicker(freshnessInterval)
	defer ticker.Stop()
	for {
		n.freshness.set(n.freshNow())
		select {
		case <-ticker.C:
		case <-n.shutdownCh:
			n.freshness.set(false)
			return
		}
	}
}
