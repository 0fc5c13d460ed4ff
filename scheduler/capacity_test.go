package scheduler

import (
	"strings"
	"testing"
)

// capacityTree is root of type capacity over leaves given as name →
// {capacity, max_capacity, user_limit_factor} (0: unset).
func capacityTree(leaves ...[4]any) *QueueConfig {
	cfg := DefaultQueueConfig()
	cfg.Root.Type = QueueCapacity
	cfg.Root.Children = nil
	for _, l := range leaves {
		q := NewQueueSpec(l[0].(string))
		c := l[1].(float64)
		q.Capacity = &c
		if m := l[2].(float64); m > 0 {
			q.MaxCapacity = &m
		}
		if u := l[3].(float64); u > 0 {
			q.UserLimitFactor = &u
		}
		cfg.Root.Children = append(cfg.Root.Children, q)
	}
	return cfg
}

var oneGB = Resources{MemoryMB: 1024, Vcores: 1}

// finish ends n of app's task containers, as their tasks would.
func (f *fakeState) finish(app string, n int) {
	for _, c := range f.containers {
		if n == 0 {
			break
		}
		if c.AppID != app || c.IsAM || !c.State.Live() {
			continue
		}
		c.State = ContainerCompleted
		f.node(c.NodeID).AllocatedGuaranteed = f.node(c.NodeID).AllocatedGuaranteed.Sub(c.Resources)
		f.app(app).Used = f.app(app).Used.Sub(c.Resources)
		n--
	}
}

func userApp(id, queue, user string, index uint64, n int) *App {
	a := runningApp(id, queue, index, n, oneGB)
	a.Spec.User = user
	return a
}

// Seed 003: a freed slot goes to the least loaded queue; a queue's idle
// capacity is lent to a busy one and comes back as the borrower's tasks
// finish, never by preemption.
func TestCapacityIsLentAndComesBackAsTasksFinish(t *testing.T) {
	cfg := capacityTree([4]any{"a", 50.0, 0.0, 2.0}, [4]any{"b", 50.0, 0.0, 2.0})
	f := &fakeState{nodes: []*Node{node("n1", 10*1024, 10)}, cfg: cfg,
		apps: []*App{userApp("A", "root.a", "ann", 1, 100)}}
	f.apply(schedule(f))
	if got := f.app("A").Used.Vcores; got != 10 {
		t.Fatalf("a alone: %d vcores, want all 10 (b's idle 5 lent)", got)
	}
	f.apps = append(f.apps, userApp("B", "root.b", "bob", 2, 5))
	if ps := schedule(f); len(ps) != 0 || len(preemptionsOf(f)) != 0 {
		t.Fatalf("b arrives to a full cluster: %v placed, %d preempted; capacity queues wait, never preempt", countByApp(ps), len(preemptionsOf(f)))
	}
	// Three of a's tasks finish: b, using 0 of its 5, gets the three
	// slots though a still wants more.
	f.finish("A", 3)
	f.apply(schedule(f))
	if a, b := f.app("A").Used.Vcores, f.app("B").Used.Vcores; a != 7 || b != 3 {
		t.Fatalf("after 3 of a's tasks finished: a %d, b %d; want the slots back to b (7/3)", a, b)
	}
	f.finish("A", 4)
	f.apply(schedule(f))
	if a, b := f.app("A").Used.Vcores, f.app("B").Used.Vcores; a != 5 || b != 5 {
		t.Fatalf("after 4 more finished: a %d, b %d; want b's capacity back (b asked 5) and a the rest", a, b)
	}
}

func preemptionsOf(f *fakeState) []*Container { return f.PreemptionMarked() }

