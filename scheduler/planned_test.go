package scheduler

import (
	"fmt"
	"reflect"
	"testing"
	"time"
)

// pipelined runs passes of at most k placements, each on the state with
// every earlier pass's plan still in flight (WithPlanned), until a pass
// places nothing, and returns every plan.
func pipelined(st State, k int) [][]Placement {
	var plans [][]Placement
	for {
		p := Schedule(WithPlanned(st, plans...), time.Unix(0, 0), nil, k).Placements
		if len(p) == 0 {
			return plans
		}
		plans = append(plans, p)
	}
}

// checkFeasible fails if the plans together take a node past its capacity
// or an ask past its count: what the FSM would refuse.
func checkFeasible(t *testing.T, f *fakeState, plans [][]Placement) {
	t.Helper()
	used := map[string]Resources{}
	placed := map[string]int{}
	for _, plan := range plans {
		for _, p := range plan {
			used[p.NodeID] = used[p.NodeID].Add(p.Resources)
			placed[fmt.Sprintf("%s/%d", p.AppID, p.AskID)]++
		}
	}
	for _, n := range f.nodes {
		if !n.AllocatedGuaranteed.Add(used[n.ID]).Fits(n.Capacity) {
			t.Fatalf("node %s: %s allocated and %s planned exceed its %s", n.ID, n.AllocatedGuaranteed, used[n.ID], n.Capacity)
		}
	}
	for _, a := range f.apps {
		for _, ask := range a.Asks {
			if got := placed[fmt.Sprintf("%s/%d", a.ID, ask.AskID)]; got > ask.Count {
				t.Fatalf("app %s ask %d: %d planned, %d asked", a.ID, ask.AskID, got, ask.Count)
			}
		}
	}
}

// TestPipelinedPassesDecideWhatOnePassWould: passes of one placement each,
// every one on the state with the earlier plans in flight, place exactly
// what a single unbounded pass places — the worked examples' shares — and
// never past a node's capacity or an ask's count.
func TestPipelinedPassesDecideWhatOnePassWould(t *testing.T) {
	cases := map[string]func() *fakeState{
		"DRF paper (seed 004)": func() *fakeState {
			return &fakeState{nodes: []*Node{node("n1", 18*1024, 9)}, cfg: leaves(PolicyDRF, "a", "b"), apps: []*App{
				runningApp("A", "root.a", 1, 100, Resources{MemoryMB: 4 * 1024, Vcores: 1}),
				runningApp("B", "root.b", 2, 100, Resources{MemoryMB: 1024, Vcores: 3})}}
		},
		"weights 3:1": func() *fakeState {
			cfg := leaves(PolicyFair, "big", "small")
			cfg.Root.Children[0].Weight = 3
			return &fakeState{nodes: []*Node{node("n1", 20*1024, 100), node("n2", 20*1024, 100)}, cfg: cfg, apps: []*App{
				runningApp("B", "root.big", 1, 1000, Resources{MemoryMB: 1024, Vcores: 1}),
				runningApp("S", "root.small", 2, 1000, Resources{MemoryMB: 1024, Vcores: 1})}}
		},
		"asks smaller than the cluster": func() *fakeState {
			return &fakeState{nodes: []*Node{node("n1", 64*1024, 64), node("n2", 64*1024, 64)}, cfg: leaves(PolicyFair, "a"), apps: []*App{
				runningApp("A", "root.a", 1, 7, Resources{MemoryMB: 1024, Vcores: 1}),
				runningApp("B", "root.a", 2, 5, Resources{MemoryMB: 2048, Vcores: 1})}}
		},
		"an AM to place first": func() *fakeState {
			f := &fakeState{nodes: []*Node{node("n1", 8*1024, 8)}, cfg: leaves(PolicyFair, "a"), apps: []*App{
				runningApp("A", "root.a", 1, 3, Resources{MemoryMB: 1024, Vcores: 1}),
				{ID: "B", Queue: "root.a", State: AppSubmitted, AMPending: true, CreateIndex: 2,
					Spec: AppSpec{AMResources: Resources{MemoryMB: 1024, Vcores: 1}}}}}
			return f
		},
	}
	for name, mk := range cases {
		t.Run(name, func(t *testing.T) {
			want := countByApp(schedule(mk()))
			for _, k := range []int{1, 2, 7} {
				f := mk()
				plans := pipelined(f, k)
				checkFeasible(t, f, plans)
				var all []Placement
				for _, p := range plans {
					all = append(all, p...)
				}
				if got := countByApp(all); !reflect.DeepEqual(got, want) {
					t.Fatalf("plans of %d placed %v, one pass %v", k, got, want)
				}
			}
		})
	}
}

