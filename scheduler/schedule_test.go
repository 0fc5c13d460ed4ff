package scheduler

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"
)

// fakeState is an in-memory State; apply mimics what the FSM does with a
// plan, so tests can run several passes.
type fakeState struct {
	nodes      []*Node
	apps       []*App
	cfg        *QueueConfig
	containers []*Container
	now        int64 // Unix ns: when apply records a reservation made
}

func (f *fakeState) Nodes() []*Node            { return f.nodes }
func (f *fakeState) QueueConfig() *QueueConfig { return f.cfg }
func (f *fakeState) Queues() []*Queue          { return f.cfg.Resolve() }
func (f *fakeState) ActiveApps() []*App {
	var out []*App
	for _, a := range f.apps {
		if !a.State.Terminal() {
			out = append(out, a)
		}
	}
	return out
}

func (f *fakeState) NodeLiveContainers(id string) []*Container {
	var out []*Container
	for _, c := range f.containers {
		if c.NodeID == id && c.State.Live() {
			out = append(out, c)
		}
	}
	return out
}

func (f *fakeState) PreemptionMarked() []*Container {
	var out []*Container
	for _, c := range f.containers {
		if c.State.Live() && c.PreemptKillAt > 0 {
			out = append(out, c)
		}
	}
	sort.SliceStable(out, func(i, j int) bool {
		if out[i].PreemptKillAt != out[j].PreemptKillAt {
			return out[i].PreemptKillAt < out[j].PreemptKillAt
		}
		return out[i].ID < out[j].ID
	})
	return out
}

func (f *fakeState) node(id string) *Node {
	for _, n := range f.nodes {
		if n.ID == id {
			return n
		}
	}
	return nil
}

func (f *fakeState) app(id string) *App {
	for _, a := range f.apps {
		if a.ID == id {
			return a
		}
	}
	return nil
}

func (f *fakeState) apply(ps []Placement) {
	for _, p := range ps {
		n, a := f.node(p.NodeID), f.app(p.AppID)
		if p.Reserve || p.Unreserve || n.Reservation != nil && n.Reservation.Matches(&p) {
			// As the FSM keeps reservations (fsm/reservations.go).
			a.Reservations = slices.DeleteFunc(a.Reservations, func(r Reservation) bool { return r.NodeID == p.NodeID })
			n.Reservation = nil
			if p.Reserve {
				r := Reservation{AppID: p.AppID, NodeID: p.NodeID, Attempt: p.Attempt, AskID: p.AskID, IsAM: p.IsAM, Resources: p.Resources, Since: f.now}
				a.Reservations, n.Reservation = append(a.Reservations, r), &r
			}
			if p.Reserve || p.Unreserve {
				continue
			}
		}
		n.AllocatedGuaranteed = n.AllocatedGuaranteed.Add(p.Resources)
		a.Used = a.Used.Add(p.Resources)
		f.containers = append(f.containers, &Container{ID: fmt.Sprintf("c%d", len(f.containers)), AppID: p.AppID,
			NodeID: p.NodeID, AskID: p.AskID, Resources: p.Resources, ExecutionType: Guaranteed, IsAM: p.IsAM,
			State: ContainerRunning, CreateIndex: uint64(len(f.containers) + 1)})
		if p.IsAM {
			a.AMPending = false
			continue
		}
		for i := range a.Asks {
			if a.Asks[i].AskID == p.AskID {
				a.Asks[i].Count--
			}
		}
	}
}

// runningApp is a registered app (its AM is not modelled) asking for n
// containers of r.
func runningApp(id, queue string, index uint64, n int, r Resources) *App {
	return &App{ID: id, Queue: queue, State: AppRunning, CreateIndex: index,
		Asks: []Ask{{AskID: 1, Count: n, Resources: r, ExecutionType: Guaranteed}}}
}

func leaves(policy Policy, names ...string) *QueueConfig {
	cfg := DefaultQueueConfig()
	cfg.Root.Policy = policy
	cfg.Root.Children = nil
	for _, n := range names {
		q := NewQueueSpec(n)
		q.Policy = policy
		cfg.Root.Children = append(cfg.Root.Children, q)
	}
	return cfg
}

