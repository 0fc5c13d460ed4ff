package agent

import (
	"testing"
	"time"

	wrpc "github.com/weft-sched/weft/rpc"
	"github.com/weft-sched/weft/scheduler"
)

func node1(queueSpace int) []scheduler.LeastLoadedNode {
	return []scheduler.LeastLoadedNode{{NodeID: "n1", Address: "n1:1", QueueSpace: queueSpace,
		Capacity: scheduler.Resources{MemoryMB: 4096, Vcores: 4}}}
}

// list answers a heartbeat with a list of n1 computed age ago (leader
// clock: at is an identity, never compared with the agent's clock).
func list(at int64, age time.Duration, queueSpace int) *wrpc.HeartbeatResponse {
	return &wrpc.HeartbeatResponse{LeastLoaded: node1(queueSpace), LeastLoadedAt: at, LeastLoadedAge: age}
}

// A list computed before this scheduler's latest allocations does not
// reflect them: installing it must not hand their places out again. A list
// computed well after them does reflect them.
func TestNewListLessRecentAllocations(t *testing.T) {
	t0 := time.Unix(1000, 0)
	d := newDistScheduler(time.Second, t0)
	d.update(list(7, 0, 4), 0, t0)
	ask := scheduler.Ask{Count: 3, Resources: oneCore, ExecutionType: scheduler.Opportunistic}
	if got, _ := d.allocate(ask, nil, t0.Add(100*time.Millisecond)); len(got) != 3 {
		t.Fatalf("allocated %d of 3 from 4 places", len(got))
	}
	// Received at t0+600ms, computed 100 ms before (at t0+500ms on this
	// agent's clock, whatever the leader's says): within the margin of the
	// three allocations, which may not be started and reported yet.
	d.update(list(1<<62, 100*time.Millisecond, 4), 7, t0.Add(600*time.Millisecond))
	if got, _ := d.allocate(scheduler.Ask{Count: 4, Resources: oneCore}, nil, t0.Add(700*time.Millisecond)); len(got) != 1 {
		t.Fatalf("allocated %d from a list that may not reflect 3 recent allocations, want 1", len(got))
	}
	// Computed long after: its 4 places are real.
	d.update(list(9, 0, 4), 1<<62, t0.Add(3*time.Second))
	if got, _ := d.allocate(scheduler.Ask{Count: 4, Resources: oneCore}, nil, t0.Add(3100*time.Millisecond)); len(got) != 4 {
		t.Fatalf("allocated %d from a list that reflects every earlier allocation, want 4", len(got))
	}
	// The same computation again, left out of the answer, changes nothing.
	d.update(&wrpc.HeartbeatResponse{LeastLoadedAt: 9}, 9, t0.Add(4*time.Second))
	if got, _ := d.allocate(scheduler.Ask{Count: 1, Resources: oneCore}, nil, t0.Add(4*time.Second)); len(got) != 0 {
		t.Fatalf("a repeated computation renewed the room")
	}
	// A new leader still gathering loads (at 0) keeps the list.
	d.update(&wrpc.HeartbeatResponse{}, 9, t0.Add(5*time.Second))
	if l, _ := d.snapshot(); len(l) != 1 {
		t.Fatalf("list dropped on an answer without one")
	}
}

func TestListLeftOutIsNotAnEmptyList(t *testing.T) {
	t0 := time.Unix(1000, 0)
	d := newDistScheduler(time.Second, t0)
	if v := d.view(); v.ListKnown {
		t.Fatalf("a list is known before any came: no list is not an empty list")
	}
	d.update(list(7, 0, 4), 0, t0)
	// The agent renews its own list while a heartbeat saying it holds
	// computation 7 is in flight; the answer leaves list 7 out.
	d.renew([]scheduler.NodeLoad{{NodeID: "n2", Capacity: scheduler.Resources{MemoryMB: 1024, Vcores: 1}, QueueCapacity: 5}}, 10, t0.Add(5*time.Second), 0)
	d.update(&wrpc.HeartbeatResponse{LeastLoadedAt: 7}, 7, t0.Add(5*time.Second))
	if l, _ := d.snapshot(); len(l) != 1 || l[0].NodeID != "n2" {
		t.Fatalf("list %+v: a left-out list must not replace the renewed one", l)
	}
	// A computation whose list is really empty: no node can take work.
	d.update(&wrpc.HeartbeatResponse{LeastLoadedAt: 8}, 7, t0.Add(6*time.Second))
	if v := d.view(); !v.ListKnown || v.ListLen != 0 {
		t.Fatalf("an empty list from the leader must read as known and empty: %+v", v)
	}
}

func TestRenewsWhenNoListEverCame(t *testing.T) {
	t0 := time.Unix(1000, 0)
	d := newDistScheduler(time.Second, t0)
	if stale, _ := d.stale(t0.Add(2*time.Second), 3*time.Second); stale {
		t.Fatalf("stale before three intervals")
	}
	if stale, n := d.stale(t0.Add(4*time.Second), 3*time.Second); !stale || n != 10 {
		t.Fatalf("stale=%v nodes=%d: an agent that never got a list renews one itself, of nodes_used's default", stale, n)
	}
}

// A recomputed list the leader leaves out as the same as the one held is
// taken as the new computation: its room starts afresh, as if it had been
// sent again. One said to be the same as a list not held changes nothing.
func TestSameListRenewsTheRoom(t *testing.T) {
	t0 := time.Unix(1000, 0)
	d := newDistScheduler(time.Second, t0)
	d.update(list(9, 0, 4), 0, t0)
	if got, _ := d.allocate(scheduler.Ask{Count: 4, Resources: oneCore}, nil, t0); len(got) != 4 {
		t.Fatalf("allocated %d of 4", len(got))
	}
	d.update(&wrpc.HeartbeatResponse{LeastLoadedAt: 12, LeastLoadedSame: true}, 8, t0.Add(3*time.Second))
	if got, _ := d.allocate(scheduler.Ask{Count: 1, Resources: oneCore}, nil, t0.Add(3*time.Second)); len(got) != 0 {
		t.Fatalf("a list said the same as one not held renewed the room")
	}
	d.update(&wrpc.HeartbeatResponse{LeastLoadedAt: 11, LeastLoadedSame: true}, 9, t0.Add(3*time.Second))
	if l, _ := d.snapshot(); len(l) != 1 || d.view().At != 11 {
		t.Fatalf("list %+v at %d after the same list at 11", l, d.view().At)
	}
	if got, _ := d.allocate(scheduler.Ask{Count: 4, Resources: oneCore}, nil, t0.Add(3100*time.Millisecond)); len(got) != 4 {
		t.Fatalf("allocated %d from the same list recomputed after every allocation, want 4", len(got))
	}
}
