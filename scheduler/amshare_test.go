package scheduler

import (
	"fmt"
	"strings"
	"testing"
	"time"
)

// oneTaskApps is n apps in root.default, each waiting for its AM
// container ⟨256 MB, 1 vcore⟩ and then wanting one task ⟨128 MB, 1 vcore⟩.
func oneTaskApps(n int, maxAMShare *float64, nodes ...*Node) *fakeState {
	cfg := DefaultQueueConfig()
	cfg.Root.Children[0].MaxAMShare = maxAMShare
	f := &fakeState{cfg: cfg, nodes: nodes}
	for i := 1; i <= n; i++ {
		f.apps = append(f.apps, &App{ID: fmt.Sprintf("app%02d", i), Queue: DefaultQueue, State: AppAccepted, AMPending: true,
			CreateIndex: uint64(i), Spec: AppSpec{AMResources: Resources{MemoryMB: 256, Vcores: 1}}})
	}
	return f
}

// register makes every app whose AM container is placed RUNNING, asking
// for its one task, as its AM would on registering.
func register(f *fakeState) {
	for _, a := range f.apps {
		if !a.AMPending && a.State == AppAccepted {
			a.State = AppRunning
			a.Asks = []Ask{{AskID: 1, Count: 1, Resources: Resources{MemoryMB: 128, Vcores: 1}, ExecutionType: Guaranteed}}
		}
	}
}

// run schedules, registers and schedules again until nothing more is
// placed, and counts root.default's AM and task containers.
func run(f *fakeState) (ams, tasks int) {
	for pass := 0; pass < 10; pass++ {
		ps := schedule(f)
		if len(ps) == 0 {
			break
		}
		f.apply(ps)
		register(f)
	}
	for _, c := range f.containers {
		switch {
		case f.app(c.AppID).Queue != DefaultQueue:
		case c.IsAM:
			ams++
		default:
			tasks++
		}
	}
	return ams, tasks
}

// SPEC §7: AMs can never take every slot and starve their own tasks. 16
// one-task apps on 12 vcores: root.default's fair share is the cluster,
// its AM limit ceil(0.5 × 12) = 6 vcores, so 6 AMs run and their 6 tasks
// take the other 6 vcores. With max_am_share off, 12 AMs take every vcore
// and no task ever runs.
func TestMaxAMShareLeavesRoomForTasks(t *testing.T) {
	f := oneTaskApps(16, nil, node("n1", 16*1024, 12))
	// Before any AM runs, the first 6 (by priority, then submission) are
	// admitted and the others wait behind them.
	if w := held(f); len(w) != 10 || w["app06"] != "" ||
		!strings.Contains(w["app07"], "the AMs of apps ahead of it will take memory_mb=1536,vcores=6 more") {
		t.Fatalf("waiting before the first pass = %v", w)
	}
	if ams, tasks := run(f); ams != 6 || tasks != 6 {
		t.Fatalf("max_am_share 0.5: %d AMs and %d tasks placed, want 6 and 6", ams, tasks)
	}
	waiting := held(f)
	if len(waiting) != 10 || !strings.Contains(waiting["app07"], "max_am_share 0.5") {
		t.Fatalf("waiting = %v, want the 10 apps without an AM held by max_am_share", waiting)
	}
	for _, a := range f.apps[6:] {
		if a.State != AppAccepted || !a.AMPending {
			t.Fatalf("app %s is %s (AM pending %v), want ACCEPTED and waiting", a.ID, a.State, a.AMPending)
		}
	}

	off := oneTaskApps(16, ptr(MaxAMShareOff), node("n1", 16*1024, 12))
	if ams, tasks := run(off); ams != 12 || tasks != 0 {
		t.Fatalf("max_am_share -1: %d AMs and %d tasks placed, want the old 12 and 0", ams, tasks)
	}
}