func node(id string, mem, vcores int64) *Node {
	return &Node{ID: id, Status: NodeReady, Rack: "/r1", Capacity: Resources{MemoryMB: mem, Vcores: vcores}}
}

func countByApp(ps []Placement) map[string]int {
	out := map[string]int{}
	for _, p := range ps {
		out[p.AppID]++
	}
	return out
}

func schedule(f *fakeState) []Placement {
	return Schedule(f, time.Unix(0, 0), nil, 100000).Placements
}

// Seed 004, the DRF paper: 9 vcores and 18 GB; A asks <1 vcore, 4 GB>,
// B asks <3 vcores, 1 GB>; A runs 3 tasks and B runs 2.
func TestDRFWorkedExample(t *testing.T) {
	f := &fakeState{
		nodes: []*Node{node("n1", 18*1024, 9)},
		cfg:   leaves(PolicyDRF, "a", "b"),
		apps: []*App{
			runningApp("A", "root.a", 1, 100, Resources{MemoryMB: 4 * 1024, Vcores: 1}),
			runningApp("B", "root.b", 2, 100, Resources{MemoryMB: 1024, Vcores: 3}),
		},
	}
	got := countByApp(schedule(f))
	if got["A"] != 3 || got["B"] != 2 {
		t.Fatalf("DRF placed %v, want A=3 B=2", got)
	}
}

func TestWeightsShareTheClusterProportionally(t *testing.T) {
	cfg := leaves(PolicyFair, "big", "small")
	cfg.Root.Children[0].Weight = 3
	f := &fakeState{
		nodes: []*Node{node("n1", 20*1024, 100), node("n2", 20*1024, 100)},
		cfg:   cfg,
		apps: []*App{
			runningApp("B", "root.big", 1, 1000, Resources{MemoryMB: 1024, Vcores: 1}),
			runningApp("S", "root.small", 2, 1000, Resources{MemoryMB: 1024, Vcores: 1}),
		},
	}
	got := countByApp(schedule(f))
	if got["B"] != 30 || got["S"] != 10 {
		t.Fatalf("weights 3:1 placed %v, want 30:10", got)
	}
}

func TestMinShareIsServedFirst(t *testing.T) {
	cfg := leaves(PolicyFair, "a", "b")
	cfg.Root.Children[1].MinResources = Resources{MemoryMB: 6 * 1024, Vcores: 6}
	f := &fakeState{
		nodes: []*Node{node("n1", 8*1024, 100)},
		cfg:   cfg,
		apps: []*App{
			runningApp("A", "root.a", 1, 100, Resources{MemoryMB: 1024, Vcores: 1}),
			runningApp("B", "root.b", 2, 100, Resources{MemoryMB: 1024, Vcores: 1}),
		},
	}
	got := countByApp(schedule(f))
	if got["B"] != 6 || got["A"] != 2 {
		t.Fatalf("placed %v, want B to reach its 6 GB min share first (B=6, A=2)", got)
	}
}

func TestMaxResourcesCapsAQueue(t *testing.T) {
	cfg := leaves(PolicyDRF, "capped", "free")
	cfg.Root.Children[0].MaxResources = &Resources{MemoryMB: 3 * 1024, Vcores: Unlimited}
	f := &fakeState{
		nodes: []*Node{node("n1", 10*1024, 100)},
		cfg:   cfg,
		apps: []*App{
			runningApp("C", "root.capped", 1, 100, Resources{MemoryMB: 1024, Vcores: 1}),
			runningApp("F", "root.free", 2, 100, Resources{MemoryMB: 1024, Vcores: 1}),
		},
	}
	got := countByApp(schedule(f))
	if got["C"] != 3 || got["F"] != 7 {
		t.Fatalf("placed %v, want the capped queue held to 3 GB", got)
	}
}