func TestMaxCapacityCapsWhatIsLent(t *testing.T) {
	cfg := capacityTree([4]any{"a", 50.0, 70.0, 10.0}, [4]any{"b", 50.0, 0.0, 0.0})
	f := &fakeState{nodes: []*Node{node("n1", 10*1024, 10)}, cfg: cfg, apps: []*App{userApp("A", "root.a", "ann", 1, 100)}}
	f.apply(schedule(f))
	if got := f.app("A").Used.Vcores; got != 7 {
		t.Fatalf("a with max_capacity 70: %d vcores, want 7 of 10", got)
	}
	if reason := WhyPending(f, pendingNow, memory{})["A"]; reason.Code != PendingMaxResources || !strings.Contains(reason.Message, "max_capacity") {
		t.Fatalf("why pending: %+v, want a's max_capacity named", reason)
	}
}

// user_limit_factor (YARN): one user's containers in a leaf use at most
// the factor × the leaf's capacity; two users fill what one may not.
func TestUserLimitFactor(t *testing.T) {
	cfg := capacityTree([4]any{"a", 50.0, 0.0, 0.0}, [4]any{"b", 50.0, 0.0, 0.0})
	f := &fakeState{nodes: []*Node{node("n1", 10*1024, 10)}, cfg: cfg, apps: []*App{userApp("A1", "root.a", "ann", 1, 100)}}
	f.apply(schedule(f))
	if got := f.app("A1").Used.Vcores; got != 6 {
		t.Fatalf("one user at user_limit_factor 1: %d vcores, want the queue's capacity, 5, and one container past it (YARN's)", got)
	}
	if reason := WhyPending(f, pendingNow, memory{})["A1"]; reason.Code != PendingUserLimit || !strings.Contains(reason.Message, "user ann") {
		t.Fatalf("why pending: %+v, want ann's user limit", reason)
	}
	f.apps = append(f.apps, userApp("A2", "root.a", "al", 2, 100))
	f.apply(schedule(f))
	if got := f.app("A2").Used.Vcores; got != 4 {
		t.Fatalf("a second user: %d vcores, want the 4 left of what b lends", got)
	}
}

// Inside a capacity leaf apps are FIFO by priority, then submission.
func TestCapacityLeafIsFIFOByPriority(t *testing.T) {
	cfg := capacityTree([4]any{"a", 100.0, 0.0, 0.0})
	low := userApp("low", "root.a", "u", 1, 10)
	high := userApp("high", "root.a", "u", 2, 3)
	high.Spec.Priority = 5
	later := userApp("later", "root.a", "u", 3, 10)
	f := &fakeState{nodes: []*Node{node("n1", 5*1024, 100)}, cfg: cfg, apps: []*App{low, high, later}}
	if got := countByApp(schedule(f)); got["high"] != 3 || got["low"] != 2 || got["later"] != 0 {
		t.Fatalf("placed %v, want priority first (high=3), then the oldest (low=2)", got)
	}
}

func TestCapacityResolvesAndShares(t *testing.T) {
	cfg := capacityTree([4]any{"prod", 70.0, 90.0, 2.0}, [4]any{"dev", 30.0, 50.0, 0.0})
	dev := cfg.Root.Children[1]
	half := 50.0
	qx, qy := NewQueueSpec("x"), NewQueueSpec("y")
	qx.Capacity, qy.Capacity = &half, &half
	dev.Children = []*QueueSpec{qx, qy}
	if errs := cfg.Validate(); len(errs) != 0 {
		t.Fatalf("a valid capacity tree: %v", errs)
	}
	byPath := map[string]*Queue{}
	for _, q := range cfg.Resolve() {
		byPath[q.Path] = q
	}
	x := byPath["root.dev.x"]
	if x.Capacity == nil || x.Capacity.Abs != 0.15 || x.Capacity.AbsMax != 0.5 || x.Policy != PolicyFIFO || x.Preemptable ||
		byPath["root.dev"].Policy != PolicyCapacity || byPath["root"].Type != QueueCapacity {
		t.Fatalf("resolved root.dev.x %+v (limits %+v), root.dev policy %s", x, x.Capacity, byPath["root.dev"].Policy)
	}
	shares := ComputeQueueShares(cfg.Resolve(), Resources{MemoryMB: 100 * 1024, Vcores: 100}, nil)
	if s := shares.Instantaneous["root.prod"]; s.Vcores != 70 {
		t.Fatalf("root.prod's share %s, want its capacity, 70 vcores, idle or not", s)
	}
	if s := shares.Steady["root.dev.y"]; s.Vcores != 15 {
		t.Fatalf("root.dev.y's share %s, want 15 vcores", s)
	}
}

