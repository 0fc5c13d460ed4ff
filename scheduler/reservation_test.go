package scheduler

import (
	"testing"
	"time"
)

var fourCores = Resources{MemoryMB: 4 * 1024, Vcores: 4}

// finishOn ends one of app's task containers on node, as its task would.
func (f *fakeState) finishOn(app, node string) {
	for _, c := range f.containers {
		if c.AppID == app && c.NodeID == node && !c.IsAM && c.State.Live() {
			c.State = ContainerCompleted
			f.node(node).AllocatedGuaranteed = f.node(node).AllocatedGuaranteed.Sub(c.Resources)
			f.app(app).Used = f.app(app).Used.Sub(c.Resources)
			return
		}
	}
}

func (f *fakeState) pass(at time.Time) {
	f.now = at.UnixNano()
	f.apply(Schedule(f, at, nil, DefaultMaxPlacements).Placements)
}

// Lent capacity comes back to a queue whose containers are larger than
// any slot that frees: queue a (half the cluster, 4-core containers) finds
// the cluster full of b's 1-core tasks. Each pass, one of b's tasks ends on
// every node. Without reservations b, asking for more, takes each freed
// core, and a waits for ever. With them, a reserves two nodes at once,
// b's tasks there end within a task length, and a holds its half.
func TestReservationsGiveLentCapacityBack(t *testing.T) {
	cfg := capacityTree([4]any{"a", 50.0, 0.0, 10.0}, [4]any{"b", 50.0, 0.0, 10.0})
	var nodes []*Node
	for _, id := range []string{"n0", "n1", "n2", "n3"} {
		nodes = append(nodes, node(id, 4*1024, 4))
	}
	f := &fakeState{nodes: nodes, cfg: cfg, apps: []*App{userApp("B", "root.b", "bob", 1, 1000)}}
	f.pass(time.Unix(0, 0))
	if got := f.app("B").Used.Vcores; got != 16 {
		t.Fatalf("b alone holds %d of 16 cores, want all", got)
	}
	a := runningApp("A", "root.a", 2, 2, fourCores)
	a.Spec.User = "ann"
	f.apps = append(f.apps, a)
	for step := 1; step <= 4; step++ {
		for _, n := range nodes {
			f.finishOn("B", n.ID)
		}
		f.pass(time.Unix(int64(step), 0))
		if step == 1 {
			if len(f.app("A").Reservations) != 2 || f.node("n0").Reservation == nil || f.node("n1").Reservation == nil {
				t.Fatalf("after the first frees: a holds reservations %+v, want n0 and n1", f.app("A").Reservations)
			}
		}
		if b := f.app("B").Used.Vcores; b+f.app("A").Used.Vcores > 16 {
			t.Fatalf("step %d: more than the cluster placed", step)
		}
	}
	if got, b := f.app("A").Used.Vcores, f.app("B").Used.Vcores; got != 8 || b != 8 {
		t.Fatalf("after one task length: a holds %d cores and b %d, want its 8 back (b 8)", got, b)
	}
	if len(f.app("A").Reservations) != 0 || f.node("n0").Reservation != nil {
		t.Fatalf("reservations left once placed: %+v", f.app("A").Reservations)
	}
}

// A reservation counts against max capacity: a queue at it reserves no
// more, and is never placed past it (YARN's queue-blocked case).
func TestReservationsRespectMaxCapacity(t *testing.T) {
	cfg := capacityTree([4]any{"a", 25.0, 25.0, 10.0}, [4]any{"b", 75.0, 0.0, 10.0})
	nodes := []*Node{node("n0", 4*1024, 4), node("n1", 4*1024, 4), node("n2", 4*1024, 4), node("n3", 4*1024, 4)}
	f := &fakeState{nodes: nodes, cfg: cfg, apps: []*App{userApp("B", "root.b", "bob", 1, 1000)}}
	f.pass(time.Unix(0, 0))
	a := runningApp("A", "root.a", 2, 3, fourCores)
	a.Spec.User = "ann"
	f.apps = append(f.apps, a)
	for step := 1; step <= 6; step++ {
		for _, n := range nodes {
			f.finishOn("B", n.ID)
		}
		f.pass(time.Unix(int64(step), 0))
		held := f.app("A").Used
		for _, r := range f.app("A").Reservations {
			held = held.Add(r.Resources)
		}
		if held.Vcores > 4 {
			t.Fatalf("step %d: a holds and reserves %s, past its max capacity of 4 cores", step, held)
		}
	}
	if got := f.app("A").Used.Vcores; got != 4 {
		t.Fatalf("a holds %d cores, want its max capacity, 4", got)
	}
}

