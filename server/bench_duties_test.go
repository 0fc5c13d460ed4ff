package server

import (
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/raft"
	"github.com/weft-sched/weft/fsm"
	"github.com/weft-sched/weft/scheduler"
)

// Sizes of the leader-duty benchmarks' cluster: 10,000 nodes running
// 1,000,000 guaranteed containers of 100 apps in three queues, 1% of them
// marked for preemption (a hundred of those due), 1% allocated and never
// started, preemption on, and a starving app in a fourth queue.
const (
	dutyNodes       = 10_000
	dutyApps        = 100
	dutyPerApp      = 10_000
	dutyMarked      = 10_000
	dutyMarkedDue   = 100
	dutyUnstarted   = 10_000
	dutyTaskMemory  = 1024
	dutyNodeVcores  = 100 // 100 tasks; the first nodes have room for an AM more
	dutyStarvedAsks = 1000
)

var (
	dutyOnce  sync.Once
	dutyState *fsm.State
	dutyNow   time.Time
)

// dutyCluster builds the benchmark state once, through FSM commands as a
// leader would commit them.
func dutyCluster(b *testing.B) (*fsm.State, time.Time) {
	dutyOnce.Do(func() {
		start := time.Now()
		dutyState, dutyNow = buildDutyCluster(b)
		b.Logf("built %d nodes, %d containers in %s", dutyNodes, dutyApps*dutyPerApp, time.Since(start).Round(time.Second))
	})
	if dutyState == nil {
		b.Fatal("the benchmark cluster could not be built")
	}
	return dutyState, dutyNow
}

func buildDutyCluster(b *testing.B) (*fsm.State, time.Time) {
	f := fsm.New(nil)
	var index uint64
	apply := func(t fsm.MessageType, body any) any {
		index++
		buf, err := fsm.Encode(t, body)
		if err != nil {
			b.Fatal(err)
		}
		res := f.Apply(&raft.Log{Index: index, Term: 1, Type: raft.LogCommand, Data: buf})
		if err, ok := res.(error); ok {
			b.Fatalf("command %d: %v", t, err)
		}
		return res
	}
	now := time.Unix(2_000_000_000, 0)
	cfg := scheduler.DefaultQueueConfig()
	cfg.Root.Children = nil
	for i := 0; i < 4; i++ {
		cfg.Root.Children = append(cfg.Root.Children, scheduler.NewQueueSpec(fmt.Sprintf("q%d", i)))
	}
	cfg.Root.Children = append(cfg.Root.Children, scheduler.NewQueueSpec("default"))
	timeout := time.Second
	cfg.Root.FairSharePreemptionTimeout = &timeout
	cfg.Scheduler.Preemption.Enabled = true
	apply(fsm.QueueConfigApplyType, &fsm.QueueConfigApplyRequest{Config: cfg})

	node := func(i int) string { return fmt.Sprintf("n%05d", i) }
	for i := 0; i < dutyNodes; i++ {
		vcores := int64(dutyNodeVcores)
		if i <= dutyApps {
			vcores++ // an AM's room: the apps' and the starving one's
		}
		apply(fsm.NodeRegisterType, &fsm.NodeRegisterRequest{ID: node(i), Address: node(i) + ":8049",
			Capacity: scheduler.Resources{MemoryMB: vcores * dutyTaskMemory, Vcores: vcores}})
	}
	task := scheduler.Resources{MemoryMB: dutyTaskMemory, Vcores: 1}
	submit := func(queue string, n int) string {
		spec := scheduler.AppSpec{Queue: queue, User: "bench", AMResources: task,
			DShell: scheduler.DShell{NumContainers: n, Command: []string{"true"}, Resources: task}}
		return apply(fsm.AppSubmitType, &fsm.AppSubmitRequest{Spec: spec, Now: now.UnixNano()}).(string)
	}
	start := func(app, onNode string, asks int) {
		res := apply(fsm.PlanApplyType, &fsm.PlanApplyRequest{Placements: []scheduler.Placement{{
			AppID: app, Attempt: 1, NodeID: onNode, Resources: task, IsAM: true}}, Now: now.UnixNano()}).(*fsm.PlanResult)
		if res.IDs[0] == "" {
			b.Fatalf("AM of %s refused: %v", app, res.Refused)
		}
		apply(fsm.AppRegisterType, &fsm.AppRegisterRequest{AppID: app, Attempt: 1, Now: now.UnixNano()})
		apply(fsm.AskUpdateType, &fsm.AskUpdateRequest{AppID: app, Attempt: 1,
			Asks: []scheduler.Ask{{AskID: 1, Count: asks, Resources: task, ExecutionType: scheduler.Guaranteed}}})
	}
	apps := make([]string, dutyApps)
	for a := range apps {
		apps[a] = submit(fmt.Sprintf("root.q%d", a%3), dutyPerApp)
		start(apps[a], node(a), dutyPerApp)
	}
	// Every app's tasks, spread over every node, committed as plans.
	byNode := make([][]string, dutyNodes)
	var plan []scheduler.Placement
	commit := func() {
		res := apply(fsm.PlanApplyType, &fsm.PlanApplyRequest{Placements: plan, Now: now.UnixNano()}).(*fsm.PlanResult)
		for i, id := range res.IDs {
			if id == "" {
				b.Fatalf("placement refused: %v", res.Refused)
			}
			n := plan[i].NodeID
			var k int
			fmt.Sscanf(n, "n%05d", &k)
			byNode[k] = append(byNode[k], id)
		}
		plan = plan[:0]
	}
	k := 0
	for a := range apps {
		for i := 0; i < dutyPerApp; i++ {
			plan = append(plan, scheduler.Placement{AppID: apps[a], Attempt: 1, AskID: 1, NodeID: node(k % dutyNodes), Resources: task})
			k++
			if len(plan) == scheduler.DefaultMaxPlacements {
				commit()
			}
		}
	}
	if len(plan) > 0 {
		commit()
	}
	// Nodes report their containers running, but one on each never
	// started (1%); the last hundred nodes' containers are being preempted
	// for another app (1%), a hundred of them due now.
	var marks, due []fsm.PreemptMark
	for n, ids := range byNode {
		var ups []fsm.ContainerStatus
		for j, id := range ids {
			if j == 0 {
				continue // never started
			}
			if n >= dutyNodes-dutyMarked/dutyNodeVcores {
				m := fsm.PreemptMark{ContainerID: id, ForApp: apps[0], Reason: "bench"}
				if len(due) < dutyMarkedDue {
					due = append(due, m)
				} else {
					marks = append(marks, m)
				}
			}
			ups = append(ups, fsm.ContainerStatus{ID: id, State: scheduler.ContainerRunning, At: now.UnixNano()})
		}
		apply(fsm.ContainerUpdateType, &fsm.ContainerUpdateRequest{NodeID: node(n), Updates: ups})
	}
	apply(fsm.PreemptMarkType, &fsm.PreemptMarkRequest{Marks: due, KillAt: now.Add(-time.Second).UnixNano(), Now: now.UnixNano()})
	apply(fsm.PreemptMarkType, &fsm.PreemptMarkRequest{Marks: marks, KillAt: now.Add(time.Hour).UnixNano(), Now: now.UnixNano()})
	// A starving app in the fourth queue: its AM fits on a node with an
	// AM's room left; its tasks fit nowhere.
	starved := submit("root.q3", dutyStarvedAsks)
	start(starved, node(dutyApps), dutyStarvedAsks)
	return f.State(), now.Add(ContainerStartTimeout + time.Minute)
}

