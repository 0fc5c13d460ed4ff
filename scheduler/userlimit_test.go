package scheduler

import (
	"fmt"
	"strings"
	"testing"
	"time"
)

// YARN's TestLeafQueue queue tree: a capacity root over a 8.5%, b 80%,
// c 1.5%, d 9%, e 1% (every max_capacity 100, as the tests set a's).
func yarnQueues() *QueueConfig {
	return capacityTree([4]any{"a", 8.5, 0.0, 0.0}, [4]any{"b", 80.0, 0.0, 0.0}, [4]any{"c", 1.5, 0.0, 0.0},
		[4]any{"d", 9.0, 0.0, 0.0}, [4]any{"e", 1.0, 0.0, 0.0})
}

// gb is n GiB of memory and one vcore: the nodes of these tests have a
// thousand vcores, so that memory alone decides, as with YARN's
// DefaultResourceCalculator.
func gb(n int64) Resources { return Resources{MemoryMB: n * 1024, Vcores: 1} }

func yarnNodes(n int, memGB int64) []*Node {
	var out []*Node
	for i := range n {
		out = append(out, node(fmt.Sprintf("n%d", i), memGB*1024, 1000))
	}
	return out
}

func askingApp(id, queue, user string, index uint64, n int, size int64) *App {
	a := runningApp(id, queue, index, n, gb(size))
	a.Spec.User = user
	return a
}

// leafSpec returns the queue spec named name below root.
func leafSpec(cfg *QueueConfig, name string) *QueueSpec {
	for _, q := range cfg.Root.Children {
		if q.Name == name {
			return q
		}
	}
	panic("no queue " + name)
}

func set(v float64) *float64 { return &v }

// ulStep is one step of a user-limit scenario: edit the state, place at
// most one container (one node heartbeat in YARN's tests), and compare
// every app's GiB in use.
type ulStep struct {
	why  string
	edit func(f *fakeState)
	want map[string]int64
}

func runUserSteps(t *testing.T, f *fakeState, steps []ulStep) {
	t.Helper()
	for i, s := range steps {
		if s.edit != nil {
			s.edit(f)
		}
		f.apply(Schedule(f, time.Unix(0, 0), nil, 1).Placements)
		for app, want := range s.want {
			if got := f.app(app).Used.MemoryMB / 1024; got != want {
				t.Fatalf("step %d (%s): %s uses %d GiB, want %d", i+1, s.why, app, got, want)
			}
		}
	}
}

// TestLeafQueue.testSingleQueueWithOneUser: a user may end one container
// past their limit, and is refused only while above it.
func TestUserLimitOneUser(t *testing.T) {
	cfg := yarnQueues()
	a := leafSpec(cfg, "a")
	f := &fakeState{nodes: yarnNodes(1, 8), cfg: cfg, apps: []*App{
		askingApp("app0", "root.a", "user0", 1, 3, 1), askingApp("app1", "root.a", "user0", 2, 2, 1)}}
	runUserSteps(t, f, []ulStep{
		{why: "limit 1 GiB (8.5% of 8, rounded up)", want: map[string]int64{"app0": 1, "app1": 0}},
		{why: "one container more than the user limit", want: map[string]int64{"app0": 2}},
		{why: "not a third: above the limit", want: map[string]int64{"app0": 2, "app1": 0}},
		{why: "user_limit_factor 10", edit: func(*fakeState) { a.UserLimitFactor = set(10) }, want: map[string]int64{"app0": 3}},
		{why: "app1, by the factor", want: map[string]int64{"app0": 3, "app1": 1}},
		{why: "max_capacity 50: at it", edit: func(*fakeState) { a.MaxCapacity = set(50) }, want: map[string]int64{"app0": 3, "app1": 1}},
	})
}

// TestLeafQueue.testUserLimits (Hadoop 2.8): two users,
// minimum_user_limit_percent 50, user_limit_factor 2.
func TestUserLimitTwoUsers(t *testing.T) {
	cfg := yarnQueues()
	a := leafSpec(cfg, "a")
	a.MinimumUserLimitPercent, a.UserLimitFactor = set(50), set(2)
	f := &fakeState{nodes: yarnNodes(2, 8), cfg: cfg, apps: []*App{
		askingApp("app0", "root.a", "user0", 1, 2, 3), askingApp("app1", "root.a", "user1", 2, 2, 1)}}
	runUserSteps(t, f, []ulStep{
		{why: "user0 uses nothing", want: map[string]int64{"app0": 3, "app1": 0}},
		{why: "user0 is above 2 GiB = 4 ÷ 2 users", want: map[string]int64{"app0": 3, "app1": 1}},
		{why: "limit ⌈(4+1) ÷ 2⌉ = 3 GiB: user0 is at it, not above", want: map[string]int64{"app0": 6, "app1": 1}},
	})
}