// After reservation_timeout a node is given back: others may use it, and
// the app does not reserve it again for as long (it may another).
func TestReservationsTimeOut(t *testing.T) {
	cfg := capacityTree([4]any{"a", 50.0, 0.0, 10.0}, [4]any{"b", 50.0, 0.0, 10.0})
	cfg.Scheduler.Capacity.ReservationTimeout = time.Minute
	nodes := []*Node{node("n0", 4*1024, 4), node("n1", 4*1024, 4)}
	f := &fakeState{nodes: nodes, cfg: cfg, apps: []*App{userApp("B", "root.b", "bob", 1, 1000)}}
	f.pass(time.Unix(0, 0))
	a := runningApp("A", "root.a", 2, 1, fourCores)
	a.Spec.User = "ann"
	f.apps = append(f.apps, a)
	f.finishOn("B", "n0")
	waits := NewLocalityWaits()
	at := func(s int64) []Placement {
		f.now = time.Unix(s, 0).UnixNano()
		ps := Schedule(f, time.Unix(s, 0), waits, DefaultMaxPlacements).Placements
		f.apply(ps)
		return ps
	}
	at(10)
	if r := f.node("n0").Reservation; r == nil || r.AppID != "A" {
		t.Fatalf("n0's reservation %+v, want a's", r)
	}
	if ps := at(30); len(ps) != 0 {
		t.Fatalf("within the timeout: %+v decided, want nothing (n0 stays held)", ps)
	}
	f.finishOn("B", "n1")
	ps := at(70)
	if f.node("n0").Reservation != nil {
		t.Fatal("n0 still reserved after the timeout")
	}
	if r := f.node("n1").Reservation; r == nil || r.AppID != "A" {
		t.Fatalf("after giving n0 back a reserves n1 (it may not take n0 again): %+v, entries %+v", r, ps)
	}
	if got := f.app("B").Used.Vcores; got != 7 {
		t.Fatalf("b holds %d cores, want 7: n0's freed core is b's again", got)
	}
}

// Fair queues reserve nothing: they take room back by preemption.
func TestFairQueuesReserveNothing(t *testing.T) {
	f := &fakeState{nodes: []*Node{node("n0", 4*1024, 4)}, cfg: leaves(PolicyFair, "a", "b"),
		apps: []*App{runningApp("B", "root.b", 1, 1000, oneGB)}}
	f.pass(time.Unix(0, 0))
	f.apps = append(f.apps, runningApp("A", "root.a", 2, 1, fourCores))
	f.finishOn("B", "n0")
	f.pass(time.Unix(1, 0))
	if f.node("n0").Reservation != nil || len(f.app("A").Reservations) != 0 {
		t.Fatal("a fair queue's app reserved a node")
	}
}

// A node whose AM containers alone leave too little room is not reserved:
// AMs run as long as their apps, and the container would wait there until
// the timeout.
func TestReservationsSkipNodesHeldByAMs(t *testing.T) {
	cfg := capacityTree([4]any{"a", 50.0, 0.0, 10.0}, [4]any{"b", 50.0, 0.0, 10.0})
	f := &fakeState{nodes: []*Node{node("n0", 4*1024, 4), node("n1", 4*1024, 4)}, cfg: cfg,
		apps: []*App{userApp("B", "root.b", "bob", 1, 1000)}}
	f.apply([]Placement{{AppID: "B", NodeID: "n0", Resources: oneGB, IsAM: true}})
	f.pass(time.Unix(0, 0))
	a := runningApp("A", "root.a", 2, 1, fourCores)
	a.Spec.User = "ann"
	f.apps = append(f.apps, a)
	f.finishOn("B", "n0")
	f.finishOn("B", "n1")
	f.pass(time.Unix(1, 0))
	if f.node("n0").Reservation != nil {
		t.Fatal("n0, where b's AM runs, was reserved for a 4-core container")
	}
	if r := f.node("n1").Reservation; r == nil || r.AppID != "A" {
		t.Fatalf("n1's reservation %+v, want a's", r)
	}
}

// Pipelined passes see the reservations of plans in flight: a pass on the
// state with a reservation planned neither reserves that node again nor
// places another app's container there, and the reserved container, once
// it fits, is placed on it once.
func TestPipelinedPassesSeePlannedReservations(t *testing.T) {
	cfg := capacityTree([4]any{"a", 50.0, 0.0, 10.0}, [4]any{"b", 50.0, 0.0, 10.0})
	f := &fakeState{nodes: []*Node{node("n0", 4*1024, 4)}, cfg: cfg, apps: []*App{userApp("B", "root.b", "bob", 1, 1000)}}
	f.pass(time.Unix(1_800_000_000, 0))
	a := runningApp("A", "root.a", 2, 1, fourCores)
	a.Spec.User = "ann"
	f.apps = append(f.apps, a)
	f.finishOn("B", "n0")
	first := Schedule(f, time.Unix(1_800_000_001, 0), nil, DefaultMaxPlacements).Placements
	if len(first) != 1 || !first[0].Reserve || first[0].NodeID != "n0" {
		t.Fatalf("first pass: %+v, want n0 reserved for a", first)
	}
	if again := Schedule(WithPlanned(f, first), time.Unix(1_800_000_001, 0), nil, DefaultMaxPlacements).Placements; len(again) != 0 {
		t.Fatalf("a pass with the reservation in flight decided %+v, want nothing: n0 is held, a's container reserved", again)
	}
	for range 3 {
		f.finishOn("B", "n0")
	}
	ps := Schedule(WithPlanned(f, first), time.Unix(1_800_000_002, 0), nil, DefaultMaxPlacements).Placements
	if len(ps) != 1 || ps[0].Reserve || ps[0].AppID != "A" || ps[0].NodeID != "n0" {
		t.Fatalf("with n0 free and its reservation in flight: %+v, want a's container placed on n0", ps)
	}
	if next := Schedule(WithPlanned(f, first, ps), time.Unix(1_800_000_002, 0), nil, DefaultMaxPlacements).Placements; len(next) != 0 {
		for _, p := range next {
			if p.AppID == "A" {
				t.Fatalf("a's reserved container decided twice: %+v", next)
			}
		}
	}
}
