package scheduler

import (
	"reflect"
	"strings"
	"testing"
	"time"
)

// memory is a LocalityMemory for tests.
type memory map[askKey]localityWait

func (m memory) Wait(app string, ask uint64) (int, time.Time, bool) {
	w, ok := m[askKey{app, ask}]
	return w.missed, w.since, ok
}

var (
	pendingNow = time.Unix(1000, 0)
	am256      = Resources{MemoryMB: 256, Vcores: 1}
)

// acceptedApp is an app waiting for its AM container.
func acceptedApp(id, queue string, index uint64) *App {
	return &App{ID: id, Queue: queue, State: AppAccepted, AMPending: true, CreateIndex: index, Spec: AppSpec{AMResources: am256}}
}

// holding is a running app that holds used on n1 and asks for count × ask.
func holding(f *fakeState, id, queue string, index uint64, used Resources, count int, ask Resources) *App {
	a := runningApp(id, queue, index, count, ask)
	f.apps = append(f.apps, a)
	if !used.IsZero() {
		f.apply([]Placement{{AppID: id, NodeID: "n1", Resources: used}})
	}
	return a
}

func withPreemption(cfg *QueueConfig, timeout time.Duration) *QueueConfig {
	cfg.Scheduler.Preemption = PreemptionConfig{Enabled: true, ClusterUtilizationThreshold: 0.8}
	if timeout > 0 {
		cfg.Root.FairSharePreemptionTimeout = &timeout
	}
	return cfg
}

