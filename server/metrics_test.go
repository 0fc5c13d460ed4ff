package server

import (
	"testing"
	"time"

	"github.com/hashicorp/raft"
	"github.com/weft-sched/weft/fsm"
	"github.com/weft-sched/weft/internal/metrics"
	"github.com/weft-sched/weft/scheduler"
)

// starvingCluster is one 8 GB / 8 vcore node that app A (queue a: its AM
// and six tasks) fills but for app B's AM (queue b), B asking for four
// tasks more. shape adjusts the queue configuration first.
func starvingCluster(t *testing.T, shape func(a, b *scheduler.QueueSpec)) *fsm.State {
	f := fsm.New(nil)
	var index uint64
	apply := func(mt fsm.MessageType, body any) any {
		t.Helper()
		index++
		buf, err := fsm.Encode(mt, body)
		if err != nil {
			t.Fatal(err)
		}
		res := f.Apply(&raft.Log{Index: index, Term: 1, Type: raft.LogCommand, Data: buf})
		if err, ok := res.(error); ok {
			t.Fatalf("command %d: %v", mt, err)
		}
		return res
	}
	a, b := scheduler.NewQueueSpec("a"), scheduler.NewQueueSpec("b")
	shape(a, b)
	cfg := scheduler.DefaultQueueConfig()
	cfg.Root.Children = []*scheduler.QueueSpec{a, b}
	cfg.Scheduler.Preemption.Enabled = true
	apply(fsm.QueueConfigApplyType, &fsm.QueueConfigApplyRequest{Config: cfg})
	apply(fsm.NodeRegisterType, &fsm.NodeRegisterRequest{ID: "n1", Address: "n1:8049", Capacity: scheduler.Resources{MemoryMB: 8192, Vcores: 8}})
	gb := scheduler.Resources{MemoryMB: 1024, Vcores: 1}
	run := func(queue string, tasks, asks int) {
		spec := scheduler.AppSpec{Queue: queue, User: "u", AMResources: gb, DShell: scheduler.DShell{NumContainers: 1, Command: []string{"true"}, Resources: gb}}
		app := apply(fsm.AppSubmitType, &fsm.AppSubmitRequest{Spec: spec}).(string)
		plan := []scheduler.Placement{{AppID: app, Attempt: 1, NodeID: "n1", Resources: gb, IsAM: true}}
		apply(fsm.PlanApplyType, &fsm.PlanApplyRequest{Placements: plan})
		apply(fsm.AppRegisterType, &fsm.AppRegisterRequest{AppID: app, Attempt: 1})
		apply(fsm.AskUpdateType, &fsm.AskUpdateRequest{AppID: app, Attempt: 1,
			Asks: []scheduler.Ask{{AskID: 1, Count: tasks + asks, Resources: gb, ExecutionType: scheduler.Guaranteed}}})
		plan = plan[:0]
		for range tasks {
			plan = append(plan, scheduler.Placement{AppID: app, Attempt: 1, AskID: 1, NodeID: "n1", Resources: gb})
		}
		if len(plan) > 0 {
			if res := apply(fsm.PlanApplyType, &fsm.PlanApplyRequest{Placements: plan}).(*fsm.PlanResult); len(res.Refused) > 0 {
				t.Fatalf("placements refused: %v", res.Refused)
			}
		}
	}
	run("root.a", 6, 0)
	run("root.b", 0, 4)
	return f.State()
}

// preemptionsAfter plans preemption at t0 (starting the starvation clocks)
// and again wait later.
func preemptionsAfter(st *fsm.State, wait time.Duration) []scheduler.Preemption {
	clocks := scheduler.NewStarvationClocks()
	t0 := time.Unix(1000, 0)
	scheduler.PlanPreemption(st, t0, clocks)
	return scheduler.PlanPreemption(st, t0.Add(wait), clocks)
}

func TestPreemptionReasonsAreNamedByKind(t *testing.T) {
	minute, hour := time.Minute, time.Hour
	for _, c := range []struct {
		name  string
		shape func(a, b *scheduler.QueueSpec)
		want  metrics.PreemptionReason
	}{
		{"fair share", func(a, b *scheduler.QueueSpec) { b.FairSharePreemptionTimeout = &minute }, metrics.PreemptFairShare},
		{"min share", func(a, b *scheduler.QueueSpec) {
			b.FairSharePreemptionTimeout = &hour
			b.MinSharePreemptionTimeout = &minute
			b.MinResources = scheduler.Resources{MemoryMB: 3072, Vcores: 3}
		}, metrics.PreemptMinShare},
	} {
		t.Run(c.name, func(t *testing.T) {
			ps := preemptionsAfter(starvingCluster(t, c.shape), minute)
			if len(ps) == 0 {
				t.Fatal("nothing preempted for the starving app")
			}
			for _, p := range ps {
				if got := preemptionReason(p.Reason); got != c.want {
					t.Errorf("preemption %q counted as %q, want %q", p.Reason, got, c.want)
				}
			}
		})
	}
	if got := preemptionReason("a reason from a later build"); got != metrics.PreemptOther {
		t.Errorf("an unknown reason counted as %q, want %q", got, metrics.PreemptOther)
	}
}

func TestServerSampleReportsQueuesAndNodes(t *testing.T) {
	s := serverSample(starvingCluster(t, func(a, b *scheduler.QueueSpec) {}))
	if s.Nodes["READY"] != 1 || s.Nodes["DOWN"] != 0 || s.Nodes["DRAINING"] != 0 || len(s.Nodes) != 3 {
		t.Errorf("nodes by state %v, want READY 1 and DOWN, DRAINING 0", s.Nodes)
	}
	byQueue := map[string]metrics.QueueSample{}
	for _, q := range s.Queues {
		byQueue[q.Queue] = q
	}
	a, b := byQueue["root.a"], byQueue["root.b"]
	if a.RunningApps != 1 || a.Used["memory_mb"] != 7*1024 || a.Used["vcores"] != 7 || a.Pending["memory_mb"] != 0 {
		t.Errorf("root.a %+v, want one app using 7 GB / 7 vcores with nothing pending", a)
	}
	if b.Used["memory_mb"] != 1024 || b.Pending["vcores"] != 4 {
		t.Errorf("root.b %+v, want 1 GB used and 4 vcores pending", b)
	}
	if a.SteadyFairShare["memory_mb"] != 4096 || b.InstantaneousFairShare["memory_mb"] != 4096 {
		t.Errorf("fair shares: root.a steady %v, root.b instantaneous %v; want 4096 MB each", a.SteadyFairShare, b.InstantaneousFairShare)
	}
	if _, ok := byQueue["root"]; !ok || len(s.Queues) != 3 {
		t.Errorf("queues %v, want root, root.a and root.b", s.Queues)
	}
}
