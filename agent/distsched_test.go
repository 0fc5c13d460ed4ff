package agent

import (
	"testing"
	"time"

	wrpc "github.com/weft-sched/weft/rpc"
	"github.com/weft-sched/weft/scheduler"
)

func node1(queueSpace int) []scheduler.LeastLoadedNode {
	return []scheduler.LeastLoadedNode{{NodeID: "n1", Address: "n1:1", QueueSpace: queueSpace}}
}

// A list computed before this scheduler's latest allocations does not
// reflect them: installing it must not hand their places out again. A list
// computed well after them does reflect them.
func TestNewListLessRecentAllocations(t *testing.T) {
	d := newDistScheduler(time.Second)
	t0 := time.Unix(1000, 0)
	d.update(&wrpc.HeartbeatResponse{LeastLoaded: node1(4), LeastLoadedAt: t0.UnixNano()}, t0)
	ask := scheduler.Ask{Count: 3, Resources: oneCore, ExecutionType: scheduler.Opportunistic}
	if got := d.allocate(ask, t0.Add(100*time.Millisecond)); len(got) != 3 {
		t.Fatalf("allocated %d of 3 from 4 places", len(got))
	}
	// Computed 400 ms after those allocations: within the margin, the
	// three may not have started yet and count as taken.
	d.update(&wrpc.HeartbeatResponse{LeastLoaded: node1(4), LeastLoadedAt: t0.Add(500 * time.Millisecond).UnixNano()}, t0.Add(600*time.Millisecond))
	if got := d.allocate(scheduler.Ask{Count: 4, Resources: oneCore}, t0.Add(700*time.Millisecond)); len(got) != 1 {
		t.Fatalf("allocated %d from a list that may not reflect 3 recent allocations, want 1", len(got))
	}
	// Computed long after: its 4 places are real.
	d.update(&wrpc.HeartbeatResponse{LeastLoaded: node1(4), LeastLoadedAt: t0.Add(3 * time.Second).UnixNano()}, t0.Add(3*time.Second))
	if got := d.allocate(scheduler.Ask{Count: 4, Resources: oneCore}, t0.Add(3100*time.Millisecond)); len(got) != 4 {
		t.Fatalf("allocated %d from a list that reflects every earlier allocation, want 4", len(got))
	}
	// The same computation again (the leader omits the list) changes nothing.
	d.update(&wrpc.HeartbeatResponse{LeastLoadedAt: t0.Add(3 * time.Second).UnixNano()}, t0.Add(4*time.Second))
	if got := d.allocate(scheduler.Ask{Count: 1, Resources: oneCore}, t0.Add(4*time.Second)); len(got) != 0 {
		t.Fatalf("a repeated computation renewed the room")
	}
	// A new leader still gathering loads (at 0) keeps the list.
	d.update(&wrpc.HeartbeatResponse{}, t0.Add(5*time.Second))
	if l, _ := d.snapshot(); len(l) != 1 {
		t.Fatalf("list dropped on an answer without one")
	}
}