func TestWhyPending(t *testing.T) {
	cases := []struct {
		name  string
		state func() (*fakeState, LocalityMemory)
		app   string
		code  string
		want  []string // in the message
	}{
		// The smallest state that produces each code.
		{"no_nodes", func() (*fakeState, LocalityMemory) {
			return &fakeState{cfg: DefaultQueueConfig(), apps: []*App{acceptedApp("a", DefaultQueue, 1)}}, nil
		}, "a", PendingNoNodes, []string{"no node is READY"}},
		{"no_node_large_enough", func() (*fakeState, LocalityMemory) {
			f := &fakeState{cfg: DefaultQueueConfig(), nodes: []*Node{node("n1", 1024, 4), node("n2", 2048, 2)}}
			f.apps = []*App{runningApp("a", DefaultQueue, 1, 1, Resources{MemoryMB: 4096, Vcores: 1})}
			return f, nil
		}, "a", PendingNoNodeLargeEnough, []string{"ask 1 (1 × memory_mb=4096,vcores=1) is larger than every node", "the largest is n2 (memory_mb=2048,vcores=2)"}},
		{"no_node_large_enough: an AM", func() (*fakeState, LocalityMemory) {
			a := acceptedApp("a", DefaultQueue, 1)
			a.Spec.AMResources = Resources{MemoryMB: 256, Vcores: 8}
			return &fakeState{cfg: DefaultQueueConfig(), nodes: []*Node{node("n1", 4096, 4)}, apps: []*App{a}}, nil
		}, "a", PendingNoNodeLargeEnough, []string{"the AM container (memory_mb=256,vcores=8) is larger than every node"}},
		{"max_running_apps", func() (*fakeState, LocalityMemory) {
			cfg := DefaultQueueConfig()
			cfg.Root.Children[0].MaxRunningApps = ptr(0)
			return &fakeState{cfg: cfg, nodes: []*Node{node("n1", 1024, 1)}, apps: []*App{acceptedApp("a", DefaultQueue, 1)}}, nil
		}, "a", PendingMaxRunningApps, []string{"queue root.default is at max_running_apps 0"}},
		{"max_am_share", func() (*fakeState, LocalityMemory) {
			// Fair share ⟨1024, 2⟩, AM limit ⟨512, 1⟩: the first AM holds it.
			f := &fakeState{cfg: DefaultQueueConfig(), nodes: []*Node{node("n1", 1024, 2)}}
			first := acceptedApp("first", DefaultQueue, 1)
			f.apps = []*App{first, acceptedApp("a", DefaultQueue, 2)}
			f.apply([]Placement{{AppID: "first", NodeID: "n1", Resources: am256, IsAM: true}})
			return f, nil
		}, "a", PendingMaxAMShare, []string{"queue root.default's AM containers hold memory_mb=256,vcores=1 of its AM limit memory_mb=512,vcores=1 (max_am_share 0.5)"}},
		{"max_resources: the leaf", func() (*fakeState, LocalityMemory) {
			cfg := DefaultQueueConfig()
			cfg.Root.Children[0].MaxResources = &Resources{MemoryMB: 1024, Vcores: Unlimited}
			f := &fakeState{cfg: cfg, nodes: []*Node{node("n1", 4096, 4)}}
			holding(f, "a", DefaultQueue, 1, Resources{MemoryMB: 1024, Vcores: 1}, 1, gb1)
			return f, nil
		}, "a", PendingMaxResources, []string{"queue root.default is at max_resources memory_mb=1024,vcores=unlimited", "uses memory_mb=1024,vcores=1", "ask 1"}},
		{"max_resources: an ancestor", func() (*fakeState, LocalityMemory) {
			cfg := DefaultQueueConfig()
			p := NewQueueSpec("p")
			p.MaxResources = &Resources{MemoryMB: Unlimited, Vcores: 1}
			p.Children = []*QueueSpec{NewQueueSpec("leaf")}
			cfg.Root.Children = []*QueueSpec{p}
			f := &fakeState{cfg: cfg, nodes: []*Node{node("n1", 4096, 4)}}
			holding(f, "a", "root.p.leaf", 1, gb1, 1, gb1)
			return f, nil
		}, "a", PendingMaxResources, []string{"queue root.p is at max_resources"}},
		{"node_reserved", func() (*fakeState, LocalityMemory) {
			f := &fakeState{cfg: withPreemption(DefaultQueueConfig(), 0), nodes: []*Node{node("n1", 2048, 2)}}
			holding(f, "a", DefaultQueue, 2, Resources{}, 1, gb1)
			f.nodes[0].AllocatedGuaranteed = gb1
			f.containers = []*Container{{ID: "v", AppID: "victim", NodeID: "n1", Resources: gb1, ExecutionType: Guaranteed,
				State: ContainerRunning, PreemptKillAt: 1, PreemptFor: "starved"}}
			return f, nil
		}, "a", PendingNodeReserved, []string{"reserved for starved app starved", "(n1)"}},
		{"blacklisted", func() (*fakeState, LocalityMemory) {
			// Four nodes, three full: the one with room is blacklisted (in force, 25%).
			f := &fakeState{cfg: DefaultQueueConfig(), nodes: []*Node{node("n1", 1024, 1), node("n2", 1024, 1), node("n3", 1024, 1), node("n4", 1024, 1)}}
			for _, n := range f.nodes[1:] {
				n.AllocatedGuaranteed = gb1
			}
			holding(f, "a", DefaultQueue, 1, Resources{}, 1, gb1).Blacklist = []string{"n1"}
			return f, nil
		}, "a", PendingBlacklisted, []string{"the only nodes with room for ask 1", "on the app's blacklist (n1)"}},
		{"a blacklist that is ignored holds nothing back", func() (*fakeState, LocalityMemory) {
			f := &fakeState{cfg: DefaultQueueConfig(), nodes: []*Node{node("n1", 1024, 1), node("n2", 1024, 1)}}
			f.nodes[1].AllocatedGuaranteed = gb1
			holding(f, "a", DefaultQueue, 1, Resources{}, 1, gb1).Blacklist = []string{"n1"}
			return f, nil
		}, "a", PendingAsk, []string{"next scheduling pass"}},
		{"cluster_full: preemption off", func() (*fakeState, LocalityMemory) {
			f := &fakeState{cfg: leaves(PolicyFair, "x", "y"), nodes: []*Node{node("n1", 1024, 1)}}
			holding(f, "full", "root.x", 1, gb1, 0, gb1)
			holding(f, "a", "root.y", 2, Resources{}, 1, gb1)
			return f, nil
		}, "a", PendingClusterFull, []string{"no node has room for ask 1", "the app holds memory_mb=0,vcores=0", "preemption is off"}},
		{"cluster_full: at its fair share", func() (*fakeState, LocalityMemory) {
			f := &fakeState{cfg: withPreemption(DefaultQueueConfig(), time.Second), nodes: []*Node{node("n1", 1024, 1)}}
			holding(f, "a", DefaultQueue, 1, gb1, 1, gb1)
			return f, nil
		}, "a", PendingClusterFull, []string{"at or over its fair share memory_mb=1024,vcores=1", "preemption does not act for it"}},
		{"cluster_full: no fair_share_preemption_timeout", func() (*fakeState, LocalityMemory) {
			f := &fakeState{cfg: withPreemption(leaves(PolicyFair, "x", "y"), 0), nodes: []*Node{node("n1", 2048, 2)}}
			holding(f, "full", "root.x", 1, Resources{MemoryMB: 2048, Vcores: 2}, 0, gb1)
			holding(f, "a", "root.y", 2, Resources{}, 1, gb1)
			return f, nil
		}, "a", PendingClusterFull, []string{"below its fair share memory_mb=1024,vcores=1", "queue root.y has no fair_share_preemption_timeout"}},
		{"cluster_full: above the starvation threshold", func() (*fakeState, LocalityMemory) {
			f := &fakeState{cfg: withPreemption(leaves(PolicyFair, "x", "y"), time.Second), nodes: []*Node{node("n1", 4096, 4)}}
			holding(f, "full", "root.x", 1, Resources{MemoryMB: 3072, Vcores: 3}, 0, gb1)
			holding(f, "a", "root.y", 2, gb1, 1, Resources{MemoryMB: 2048, Vcores: 1})
			return f, nil
		}, "a", PendingClusterFull, []string{"not below fair_share_preemption_threshold 0.5 of it (memory_mb=1024,vcores=1)", "does not starve"}},
		{"cluster_full: utilization under the threshold", func() (*fakeState, LocalityMemory) {
			// Two half-used nodes: nothing fits 3 GB, utilization is 50%.
			f := &fakeState{cfg: withPreemption(leaves(PolicyFair, "x", "y"), time.Second),
				nodes: []*Node{node("n1", 4096, 4), node("n2", 4096, 4)}}
			half := Resources{MemoryMB: 2048, Vcores: 1}
			holding(f, "x1", "root.x", 1, half, 0, gb1)
			holding(f, "x2", "root.x", 2, Resources{}, 0, gb1)
			f.apply([]Placement{{AppID: "x2", NodeID: "n2", Resources: half}})
			holding(f, "a", "root.y", 3, Resources{}, 1, Resources{MemoryMB: 3072, Vcores: 1})
			return f, nil
		}, "a", PendingClusterFull, []string{"cluster utilization 50% is under preemption's cluster_utilization_threshold 80%"}},
		{"cluster_full: the victims would drop below their fair share", func() (*fakeState, LocalityMemory) {
			cfg := withPreemption(leaves(PolicyFair, "x", "y"), time.Second)
			cfg.Root.Children[0].Preemptable = ptr(false)
			f := &fakeState{cfg: cfg, nodes: []*Node{node("n1", 2048, 2)}}
			holding(f, "full", "root.x", 1, Resources{MemoryMB: 2048, Vcores: 2}, 0, gb1)
			holding(f, "a", "root.y", 2, Resources{}, 1, gb1)
			return f, nil
		}, "a", PendingClusterFull, []string{"no app in a preemptable queue is over its fair share"}},
		{"cluster_full: preemption may free room", func() (*fakeState, LocalityMemory) {
			f := &fakeState{cfg: withPreemption(leaves(PolicyFair, "x", "y"), 5*time.Second), nodes: []*Node{node("n1", 2048, 2)}}
			holding(f, "full", "root.x", 1, Resources{MemoryMB: 2048, Vcores: 2}, 0, gb1)
			holding(f, "a", "root.y", 2, Resources{}, 1, gb1)
			return f, nil
		}, "a", PendingClusterFull, []string{"below its fair share", "preemption may free room once it has been below 0.5 of it for fair_share_preemption_timeout 5s"}},
		{"cluster_full: min share", func() (*fakeState, LocalityMemory) {
			cfg := withPreemption(leaves(PolicyFair, "x", "y"), 0)
			cfg.Root.Children[1].MinResources = Resources{MemoryMB: 1024}
			cfg.Root.Children[1].MinSharePreemptionTimeout = ptr(3 * time.Second)
			f := &fakeState{cfg: cfg, nodes: []*Node{node("n1", 2048, 2)}}
			holding(f, "full", "root.x", 1, Resources{MemoryMB: 2048, Vcores: 2}, 0, gb1)
			holding(f, "a", "root.y", 2, Resources{}, 1, gb1)
			return f, nil
		}, "a", PendingClusterFull, []string{"queue root.y is below its min share memory_mb=1024,vcores=0", "min_share_preemption_timeout 3s"}},
		{"locality: opportunities", func() (*fakeState, LocalityMemory) {
			f := localityState(Delay{Opportunities: 3}, Delay{}, true)
			return f, memory{{"a", 1}: {missed: 1, since: pendingNow}}
		}, "a", PendingLocality, []string{"waiting for locality on nodes n1: 1 of node_delay 3 opportunities skipped", "other nodes have room"}},
		{"locality: duration", func() (*fakeState, LocalityMemory) {
			f := localityState(Delay{Duration: 5 * time.Second}, Delay{}, true)
			return f, memory{{"a", 1}: {since: pendingNow.Add(-2 * time.Second)}}
		}, "a", PendingLocality, []string{"waited 2s of node_delay 5s"}},
		{"locality: rack level", func() (*fakeState, LocalityMemory) {
			f := localityState(Delay{Opportunities: 1}, Delay{Opportunities: 2}, true)
			f.nodes = append(f.nodes, &Node{ID: "n3", Rack: "/r1", Status: NodeReady, Capacity: gb1, AllocatedGuaranteed: gb1})
			return f, memory{{"a", 1}: {missed: 2, since: pendingNow}}
		}, "a", PendingLocality, []string{"on the racks of nodes n1: 2 of node_delay + rack_delay 3 opportunities skipped"}},
		{"locality: no memory (a follower)", func() (*fakeState, LocalityMemory) {
			return localityState(Delay{Opportunities: 3}, Delay{}, true), nil
		}, "a", PendingLocality, []string{"waiting for locality on nodes n1 (node_delay 3)"}},
		{"locality: strict", func() (*fakeState, LocalityMemory) {
			return localityState(Delay{}, Delay{}, false), nil
		}, "a", PendingLocality, []string{"ask 1 may only run on nodes n1 (relax = false)"}},
		{"am_not_registered", func() (*fakeState, LocalityMemory) {
			a := acceptedApp("a", DefaultQueue, 1)
			a.AMPending = false
			a.Attempts = []Attempt{{Attempt: 1, NodeID: "n1"}}
			return &fakeState{cfg: DefaultQueueConfig(), apps: []*App{a}}, nil
		}, "a", PendingAMNotRegistered, []string{"AM container placed on n1, waiting for it to register"}},
		{"am_pending", func() (*fakeState, LocalityMemory) {
			return &fakeState{cfg: DefaultQueueConfig(), nodes: []*Node{node("n1", 1024, 2)}, apps: []*App{acceptedApp("a", DefaultQueue, 1)}}, nil
		}, "a", PendingAM, []string{"next scheduling pass"}},
		{"ask_pending", func() (*fakeState, LocalityMemory) {
			return &fakeState{cfg: DefaultQueueConfig(), nodes: []*Node{node("n1", 1024, 1)}, apps: []*App{runningApp("a", DefaultQueue, 1, 1, gb1)}}, nil
		}, "a", PendingAsk, []string{"ask 1 (1 × memory_mb=1024,vcores=1) is not placed yet", "next scheduling pass"}},
		{"ask_pending: locality relaxed", func() (*fakeState, LocalityMemory) {
			f := localityState(Delay{Opportunities: 3}, Delay{}, true)
			return f, memory{{"a", 1}: {missed: 3, since: pendingNow}}
		}, "a", PendingAsk, []string{"next scheduling pass"}},
		// Order: what no waiting mends before the limits.
		{"no node large enough before max_running_apps", func() (*fakeState, LocalityMemory) {
			cfg := DefaultQueueConfig()
			cfg.Root.Children[0].MaxRunningApps = ptr(0)
			return &fakeState{cfg: cfg, nodes: []*Node{node("n1", 128, 1)}, apps: []*App{acceptedApp("a", DefaultQueue, 1)}}, nil
		}, "a", PendingNoNodeLargeEnough, nil},
		{"the highest-priority ask speaks for the app", func() (*fakeState, LocalityMemory) {
			a := runningApp("a", DefaultQueue, 1, 1, gb1)
			a.Asks = append(a.Asks, Ask{AskID: 2, Count: 1, Resources: Resources{MemoryMB: 8192, Vcores: 1}, Priority: 5})
			return &fakeState{cfg: DefaultQueueConfig(), nodes: []*Node{node("n1", 4096, 4)}, apps: []*App{a}}, nil
		}, "a", PendingNoNodeLargeEnough, []string{"ask 2"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			f, mem := c.state()
			got, ok := WhyPending(f, pendingNow, mem)[c.app]
			if !ok {
				t.Fatalf("no reason for %s", c.app)
			}
			if got.Code != c.code {
				t.Fatalf("code %q (%s), want %q", got.Code, got.Message, c.code)
			}
			for _, w := range c.want {
				if !strings.Contains(got.Message, w) {
					t.Errorf("message %q does not say %q", got.Message, w)
				}
			}
		})
	}
}