func TestCapacityValidation(t *testing.T) {
	f := func(v float64) *float64 { return &v }
	for _, tc := range []struct {
		name, want string
		edit       func(c *QueueConfig)
	}{
		{"siblings not summing to 100", "queue root: the capacities of its children sum to 90, not 100",
			func(c *QueueConfig) { c.Root.Children[1].Capacity = f(40) }},
		{"capacity missing", "queue root.b: capacity: required below a queue of type \"capacity\"",
			func(c *QueueConfig) { c.Root.Children[1].Capacity = nil }},
		{"max_capacity under capacity", "queue root.a: max_capacity: must be between capacity (50) and 100, or -1 (100), not 40",
			func(c *QueueConfig) { c.Root.Children[0].MaxCapacity = f(40) }},
		{"user_limit_factor 0", "queue root.a: user_limit_factor: must be a positive number, or -1 (no user limit short of max_capacity), not 0",
			func(c *QueueConfig) { c.Root.Children[0].UserLimitFactor = f(0) }},
		{"capacity outside a capacity tree", "queue root.a: capacity: only queues below a queue of type \"capacity\" have it",
			func(c *QueueConfig) { c.Root.Type = "" }},
		{"a fair subtree inside", "queue root.a: type: a capacity subtree cannot hold a fair one",
			func(c *QueueConfig) { c.Root.Children[0].Type = QueueFair }},
		{"an unknown type", "queue root: type: must be fair or capacity, not \"yarn\"",
			func(c *QueueConfig) { c.Root.Type = "yarn" }},
		{"min_resources", "queue root.a: min_resources: capacity queues are guaranteed their capacity instead",
			func(c *QueueConfig) { c.Root.Children[0].MinResources = oneGB }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := capacityTree([4]any{"a", 50.0, 0.0, 0.0}, [4]any{"b", 50.0, 0.0, 0.0})
			tc.edit(cfg)
			var got []string
			for _, e := range cfg.Validate() {
				got = append(got, e.Error())
			}
			if !strings.Contains(strings.Join(got, "\n"), tc.want) {
				t.Fatalf("errors %q, want one with %q", got, tc.want)
			}
		})
	}
}

// A leaf whose share rounds down to nothing still gives each user one
// container past a limit of one minimum allocation (YARN rounds the
// capacity and the limit up to it): else an app there could never run.
func TestUserLimitRoundsUpToOneContainer(t *testing.T) {
	cfg := capacityTree([4]any{"a", 99.0, 0.0, 0.0}, [4]any{"b", 1.0, 0.0, 0.0})
	f := &fakeState{nodes: []*Node{node("n1", 10*1024, 10)}, cfg: cfg, apps: []*App{userApp("B", "root.b", "bo", 1, 5)}}
	f.apply(schedule(f))
	if got := f.app("B").Used.Vcores; got != 2 {
		t.Fatalf("a user in a leaf of 1%% of 10 vcores: %d vcores, want two containers (a limit of one, and one past it)", got)
	}
}

func TestUsedOfLeavesOutWhatIsNotGuaranteed(t *testing.T) {
	if got := UsedOf(Resources{MemoryMB: 256, Vcores: 1}, Resources{MemoryMB: 1024, Vcores: 0}); got != 0.25 {
		t.Fatalf("used of 1 GiB and no vcore guaranteed: %v, want 0.25 (memory alone)", got)
	}
	if got := UsedOf(Resources{MemoryMB: 2048, Vcores: 1}, Resources{MemoryMB: 1024, Vcores: 4}); got != 2 {
		t.Fatalf("borrowing: %v, want 2 (the dominant resource)", got)
	}
}
