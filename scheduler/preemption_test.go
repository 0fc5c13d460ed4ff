package scheduler

import (
	"fmt"
	"sort"
	"strings"
	"testing"
	"time"
)

var gb1 = Resources{MemoryMB: 1024, Vcores: 1}

// fullCluster: one 8 GB / 8 vcore node filled by app A in queue a (an AM
// plus 7 tasks); app B in queue b is registered and asks for 4 tasks.
func fullCluster(t *testing.T) *fakeState {
	cfg := leaves(PolicyFair, "a", "b")
	cfg.Scheduler.Preemption = PreemptionConfig{Enabled: true, ClusterUtilizationThreshold: 0.8, WaitBeforeKill: time.Second}
	timeout := 5 * time.Second
	cfg.Root.FairSharePreemptionTimeout = &timeout
	f := &fakeState{cfg: cfg, nodes: []*Node{node("n1", 8*1024, 8)}}
	a := runningApp("A", "root.a", 1, 0, gb1)
	a.Asks = nil
	b := runningApp("B", "root.b", 2, 4, gb1)
	f.apps = []*App{a, b}
	f.apply([]Placement{{AppID: "A", NodeID: "n1", Resources: gb1, IsAM: true}})
	for i := 0; i < 7; i++ {
		f.apply([]Placement{{AppID: "A", NodeID: "n1", Resources: gb1}})
	}
	return f
}

func preemptAfter(f *fakeState, timeout time.Duration) []Preemption {
	clocks := NewStarvationClocks()
	t0 := time.Unix(1000, 0)
	if ps := PlanPreemption(f, t0, clocks); len(ps) != 0 {
		return ps // a bug: starvation needs the timeout to pass
	}
	return PlanPreemption(f, t0.Add(timeout), clocks)
}

func TestPreemptionWaitsForTheStarvationTimeout(t *testing.T) {
	f := fullCluster(t)
	clocks := NewStarvationClocks()
	t0 := time.Unix(1000, 0)
	for _, dt := range []time.Duration{0, time.Second, 4 * time.Second} {
		if ps := PlanPreemption(f, t0.Add(dt), clocks); len(ps) != 0 {
			t.Fatalf("preempted %v after %s, before the 5 s timeout", ps, dt)
		}
	}
	if ps := PlanPreemption(f, t0.Add(5*time.Second), clocks); len(ps) == 0 {
		t.Fatalf("nothing preempted after the timeout")
	}
}

func TestPreemptionTakesOnlyWhatTheStarvedAppNeeds(t *testing.T) {
	f := fullCluster(t)
	// Fair shares are 4 GB each; B's threshold (0.5) is 2 GB: two containers.
	ps := preemptAfter(f, 5*time.Second)
	if len(ps) != 2 {
		t.Fatalf("preempted %d containers, want 2: %v", len(ps), ps)
	}
	for _, p := range ps {
		if p.VictimApp != "A" || p.ForApp != "B" || p.NodeID != "n1" {
			t.Fatalf("preemption %+v", p)
		}
	}
}

func TestPreemptionNeverTakesAVictimBelowItsFairShare(t *testing.T) {
	f := fullCluster(t)
	one := 1.0
	f.cfg.Root.FairSharePreemptionThreshold = &one
	f.app("B").Asks[0].Count = 8 // B wants everything
	ps := preemptAfter(f, 5*time.Second)
	// A may lose 4 GB and keep its 4 GB fair share, no more.
	if len(ps) != 4 {
		t.Fatalf("preempted %d, want 4 (A down to its fair share)", len(ps))
	}
}

func TestPreemptionTakesAMContainersLast(t *testing.T) {
	f := fullCluster(t)
	one := 1.0
	f.cfg.Root.FairSharePreemptionThreshold = &one
	for _, p := range preemptAfter(f, 5*time.Second) {
		for _, c := range f.containers {
			if c.ID == p.ContainerID && c.IsAM {
				t.Fatalf("preempted the AM container while tasks were available")
			}
		}
	}
}

func TestPreemptionSparesNonPreemptableQueues(t *testing.T) {
	f := fullCluster(t)
	no := false
	f.cfg.Root.Children[0].Preemptable = &no
	if ps := preemptAfter(f, 5*time.Second); len(ps) != 0 {
		t.Fatalf("preempted %v from a non-preemptable queue", ps)
	}
}