// localityState: an app asks for one container on n1 (full); n2, on
// another rack, has room.
func localityState(nodeDelay, rackDelay Delay, relax bool) *fakeState {
	cfg := DefaultQueueConfig()
	cfg.Scheduler.Locality = LocalityConfig{NodeDelay: nodeDelay, RackDelay: rackDelay}
	n1, n2 := node("n1", 1024, 1), node("n2", 1024, 1)
	n1.AllocatedGuaranteed = gb1
	n2.Rack = "/r2"
	a := runningApp("a", DefaultQueue, 1, 1, gb1)
	a.Asks[0].Locality = Locality{Nodes: []string{"n1"}, Relax: relax}
	return &fakeState{cfg: cfg, nodes: []*Node{n1, n2}, apps: []*App{a}}
}

// Apps with nothing to place have no reason; WhyPending changes nothing.
func TestWhyPendingReadsOnly(t *testing.T) {
	f := &fakeState{cfg: withPreemption(leaves(PolicyDRF, "x", "y"), time.Second), nodes: []*Node{node("n1", 2048, 2), node("n2", 2048, 2)}}
	holding(f, "done", "root.x", 1, gb1, 0, gb1)
	holding(f, "busy", "root.x", 2, gb1, 3, gb1)
	f.apps = append(f.apps, acceptedApp("new", "root.y", 3))
	f.app("busy").Asks[0].Locality = Locality{Nodes: []string{"n2"}, Racks: []string{"/r1"}, Relax: true}
	before := snapshotOf(f)
	got := WhyPending(f, pendingNow, memory{})
	if _, ok := got["done"]; ok || len(got) != 2 {
		t.Fatalf("reasons %v, want busy and new only", got)
	}
	if after := snapshotOf(f); !reflect.DeepEqual(before, after) {
		t.Fatalf("WhyPending changed its input:\n%+v\n%+v", before, after)
	}
}