func TestMaxRunningAppsHoldsAppsInAccepted(t *testing.T) {
	cfg := leaves(PolicyFIFO, "q")
	two := 2
	cfg.Root.Children[0].MaxRunningApps = &two
	am := Resources{MemoryMB: 256, Vcores: 1}
	var apps []*App
	for i := 1; i <= 3; i++ {
		apps = append(apps, &App{ID: fmt.Sprintf("a%d", i), Queue: "root.q", State: AppAccepted, AMPending: true,
			CreateIndex: uint64(i), Spec: AppSpec{AMResources: am}})
	}
	f := &fakeState{nodes: []*Node{node("n1", 8192, 8)}, cfg: cfg, apps: apps}
	got := countByApp(schedule(f))
	if got["a1"] != 1 || got["a2"] != 1 || got["a3"] != 0 {
		t.Fatalf("AM placements %v, want a1 and a2 only", got)
	}
	waiting := held(f)
	if !strings.Contains(waiting["a3"], "max_running_apps 2") || len(waiting) != 1 {
		t.Fatalf("waiting = %v", waiting)
	}
	// When a1 ends, a3 gets its turn.
	f.apply(schedule(&fakeState{nodes: f.nodes, cfg: cfg, apps: apps[:2]}))
	apps[0].State = AppFinished
	if got := countByApp(schedule(f)); got["a3"] != 1 {
		t.Fatalf("after a1 finished: %v", got)
	}
}

func TestPriorityAndFIFOInsideALeaf(t *testing.T) {
	r := Resources{MemoryMB: 1024, Vcores: 1}
	low := runningApp("low", "root.q", 1, 10, r)
	high := runningApp("high", "root.q", 2, 3, r)
	high.Spec.Priority = 5
	later := runningApp("later", "root.q", 3, 10, r)
	f := &fakeState{nodes: []*Node{node("n1", 5*1024, 100)}, cfg: leaves(PolicyFIFO, "q"), apps: []*App{low, high, later}}
	got := countByApp(schedule(f))
	if got["high"] != 3 || got["low"] != 2 || got["later"] != 0 {
		t.Fatalf("placed %v, want priority first (high=3), then FIFO (low=2)", got)
	}
}

func TestDelaySchedulingRelaxesLocality(t *testing.T) {
	cfg := leaves(PolicyFIFO, "q")
	cfg.Scheduler.Locality.NodeDelay = Delay{Opportunities: 2}
	cfg.Scheduler.Locality.RackDelay = Delay{Opportunities: 2}
	n1, n2, n3 := node("n1", 1024, 4), node("n2", 4096, 4), node("n3", 4096, 4)
	n3.Rack = "/r2"
	n1.AllocatedGuaranteed = Resources{MemoryMB: 1024, Vcores: 1} // the wanted node is full
	app := runningApp("a", "root.q", 1, 1, Resources{MemoryMB: 1024, Vcores: 1})
	app.Asks[0].Locality = Locality{Nodes: []string{"n1"}, Relax: true}
	f := &fakeState{nodes: []*Node{n1, n2, n3}, cfg: cfg, apps: []*App{app}}
	waits := NewLocalityWaits()
	now := time.Unix(100, 0)
	for pass := 1; pass <= 2; pass++ {
		if ps := Schedule(f, now, waits, 10).Placements; len(ps) != 0 {
			t.Fatalf("pass %d placed %v before node_delay missed opportunities", pass, ps)
		}
	}
	ps := Schedule(f, now, waits, 10).Placements
	if len(ps) != 1 || ps[0].NodeID != "n2" {
		t.Fatalf("after node_delay: %v, want a rack-local placement on n2", ps)
	}

	// Strict locality never leaves the named node.
	strict := runningApp("s", "root.q", 2, 1, Resources{MemoryMB: 1024, Vcores: 1})
	strict.Asks[0].Locality = Locality{Nodes: []string{"n1"}}
	f.apps = []*App{strict}
	for i := 0; i < 10; i++ {
		if ps := Schedule(f, now, waits, 10).Placements; len(ps) != 0 {
			t.Fatalf("strict locality placed %v", ps)
		}
	}
}