// TestLeafQueue.testSingleQueueWithMultipleUsers: three users,
// minimum_user_limit_percent 25, factors 1 and 10.
func TestUserLimitThreeUsers(t *testing.T) {
	cfg := yarnQueues()
	a := leafSpec(cfg, "a")
	f := &fakeState{nodes: yarnNodes(1, 8), cfg: cfg, apps: []*App{
		askingApp("app0", "root.a", "user0", 1, 10, 1), askingApp("app1", "root.a", "user0", 2, 10, 1)}}
	runUserSteps(t, f, []ulStep{
		{want: map[string]int64{"app0": 1}},
		{why: "one past the limit", want: map[string]int64{"app0": 2}},
		{why: "minimum_user_limit_percent 25: above the limit", edit: func(*fakeState) { a.MinimumUserLimitPercent = set(25) },
			want: map[string]int64{"app0": 2, "app1": 0}},
		{why: "users 1 and 2 arrive, factor 10: user0 is above 1 GiB, app2 goes", edit: func(f *fakeState) {
			f.apps = append(f.apps, askingApp("app2", "root.a", "user1", 3, 1, 3), askingApp("app3", "root.a", "user2", 4, 2, 1))
			a.UserLimitFactor = set(10)
		}, want: map[string]int64{"app0": 2, "app1": 0, "app2": 3, "app3": 0}},
		{why: "user0 at their limit, not above it", want: map[string]int64{"app0": 3, "app2": 3, "app3": 0}},
		{why: "max_capacity 50: the queue is past it", edit: func(*fakeState) { a.MaxCapacity = set(50) },
			want: map[string]int64{"app0": 3, "app2": 3, "app3": 0}},
		{why: "max 100, factor 1: only user2 is under the limit", edit: func(*fakeState) { a.MaxCapacity, a.UserLimitFactor = set(100), set(1) },
			want: map[string]int64{"app0": 3, "app1": 0, "app2": 3, "app3": 1}},
		{want: map[string]int64{"app0": 3, "app2": 3, "app3": 2}},
	})
}

// user_limit_factor: one user of a 25% queue on 8 GiB holds one container
// past factor × 2 GiB; -1 lets them take the queue's max capacity.
func TestUserLimitFactors(t *testing.T) {
	for _, tc := range []struct {
		factor float64
		want   int64
	}{{1, 3}, {2, 5}, {10, 8}, {UserLimitOff, 8}} {
		cfg := capacityTree([4]any{"a", 25.0, 0.0, 0.0}, [4]any{"b", 75.0, 0.0, 0.0})
		leafSpec(cfg, "a").UserLimitFactor = set(tc.factor)
		f := &fakeState{nodes: yarnNodes(1, 8), cfg: cfg, apps: []*App{askingApp("A", "root.a", "ann", 1, 20, 1)}}
		f.apply(schedule(f))
		if got := f.app("A").Used.MemoryMB / 1024; got != tc.want {
			t.Errorf("user_limit_factor %v: one user holds %d GiB of 8, want %d", tc.factor, got, tc.want)
		}
	}
}

// minimum_user_limit_percent with three active users: each user's limit is
// the larger of a third and the percent of the queue's capacity (12 GiB),
// and each holds one container past it, first come first served.
func TestMinimumUserLimitPercent(t *testing.T) {
	for _, tc := range []struct {
		percent float64
		limit   int64    // GiB
		want    [3]int64 // GiB each user holds once the queue is full
	}{{25, 4, [3]int64{5, 5, 2}}, {50, 6, [3]int64{7, 5, 0}}, {100, 12, [3]int64{12, 0, 0}}} {
		cfg := capacityTree([4]any{"a", 100.0, 0.0, 0.0})
		leafSpec(cfg, "a").MinimumUserLimitPercent = set(tc.percent)
		f := &fakeState{nodes: yarnNodes(1, 12), cfg: cfg, apps: []*App{
			askingApp("u0", "root.a", "user0", 1, 12, 1), askingApp("u1", "root.a", "user1", 2, 12, 1), askingApp("u2", "root.a", "user2", 3, 12, 1)}}
		cluster := ClusterCapacity(f)
		if l := buildTree(f, cluster).byPath["root.a"].cap.limit("user0", Resources{}); l.MemoryMB != tc.limit*1024 {
			t.Errorf("minimum_user_limit_percent %v: limit %s, want %d GiB", tc.percent, l, tc.limit)
		}
		for range 12 {
			f.apply(Schedule(f, time.Unix(0, 0), nil, 1).Placements)
		}
		var got [3]int64
		for i, id := range []string{"u0", "u1", "u2"} {
			got[i] = f.app(id).Used.MemoryMB / 1024
		}
		if got != tc.want {
			t.Errorf("minimum_user_limit_percent %v: users hold %v GiB, want %v", tc.percent, got, tc.want)
		}
	}
}