func snapshotOf(f *fakeState) []any {
	var out []any
	for _, a := range f.apps {
		c := a.Copy()
		c.Asks = append([]Ask(nil), a.Asks...)
		for i := range c.Asks {
			c.Asks[i].Locality.Nodes = append([]string(nil), a.Asks[i].Locality.Nodes...)
			c.Asks[i].Locality.Racks = append([]string(nil), a.Asks[i].Locality.Racks...)
		}
		out = append(out, *c)
	}
	for _, n := range f.nodes {
		out = append(out, *n)
	}
	for _, c := range f.containers {
		out = append(out, *c)
	}
	return out
}

// The leader's own delay-scheduling memory answers WhyPending: after one
// pass in which the ask missed its node, it has skipped 1 of 2.
func TestLocalityWaitsIsTheLocalityMemory(t *testing.T) {
	f := localityState(Delay{Opportunities: 2}, Delay{}, true)
	waits := NewLocalityWaits()
	var mem LocalityMemory = waits
	if ps := Schedule(f, pendingNow, waits, 10).Placements; len(ps) != 0 {
		t.Fatalf("placed %v before node_delay", ps)
	}
	if missed, since, ok := mem.Wait("a", 1); !ok || missed != 1 || !since.Equal(pendingNow) {
		t.Fatalf("Wait = %d, %v, %v; want 1 missed since the pass", missed, since, ok)
	}
	got := WhyPending(f, pendingNow.Add(time.Second), waits)["a"]
	if got.Code != PendingLocality || !strings.Contains(got.Message, "1 of node_delay 2 opportunities skipped") {
		t.Fatalf("reason %+v", got)
	}
	if _, _, ok := mem.Wait("a", 7); ok {
		t.Fatalf("an ask never considered has a wait")
	}
}