// Apps held by max_am_share still count for fair shares (they are
// runnable), but their AM demand does not make them starve: preempting
// others would not let their AM run. Queue big holds 12 of 24 vcores,
// over its 8 GB fair share in memory; root.default's 16 apps run 6 AMs and
// their 6 tasks in the other 12. The 10 held apps are below their fair
// share, and big has containers to spare, but nothing is preempted.
func TestMaxAMShareHeldAppsDoNotStarve(t *testing.T) {
	f := oneTaskApps(16, nil, node("n1", 16*1024, 24))
	f.cfg.Root.Children = append(f.cfg.Root.Children, NewQueueSpec("big"))
	f.cfg.Scheduler.Preemption = PreemptionConfig{Enabled: true, ClusterUtilizationThreshold: 0.5}
	timeout := time.Second
	f.cfg.Root.FairSharePreemptionTimeout = &timeout
	f.cfg.Root.MinSharePreemptionTimeout = &timeout
	f.cfg.Root.Children[0].MinResources = Resources{MemoryMB: 8 * 1024, Vcores: 12}
	big := runningApp("big", "root.big", 100, 0, gb1)
	big.Asks = nil
	f.apps = append(f.apps, big)
	for i := 0; i < 12; i++ {
		f.apply([]Placement{{AppID: "big", NodeID: "n1", Resources: gb1}})
	}
	if ams, tasks := run(f); ams != 6 || tasks != 6 {
		t.Fatalf("%d AMs and %d tasks placed, want 6 and 6", ams, tasks)
	}
	if ps := preemptAfter(f, timeout); len(ps) != 0 {
		t.Fatalf("preempted %v for apps whose AM max_am_share holds back", ps)
	}
	if got := QueueStats(f)[DefaultQueue]; got.RunningApps != 16 || got.InstantaneousFairShare.Vcores != 12 {
		t.Fatalf("root.default: %+v, want all 16 apps runnable and half the cluster as its share", got)
	}
}

func TestAMLimit(t *testing.T) {
	cluster := Resources{MemoryMB: 10240, Vcores: 10, Extended: map[string]int64{"gpu": 4}}
	free := Resources{MemoryMB: 4096, Vcores: 3, Extended: map[string]int64{"gpu": 1}}
	capped := &Resources{MemoryMB: 2048, Vcores: Unlimited}
	cases := []struct {
		name  string
		share float64
		max   *Resources
		fair  Resources
		want  string
	}{
		{"half the fair share", 0.5, nil, Resources{MemoryMB: 8192, Vcores: 8, Extended: map[string]int64{"gpu": 2}}, "memory_mb=4096,vcores=4,gpu=1"},
		{"rounded up: one vcore lets one AM run", 0.5, nil, Resources{MemoryMB: 1024, Vcores: 1, Extended: map[string]int64{"gpu": 1}}, "memory_mb=512,vcores=1,gpu=1"},
		{"no float noise: 0.3 × 10 is 3", 0.3, nil, Resources{MemoryMB: 10, Vcores: 10, Extended: map[string]int64{"gpu": 4}}, "memory_mb=3,vcores=3,gpu=2"},
		{"a zero fair share takes the cluster's free room", 0.5, nil, Resources{}, "memory_mb=2048,vcores=2,gpu=1"},
		{"… capped by max_resources", 0.5, capped, Resources{}, "memory_mb=1024,vcores=2,gpu=1"},
	}
	for _, c := range cases {
		q := &Queue{Path: "root.q", MaxAMShare: c.share, MaxResources: c.max}
		if got := amLimit(q, c.fair, free, cluster).String(); got != c.want {
			t.Errorf("%s: amLimit = %s, want %s", c.name, got, c.want)
		}
	}
}

// held returns why apps wait in ACCEPTED for max_running_apps or
// max_am_share, as WhyPending says.
func held(st State) map[string]string {
	out := map[string]string{}
	for id, r := range WhyPending(st, time.Unix(0, 0), nil) {
		if r.Code == PendingMaxRunningApps || r.Code == PendingMaxAMShare {
			out[id] = r.Message
		}
	}
	return out
}