// TestWithPlannedChangesNothingItWasGiven: the state's nodes and apps are
// copied, never written.
func TestWithPlannedChangesNothingItWasGiven(t *testing.T) {
	f := &fakeState{nodes: []*Node{node("n1", 8*1024, 8)}, cfg: leaves(PolicyFair, "a"), apps: []*App{
		runningApp("A", "root.a", 1, 3, Resources{MemoryMB: 1024, Vcores: 1})}}
	before := fmt.Sprintf("%+v %+v", *f.nodes[0], *f.apps[0])
	plan := schedule(f)
	v := WithPlanned(f, plan)
	if got := v.Nodes()[0].AllocatedGuaranteed; !reflect.DeepEqual(got, Resources{MemoryMB: 3 * 1024, Vcores: 3}) {
		t.Fatalf("planned node holds %s, want the 3 placements", got)
	}
	if got := v.ActiveApps()[0]; len(got.Asks) != 0 || !reflect.DeepEqual(got.Used, Resources{MemoryMB: 3 * 1024, Vcores: 3}) {
		t.Fatalf("planned app: asks %+v, used %s", got.Asks, got.Used)
	}
	if after := fmt.Sprintf("%+v %+v", *f.nodes[0], *f.apps[0]); after != before {
		t.Fatalf("WithPlanned changed its state:\n%s\n%s", before, after)
	}
}

// TestWithPlannedSkipsWhatTheFSMWouldNotHold: opportunistic placements,
// unknown nodes and unknown apps change nothing; a plan counted twice (the
// FSM applied it while it was still in flight) makes a pass place less,
// never more.
func TestWithPlannedSkipsWhatTheFSMWouldNotHold(t *testing.T) {
	f := &fakeState{nodes: []*Node{node("n1", 4*1024, 4)}, cfg: leaves(PolicyFair, "a"), apps: []*App{
		runningApp("A", "root.a", 1, 4, Resources{MemoryMB: 1024, Vcores: 1})}}
	noop := []Placement{
		{AppID: "A", AskID: 1, NodeID: "n1", Resources: Resources{MemoryMB: 1024, Vcores: 1}, Opportunistic: true},
		{AppID: "A", AskID: 1, NodeID: "gone", Resources: Resources{MemoryMB: 1024, Vcores: 1}},
		{AppID: "ghost", AskID: 1, NodeID: "n1", Resources: Resources{MemoryMB: 1024, Vcores: 1}},
	}
	if v := WithPlanned(f, noop); v != State(f) {
		t.Fatalf("placements the FSM would not hold changed the state")
	}
	half := Schedule(f, time.Unix(0, 0), nil, 2).Placements
	twice := Schedule(WithPlanned(f, half, half), time.Unix(0, 0), nil, 100).Placements
	if len(twice) != 0 {
		t.Fatalf("with a 2-placement plan counted twice, a pass placed %d more, want 0", len(twice))
	}
	if once := Schedule(WithPlanned(f, half), time.Unix(0, 0), nil, 100).Placements; len(once) != 2 {
		t.Fatalf("with the plan counted once, a pass placed %d, want the 2 left", len(once))
	}
}