// BenchmarkLeaderDuties measures each once-a-second duty of the leader on
// a cluster of 1,000,000 containers: what one tick costs.
func BenchmarkLeaderDuties(b *testing.B) {
	st, now := dutyCluster(b)
	b.Run("expiry-1M", func(b *testing.B) {
		b.ReportAllocs()
		for i := 0; i < b.N; i++ {
			if n := len(unstartedExpired(st, now)); n != dutyUnstarted {
				b.Fatalf("%d expired, want %d", n, dutyUnstarted)
			}
		}
	})
	b.Run("preemption-kills-due-1M", func(b *testing.B) {
		b.ReportAllocs()
		for i := 0; i < b.N; i++ {
			if n := len(preemptionKillsDue(st, now)); n != dutyMarkedDue {
				b.Fatalf("%d due, want %d", n, dutyMarkedDue)
			}
		}
	})
	b.Run("plan-preemption-1M", func(b *testing.B) {
		clocks := scheduler.NewStarvationClocks()
		scheduler.PlanPreemption(st, now.Add(-2*time.Second), clocks) // the starvation clock starts
		b.ReportAllocs()
		b.ResetTimer()
		for i := 0; i < b.N; i++ {
			if ps := scheduler.PlanPreemption(st, now, clocks); len(ps) == 0 {
				b.Fatal("nothing preempted for the starving app")
			}
		}
	})
	b.Run("schedule-pass-1M", func(b *testing.B) {
		waits := scheduler.NewLocalityWaits()
		b.ReportAllocs()
		for i := 0; i < b.N; i++ {
			scheduler.Schedule(st, now, waits, scheduler.DefaultMaxPlacements)
		}
	})
	b.Run("drain-kills-due-1M", func(b *testing.B) {
		b.ReportAllocs()
		for i := 0; i < b.N; i++ {
			if n := len(drainKillsDue(st, now)); n != 0 {
				b.Fatalf("%d drain kills on a cluster without drains", n)
			}
		}
	})
	b.Run("gc-nothing-due-1M", func(b *testing.B) {
		p := fsm.GCPolicy{MaxCompletedApps: DefaultMaxCompletedApps, AppsBefore: now.Add(-DefaultAppGCThreshold).UnixNano(),
			NodesBefore: now.Add(-DefaultNodeGCThreshold).UnixNano(), Limit: gcBatch}
		b.ReportAllocs()
		for i := 0; i < b.N; i++ {
			if req := st.Garbage(p); req != nil {
				b.Fatalf("garbage on a cluster without any: %+v", req)
			}
		}
	})
	b.Run("liveness-10k-nodes", func(b *testing.B) {
		l := newLiveness(DefaultNodeTTL, DefaultNodeGossipGrace)
		nodes := st.Nodes()
		l.Reset(now)
		b.ReportAllocs()
		for i := 0; i < b.N; i++ {
			t := now.Add(time.Duration(i) * time.Millisecond)
			for _, n := range nodes {
				l.Heartbeat(n.ID, n.Epoch, t, nil)
			}
			if downs := l.Tick(t, nodes); len(downs) != 0 {
				b.Fatalf("%d healthy nodes marked down", len(downs))
			}
		}
	})
}