// A relaxed ask takes a node it names when one has room, even when it may
// already go anywhere (no delay configured, or its delays passed): relaxed
// is leave to go further, not an order to. With the named nodes full it
// goes elsewhere at once.
func TestRelaxedLocalityStillPrefersTheNamedNodes(t *testing.T) {
	r := Resources{MemoryMB: 1024, Vcores: 1}
	cfg := leaves(PolicyFIFO, "q") // no locality delays
	nodes := []*Node{node("n1", 4096, 4), node("n2", 4096, 4), node("n3", 4096, 4), node("n4", 4096, 4)}
	app := runningApp("a", "root.q", 1, 3, r)
	app.Asks[0].Locality = Locality{Nodes: []string{"n3", "n4", "gone"}, Relax: true}
	f := &fakeState{nodes: nodes, cfg: cfg, apps: []*App{app}}
	got := map[string]int{}
	for _, p := range schedule(f) {
		got[p.NodeID]++
	}
	if got["n3"]+got["n4"] != 3 || got["n3"] == 0 || got["n4"] == 0 {
		t.Fatalf("placed %v, want all three on the named n3 and n4, spread between them", got)
	}
	nodes[2].AllocatedGuaranteed, nodes[3].AllocatedGuaranteed = nodes[2].Capacity, nodes[3].Capacity
	app = runningApp("b", "root.q", 1, 2, r)
	app.Asks[0].Locality = Locality{Nodes: []string{"n3", "n4"}, Relax: true}
	f.apps = []*App{app}
	got = map[string]int{}
	for _, p := range schedule(f) {
		got[p.NodeID]++
	}
	if got["n1"]+got["n2"] != 2 {
		t.Fatalf("with the named nodes full: placed %v, want both elsewhere at once", got)
	}
}

func TestSpreadAndBinpack(t *testing.T) {
	r := Resources{MemoryMB: 1024, Vcores: 1}
	for _, c := range []struct {
		policy PlacementPolicy
		want   map[string]int
	}{
		{PlacementSpread, map[string]int{"n1": 2, "n2": 2}},
		{PlacementBinpack, map[string]int{"n1": 4}},
	} {
		cfg := leaves(PolicyFIFO, "q")
		cfg.Scheduler.Placement = c.policy
		f := &fakeState{nodes: []*Node{node("n1", 8192, 8), node("n2", 8192, 8)}, cfg: cfg,
			apps: []*App{runningApp("a", "root.q", 1, 4, r)}}
		got := map[string]int{}
		for _, p := range schedule(f) {
			got[p.NodeID]++
		}
		if fmt.Sprint(got) != fmt.Sprint(c.want) {
			t.Errorf("%s placed %v, want %v", c.policy, got, c.want)
		}
	}
}

// Property tests over seeded random clusters.
func TestSchedulingProperties(t *testing.T) {
	for seed := uint64(1); seed <= 200; seed++ {
		rng := rand.New(rand.NewPCG(seed, seed*7919))
		f := randomCluster(rng)
		ps := schedule(f)
		f.apply(ps)
		for _, n := range f.nodes {
			if !n.AllocatedGuaranteed.Fits(n.Capacity) {
				t.Fatalf("seed %d: node %s overcommitted: %v of %v", seed, n.ID, n.AllocatedGuaranteed, n.Capacity)
			}
		}
		used := map[string]Resources{}
		for _, a := range f.apps {
			for q := a.Queue; q != ""; q = parentOf(q) {
				used[q] = used[q].Add(a.Used)
			}
		}
		for _, q := range f.cfg.Resolve() {
			if q.MaxResources != nil && !used[q.Path].WithinLimit(*q.MaxResources) {
				t.Fatalf("seed %d: queue %s uses %v over its max %v", seed, q.Path, used[q.Path], *q.MaxResources)
			}
		}
	}
}

func parentOf(path string) string {
	if i := strings.LastIndex(path, "."); i >= 0 {
		return path[:i]
	}
	return ""
}

