package am

import (
	"math/rand/v2"
	"time"

	"github.com/weft-sched/weft/scheduler"
)

// How the built-in AMs run work again after trouble. A container that was
// taken away in good order — its node stopped gracefully (node_stopped) or
// was drained (drained), it was preempted, evicted, shed or turned away by
// a full queue — is asked for again at once and counts nothing. A
// container that failed for its node's sake — it would not start there
// (the node was unreachable, refused it, or could not run it: failed), its
// node went down (lost), or it never started in time (expired) — counts a
// failure against its node, and its task asks again only after a backoff
// that doubles with each such trouble of the task. A node on which
// max_failures_per_node of the app's containers failed is blacklisted for
// the app (YARN's AM node blacklisting); the MapReduce AM also counts the
// task attempts that failed on a node, as Hadoop counts them per tracker.

// Backoff after a task's troubles: the n-th waits retryBase·2^(n-1), at
// most retryMax, less a random part of up to half of it.
const (
	retryBase = 500 * time.Millisecond
	retryMax  = 30 * time.Second
)

// backoff says how long a task waits before it asks for a container again.
type backoff struct {
	base, max time.Duration
	// rand returns a number in [0, 1); it spreads the AMs that failed
	// together, so that they do not come back together.
	rand func() float64
}

func newBackoff() backoff { return backoff{base: retryBase, max: retryMax, rand: rand.Float64} }

// delay is the wait after a task's n-th trouble (n ≥ 1): base·2^(n-1),
// capped at max, of which a random part of up to half is taken off
// ("equal jitter").
func (b backoff) delay(n int) time.Duration {
	d := b.max
	if n < 1 {
		n = 1
	}
	if n <= 32 && b.base<<(n-1) < b.max && b.base<<(n-1) > 0 {
		d = b.base << (n - 1)
	}
	return d - time.Duration(b.rand()*float64(d/2))
}

// nodeTrouble reports whether a container that ended for reason counts a
// failure against its node: it was lost with its node, never started in
// time, or could not be started there.
func nodeTrouble(reason scheduler.ExitReason) bool {
	return reason == scheduler.ReasonLost || reason == scheduler.ReasonExpired || reason == scheduler.ReasonFailed
}

// blacklist is an AM's node blacklist: the failures counted on each node,
// the nodes blacklisted at max of them, and those the servers have not
// been told of yet.
type blacklist struct {
	max      int // failures that blacklist a node; 0: never
	failures map[string]int
	listed   map[string]bool
	unsent   []string
}

func newBlacklist(max int) *blacklist {
	return &blacklist{max: max, failures: map[string]int{}, listed: map[string]bool{}}
}

// failed counts a failure on node; it reports whether that blacklisted
// the node. Past scheduler.MaxBlacklistedNodes no more are listed.
func (b *blacklist) failed(node string) bool {
	if b.max <= 0 || node == "" || b.listed[node] {
		return false
	}
	b.failures[node]++
	if b.failures[node] < b.max || len(b.listed) >= scheduler.MaxBlacklistedNodes {
		return false
	}
	b.listed[node] = true
	b.unsent = append(b.unsent, node)
	return true
}

// has reports whether node is blacklisted.
func (b *blacklist) has(node string) bool { return b.listed[node] }

// take returns the nodes blacklisted since the last take, for an Allocate
// call's blacklist_additions.
func (b *blacklist) take() []string {
	out := b.unsent
	b.unsent = nil
	return out
}