func TestPreemptionNeedsClusterUtilization(t *testing.T) {
	f := fullCluster(t)
	f.nodes = append(f.nodes, node("n2", 32*1024, 32)) // utilization drops to 20%
	// B's ask fits on n2 anyway, but even a huge ask must not preempt here.
	f.app("B").Asks[0].Resources = Resources{MemoryMB: 40 * 1024, Vcores: 1}
	if ps := preemptAfter(f, 5*time.Second); len(ps) != 0 {
		t.Fatalf("preempted %v below the utilization threshold", ps)
	}
}

func TestPreemptionNeverFreesTooLittle(t *testing.T) {
	f := fullCluster(t)
	// B asks for containers bigger than anything A may give up on one node.
	f.app("B").Asks[0].Resources = Resources{MemoryMB: 6 * 1024, Vcores: 1}
	if ps := preemptAfter(f, 5*time.Second); len(ps) != 0 {
		t.Fatalf("preempted %v though the freed room cannot satisfy the ask", ps)
	}
}

// Seed 002's example: a queue with a 6 GB min share whose apps want 3, 2,
// 1 and 0.5 GB: the starved amount goes by demand, largest first, so the
// 0.5 GB app gets nothing.
func TestMinShareStarvationGoesToTheLargestDemandsFirst(t *testing.T) {
	cfg := leaves(PolicyFair, "x", "m")
	cfg.Scheduler.Preemption = PreemptionConfig{Enabled: true, ClusterUtilizationThreshold: 0.8}
	cfg.Root.Children[1].MinResources = Resources{MemoryMB: 6 * 1024}
	timeout := time.Second
	cfg.Root.Children[1].MinSharePreemptionTimeout = &timeout
	half := Resources{MemoryMB: 512, Vcores: 1}
	f := &fakeState{cfg: cfg, nodes: []*Node{node("n1", 8*1024, 64)}}
	x := runningApp("X", "root.x", 1, 0, half)
	x.Asks = nil
	f.apps = []*App{x}
	for i := 0; i < 16; i++ {
		f.apply([]Placement{{AppID: "X", NodeID: "n1", Resources: half}})
	}
	for i, n := range []int{6, 4, 2, 1} { // 3, 2, 1 and 0.5 GB
		f.apps = append(f.apps, runningApp(fmt.Sprintf("m%d", i+1), "root.m", uint64(10+i), n, half))
	}
	got := map[string]int{}
	for _, p := range preemptAfter(f, time.Second) {
		got[p.ForApp]++
	}
	if got["m1"] != 6 || got["m2"] != 4 || got["m3"] != 2 || got["m4"] != 0 {
		t.Fatalf("preempted for %v, want m1=6 m2=4 m3=2 (3+2+1 GB) and nothing for the 0.5 GB app", got)
	}
}

// A DRF victim whose memory is below its fair share but whose vcores are
// far above it is over its share as DRF measures it (dominant share), so
// it can be preempted.
func TestDRFVictimsAreMeasuredByDominantShare(t *testing.T) {
	cfg := leaves(PolicyDRF, "a", "b")
	cfg.Scheduler.Preemption = PreemptionConfig{Enabled: true, ClusterUtilizationThreshold: 0.8}
	one, timeout := 1.0, 2*time.Second
	cfg.Root.FairSharePreemptionThreshold, cfg.Root.FairSharePreemptionTimeout = &one, &timeout
	small := Resources{MemoryMB: 256, Vcores: 1}
	f := &fakeState{cfg: cfg, nodes: []*Node{node("n1", 4096, 4), node("n2", 4096, 4), node("n3", 4096, 4)}}
	a := runningApp("A", "root.a", 1, 0, small)
	a.Asks = nil
	f.apps = []*App{a}
	for i := 0; i < 12; i++ {
		f.apply([]Placement{{AppID: "A", NodeID: fmt.Sprintf("n%d", 1+i%3), Resources: small}})
	}
	f.apps = append(f.apps, &App{ID: "B", Queue: "root.b", State: AppAccepted, AMPending: true, CreateIndex: 2,
		Spec: AppSpec{AMResources: small}})
	ps := preemptAfter(f, timeout)
	if len(ps) != 1 || ps[0].ForApp != "B" {
		t.Fatalf("preempted %v, want one of A's containers for B's AM", ps)
	}
}