// TestLeafQueue.testComputeUserLimitAndSetHeadroom (Hadoop 2.8), cases 1
// and 2, and a queue at its max capacity (testHeadroomWithMaxCap).
func TestHeadroom(t *testing.T) {
	cfg := yarnQueues()
	f := &fakeState{nodes: yarnNodes(2, 8), cfg: cfg, apps: []*App{askingApp("app0", "root.b", "user0", 1, 1, 4)}}
	f.apply(schedule(f))
	if h := Headrooms(f)["app0"]; h.MemoryMB != 9*1024 {
		t.Fatalf("case 1: headroom %s, want 9 GiB (user limit 13, less 4 used)", h)
	}
	f.apps = append(f.apps, askingApp("app2", "root.b", "user1", 2, 1, 4))
	f.apply(schedule(f))
	h := Headrooms(f)
	if h["app0"].MemoryMB != 8*1024 || h["app2"].MemoryMB != 8*1024 {
		t.Fatalf("case 2: headrooms %s and %s, want 8 GiB each (queue max 16 less 8 used)", h["app0"], h["app2"])
	}
	leafSpec(cfg, "b").MaxCapacity = set(80)
	if h := Headrooms(f)["app0"]; h.MemoryMB != 5*1024 {
		t.Fatalf("max_capacity 80 (13 GiB): headroom %s, want 5 GiB (13 less the queue's 8)", h)
	}
	f.apps = append(f.apps, askingApp("fair", "root.c", "user0", 3, 1, 1))
	if _, ok := Headrooms(f)["nobody"]; ok {
		t.Fatal("a headroom for an app that does not exist")
	}
}

func TestUserLimitPendingSaysWhy(t *testing.T) {
	cfg := yarnQueues()
	f := &fakeState{nodes: yarnNodes(1, 8), cfg: cfg, apps: []*App{askingApp("app0", "root.a", "ann", 1, 5, 1)}}
	f.apply(schedule(f))
	reason := WhyPending(f, pendingNow, memory{})["app0"]
	if reason.Code != PendingUserLimit || !strings.Contains(reason.Message, "user ann uses") || !strings.Contains(reason.Message, "above queue root.a's user limit") {
		t.Fatalf("why pending: %+v", reason)
	}
}

// maximum_am_resource_percent: a capacity leaf's AMs hold at most that
// fraction of it, but one app may always run.
func TestCapacityAMLimit(t *testing.T) {
	cfg := yarnQueues()
	var apps []*App
	for i := range 4 {
		a := acceptedApp(fmt.Sprintf("app%d", i), "root.a", uint64(i+1))
		a.Spec.AMResources = gb(1)
		a.Spec.User = fmt.Sprintf("u%d", i)
		apps = append(apps, a)
	}
	f := &fakeState{nodes: yarnNodes(4, 8), cfg: cfg, apps: apps}
	// AM limit: 10% of a's max capacity (32 GiB) = 3.2, rounded up: 4 GiB.
	if got := len(schedule(f)); got != 4 {
		t.Fatalf("%d AMs placed, want 4 within the AM limit of 4 GiB", got)
	}
	leafSpec(cfg, "a").MaximumAMResourcePercent = set(0.01)
	f = &fakeState{nodes: yarnNodes(4, 8), cfg: cfg, apps: apps}
	f.apps = []*App{apps[0].Copy(), apps[1].Copy()}
	ps := schedule(f)
	if len(ps) != 1 || ps[0].AppID != "app0" {
		t.Fatalf("placed %v with an AM limit of 1 GiB: want app0's AM alone", countByApp(ps))
	}
	cfg.Root.MaximumAMResourcePercent = set(0.0001)
	leafSpec(cfg, "a").MaximumAMResourcePercent = nil
	f = &fakeState{nodes: yarnNodes(4, 8), cfg: cfg, apps: []*App{apps[0].Copy(), apps[1].Copy()}}
	if ps := schedule(f); len(ps) != 1 {
		t.Fatalf("placed %v with the root's AM limit inherited: want one app, the one that may always run", countByApp(ps))
	}
}