func randomCluster(rng *rand.Rand) *fakeState {
	policies := []Policy{PolicyFIFO, PolicyFair, PolicyDRF}
	cfg := DefaultQueueConfig()
	cfg.Root.Policy = policies[rng.IntN(3)]
	cfg.Root.Children = nil
	var leafPaths []string
	for i := 0; i < 1+rng.IntN(4); i++ {
		p := NewQueueSpec(fmt.Sprintf("p%d", i))
		p.Policy = policies[rng.IntN(3)]
		p.Weight = float64(1 + rng.IntN(4))
		if rng.IntN(3) == 0 {
			p.MaxResources = &Resources{MemoryMB: int64(1+rng.IntN(20)) * 1024, Vcores: Unlimited}
		}
		for j := 0; j < 1+rng.IntN(3); j++ {
			l := NewQueueSpec(fmt.Sprintf("l%d", j))
			l.Policy = policies[rng.IntN(3)]
			l.Weight = float64(1 + rng.IntN(4))
			if rng.IntN(4) == 0 {
				l.MinResources = Resources{MemoryMB: int64(rng.IntN(8)) * 1024}
			}
			p.Children = append(p.Children, l)
			leafPaths = append(leafPaths, "root."+p.Name+"."+l.Name)
		}
		cfg.Root.Children = append(cfg.Root.Children, p)
	}
	f := &fakeState{cfg: cfg}
	for i := 0; i < 1+rng.IntN(10); i++ {
		f.nodes = append(f.nodes, node(fmt.Sprintf("n%d", i), int64(4+rng.IntN(28))*1024, int64(2+rng.IntN(30))))
	}
	for i := 0; i < 1+rng.IntN(12); i++ {
		r := Resources{MemoryMB: int64(1+rng.IntN(6)) * 512, Vcores: int64(1 + rng.IntN(4))}
		f.apps = append(f.apps, runningApp(fmt.Sprintf("a%d", i), leafPaths[rng.IntN(len(leafPaths))], uint64(i+1), 1+rng.IntN(40), r))
	}
	return f
}

// With more demand than supply, DRF (progressive filling) leaves the
// dominant shares of equal sibling queues within one task of each other,
// unless the poorer queue's next task fits on no node any more.
func TestDRFBalancesDominantShares(t *testing.T) {
	for seed := uint64(1); seed <= 100; seed++ {
		rng := rand.New(rand.NewPCG(seed, 1))
		f := &fakeState{cfg: leaves(PolicyDRF, "a", "b", "c")}
		for i := 0; i < 1+rng.IntN(6); i++ {
			f.nodes = append(f.nodes, node(fmt.Sprintf("n%d", i), 64*1024, 64))
		}
		var cluster Resources
		for _, n := range f.nodes {
			cluster = cluster.Add(n.Capacity)
		}
		task := map[string]Resources{}
		for i, q := range []string{"a", "b", "c"} {
			r := Resources{MemoryMB: int64(1+rng.IntN(8)) * 512, Vcores: int64(1 + rng.IntN(4))}
			task[q] = r
			f.apps = append(f.apps, runningApp(q, "root."+q, uint64(i+1), 100000, r))
		}
		f.apply(schedule(f))
		fitsSomewhere := func(r Resources) bool {
			for _, n := range f.nodes {
				if r.Fits(n.FreeGuaranteed()) {
					return true
				}
			}
			return false
		}
		for _, a := range f.apps {
			for _, b := range f.apps {
				sa, sb := DominantShare(a.Used, cluster), DominantShare(b.Used, cluster)
				if sa-sb > DominantShare(task[a.ID], cluster)+1e-9 && fitsSomewhere(task[b.ID]) {
					t.Fatalf("seed %d: %s has dominant share %.4f, %s only %.4f though its next task still fits",
						seed, a.ID, sa, b.ID, sb)
				}
			}
		}
	}
}

// With no AM pending and no ask outstanding a pass places nothing and
// sweeps the locality waits as any pass does; with one ask it places it.
func TestScheduleWithoutDemand(t *testing.T) {
	f := benchState(50, 1, 2, 0)
	waits := NewLocalityWaits()
	waits.waits[askKey{app: "gone"}] = &localityWait{}
	if d := Schedule(f, time.Unix(0, 0), waits, 100); len(d.Placements) != 0 {
		t.Fatalf("placed %d with no demand", len(d.Placements))
	}
	if len(waits.waits) != 0 {
		t.Fatalf("the pass left %d locality waits unswept", len(waits.waits))
	}
	f.apps[0].Asks = []Ask{{AskID: 1, Count: 1, Resources: Resources{MemoryMB: 512, Vcores: 1}}}
	if d := Schedule(f, time.Unix(0, 0), waits, 100); len(d.Placements) != 1 {
		t.Fatalf("placed %d for one ask", len(d.Placements))
	}
}