// Preemption frees room for whole containers of the starved app's asks, as
// many as its starved amount holds by its policy's measure, and no more.
// One node of 8192 MB / 64 vcores is full of app A's containers (queue a);
// app B (queue b, equal weight) has registered — its AM runs outside this
// scenario and is not modelled, so B holds nothing — and asks for 4
// containers. Both queues' fair share is ⟨4096 MB, 32 vcores⟩, B's starved
// amount min(0.5 × fair share, demand) − usage.
func TestPreemptionFreesOnlyWhatTheStarvedRequestsHold(t *testing.T) {
	cases := []struct {
		name      string
		policy    Policy
		aHolds    Resources // ×16, filling the node's memory
		bAsks     Resources // ×4
		victims   int
		freedMem  int64
		freedCore int64
	}{
		{
			// Starved ⟨2048, 4⟩ holds 2 asks of ⟨1024, 1⟩ by memory; the 2
			// vcores left over do not count (they kept the old loop going
			// to 4 asks, 4096 MB).
			name: "fair: by memory", policy: PolicyFair,
			aHolds: Resources{MemoryMB: 512, Vcores: 1}, bAsks: Resources{MemoryMB: 1024, Vcores: 1},
			victims: 4, freedMem: 2048, freedCore: 4,
		},
		{
			// Starved ⟨2048, 16⟩ has dominant share 0.25; an ask of
			// ⟨512, 8⟩ has 0.125: 2 asks, each freed by two of A's
			// ⟨512, 4⟩ containers. By memory it would be 4 asks (8 victims).
			name: "drf: by dominant share", policy: PolicyDRF,
			aHolds: Resources{MemoryMB: 512, Vcores: 4}, bAsks: Resources{MemoryMB: 512, Vcores: 8},
			victims: 4, freedMem: 2048, freedCore: 16,
		},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			cfg := leaves(c.policy, "a", "b")
			cfg.Scheduler.Preemption = PreemptionConfig{Enabled: true, ClusterUtilizationThreshold: 0.5}
			timeout := 5 * time.Second
			cfg.Root.FairSharePreemptionTimeout = &timeout
			f := &fakeState{cfg: cfg, nodes: []*Node{node("n1", 8192, 64)}}
			a := runningApp("A", "root.a", 1, 0, c.aHolds)
			a.Asks = nil
			f.apps = []*App{a, runningApp("B", "root.b", 2, 4, c.bAsks)}
			for i := 0; i < 16; i++ {
				f.apply([]Placement{{AppID: "A", NodeID: "n1", Resources: c.aHolds}})
			}
			var freed Resources
			ps := preemptAfter(f, timeout)
			for _, p := range ps {
				if p.VictimApp != "A" || p.ForApp != "B" {
					t.Fatalf("preemption %+v", p)
				}
				freed = freed.Add(p.Resources)
			}
			if len(ps) != c.victims || freed.MemoryMB != c.freedMem || freed.Vcores != c.freedCore {
				t.Fatalf("preempted %d containers freeing %v, want %d freeing %d MB and %d vcores",
					len(ps), freed, c.victims, c.freedMem, c.freedCore)
			}
		})
	}
}

func TestStarvedRequests(t *testing.T) {
	cluster := Resources{MemoryMB: 8192, Vcores: 64}
	am := Resources{MemoryMB: 1024, Vcores: 1}
	res := func(mem, vcores int64) Resources { return Resources{MemoryMB: mem, Vcores: vcores} }
	cases := []struct {
		name      string
		policy    Policy
		amPending bool
		asks      []Ask
		starved   Resources
		want      string
	}{
		{name: "the AM first while it is pending", policy: PolicyFair, amPending: true, starved: res(1024, 1),
			want: "[{memory_mb=1024,vcores=1 1}]"},
		{name: "asks by priority, highest first", policy: PolicyFair, starved: res(3072, 3),
			asks: []Ask{{AskID: 1, Count: 5, Resources: res(512, 1), Priority: 1}, {AskID: 2, Count: 2, Resources: res(1024, 1), Priority: 5}},
			want: "[{memory_mb=1024,vcores=1 2} {memory_mb=512,vcores=1 2}]"},
		{name: "capped at the ask's count", policy: PolicyFair, starved: res(8192, 8),
			asks: []Ask{{AskID: 1, Count: 3, Resources: res(1024, 1)}},
			want: "[{memory_mb=1024,vcores=1 3}]"},
		{name: "a request larger than what is left is skipped", policy: PolicyFair, starved: res(1536, 2),
			asks: []Ask{{AskID: 1, Count: 1, Resources: res(1024, 1), Priority: 2}, {AskID: 2, Count: 1, Resources: res(2048, 1), Priority: 1},
				{AskID: 3, Count: 4, Resources: res(256, 1)}},
			want: "[{memory_mb=1024,vcores=1 1} {memory_mb=256,vcores=1 2}]"},
		{name: "nothing when starved holds no whole container", policy: PolicyFair, starved: res(512, 8),
			asks: []Ask{{AskID: 1, Count: 2, Resources: res(1024, 1)}}, want: "[]"},
		{name: "drf: vcores count", policy: PolicyDRF, starved: res(512, 32),
			asks: []Ask{{AskID: 1, Count: 9, Resources: res(128, 8)}},
			want: "[{memory_mb=128,vcores=8 4}]"},
		{name: "fair: memory decides", policy: PolicyFair, starved: res(1024, 1),
			asks: []Ask{{AskID: 1, Count: 9, Resources: res(128, 8)}},
			want: "[{memory_mb=128,vcores=8 8}]"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			q := &qnode{queue: &Queue{Path: "root.q", Policy: c.policy}}
			a := &appNode{app: &App{ID: "x", AMPending: c.amPending, Spec: AppSpec{AMResources: am}}, queue: q}
			a.asks = append(a.asks, c.asks...)
			sort.SliceStable(a.asks, func(i, j int) bool { return a.asks[i].Priority > a.asks[j].Priority })
			var got []string
			for _, r := range starvedRequests(a, c.starved, cluster) {
				got = append(got, fmt.Sprintf("{%s %d}", r.res, r.count))
			}
			if s := "[" + strings.Join(got, " ") + "]"; s != c.want {
				t.Fatalf("starvedRequests(%v) = %s, want %s", c.starved, s, c.want)
			}
		})
	}
}

// Room that preemption is freeing for one starved app is that app's: it
// does not make a second starved app's request look placeable, so the
// second gets victims of its own.
func TestRoomFreedForOneStarvedAppIsNotAnothers(t *testing.T) {
	cfg := leaves(PolicyFair, "a", "b", "c")
	cfg.Scheduler.Preemption = PreemptionConfig{Enabled: true, ClusterUtilizationThreshold: 0.8, WaitBeforeKill: time.Second}
	timeout := 5 * time.Second
	cfg.Root.FairSharePreemptionTimeout = &timeout
	f := &fakeState{cfg: cfg, nodes: []*Node{node("n1", 12*1024, 12)}}
	a := runningApp("A", "root.a", 1, 0, gb1)
	a.Asks = nil
	x := runningApp("X", "root.b", 2, 2, gb1)
	y := runningApp("Y", "root.c", 3, 2, gb1)
	f.apps = []*App{a, x, y}
	f.apply([]Placement{{AppID: "A", NodeID: "n1", Resources: gb1, IsAM: true}})
	for i := 0; i < 11; i++ {
		f.apply([]Placement{{AppID: "A", NodeID: "n1", Resources: gb1}})
	}
	// Two of A's tasks are already being preempted for X.
	for _, c := range f.containers[1:3] {
		c.PreemptKillAt, c.PreemptFor = 5_000_000_000, "X"
	}
	ps := preemptAfter(f, timeout)
	forY := 0
	for _, p := range ps {
		if p.ForApp == "X" {
			t.Fatalf("X got more victims though its two are being freed: %v", ps)
		}
		if p.ForApp == "Y" {
			forY++
		}
	}
	if forY != 2 {
		t.Fatalf("Y got %d victims, want 2 of its own (X's freed room is not Y's): %v", forY, ps)
	}
}
