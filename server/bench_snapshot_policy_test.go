package server

import (
	"fmt"
	"math/rand/v2"
	"syscall"
	"testing"
	"time"

	"github.com/hashicorp/raft"
	"github.com/weft-sched/weft/fsm"
	"github.com/weft-sched/weft/internal/raftnode"
	"github.com/weft-sched/weft/scheduler"
)

// BenchmarkSnapshotPolicy replays write workloads, on a simulated clock,
// into the FSM a server runs, and takes the snapshots a policy asks for at
// its checks (each written in full to a sink that only counts bytes): the
// old one (Raft's: a check every 5–10 s, a snapshot once 256 entries are
// new) and weft's (internal/raftnode/snapshot.go, with its defaults). The workloads
// are what `weft sim` sends a leader: 1,000 nodes and 100 apps; 1,000
// containers placed a second (one plan); each second's container reports
// as 16 batched entries. "young": from an empty state until 100,000 run,
// then 60 s in which 1,000 a second complete and 1,000 are placed.
// "steady": the same 100,000 built and snapshotted beforehand (not
// measured), then 300 s of that churn. It reports per run the snapshots
// taken, their CPU and bytes, the FSM's CPU applying the log, the log's
// bytes, and the most log a restart would have had to replay at any moment
// (with an estimate of its replay from the measured apply cost).
func BenchmarkSnapshotPolicy(b *testing.B) {
	for _, w := range []struct {
		name  string
		warm  bool
		churn int
	}{{"young", false, 60}, {"steady", true, 300}} {
		b.Run(w.name, func(b *testing.B) { benchSnapshotPolicy(b, w.warm, w.churn) })
	}
}

func benchSnapshotPolicy(b *testing.B, warm bool, churnSeconds int) {
	for _, pc := range []struct {
		name     string
		interval time.Duration
		due      func(raftnode.LogSince) bool
	}{
		{"old-256-entries", 5 * time.Second, func(l raftnode.LogSince) bool { return l.Entries >= 256 }},
		{"new-default", DefaultSnapshotInterval, raftnode.SnapshotPolicy{MinLogBytes: DefaultSnapshotMinLogBytes,
			LogPercent: DefaultSnapshotLogPercent, MaxEntries: DefaultSnapshotMaxEntries}.Due},
		{"new-10-percent", DefaultSnapshotInterval, raftnode.SnapshotPolicy{MinLogBytes: DefaultSnapshotMinLogBytes,
			LogPercent: 10, MaxEntries: DefaultSnapshotMaxEntries}.Due},
	} {
		b.Run(pc.name, func(b *testing.B) {
			var r policyRun
			for i := 0; i < b.N; i++ {
				r.add(runSnapshotPolicy(b, pc.interval, pc.due, warm, churnSeconds))
			}
			n := float64(b.N)
			b.ReportMetric(float64(r.snapshots)/n, "snapshots/op")
			b.ReportMetric(r.snapshotCPU.Seconds()/n, "snapshot-cpu-s/op")
			b.ReportMetric(float64(r.snapshotBytes)/n/(1<<20), "snapshot-MB/op")
			b.ReportMetric(r.applyCPU.Seconds()/n, "apply-cpu-s/op")
			b.ReportMetric(float64(r.logBytes)/n/(1<<20), "log-MB/op")
			b.ReportMetric(float64(r.maxReplay)/(1<<20), "max-replay-MB")
			b.ReportMetric(r.applyCPU.Seconds()*float64(r.maxReplay)/float64(r.logBytes), "max-replay-est-s")
		})
	}
}

type policyRun struct {
	snapshots, snapshotBytes, logBytes, maxReplay uint64
	snapshotCPU, applyCPU                         time.Duration
}

func (r *policyRun) add(o policyRun) {
	r.snapshots += o.snapshots
	r.snapshotBytes += o.snapshotBytes
	r.logBytes += o.logBytes
	r.maxReplay = max(r.maxReplay, o.maxReplay)
	r.snapshotCPU += o.snapshotCPU
	r.applyCPU += o.applyCPU
}

// runSnapshotPolicy plays the workload once, checking due every interval
// to twice it (random, the same sequence for every policy); warm builds
// the running containers, and snapshots them, before it measures.
func runSnapshotPolicy(b *testing.B, interval time.Duration, due func(raftnode.LogSince) bool, warm bool, churnSeconds int) policyRun {
	b.Helper()
	const (
		nodes, apps   = 1000, 100
		running       = 100_000
		perSecond     = 1000
		reportBatches = 16
	)
	b.StopTimer()
	meter := &raftnode.LogMeter{}
	m := raftnode.Metered(fsm.New(nil), meter)
	var (
		run   policyRun
		index uint64
		now   time.Duration // simulated
		rng   = rand.New(rand.NewPCG(1, 2))
	)
	check := interval + time.Duration(rng.Int64N(int64(interval)))
	apply := func(mt fsm.MessageType, body any) any {
		buf, err := fsm.Encode(mt, body)
		if err != nil {
			b.Fatal(err)
		}
		index++
		start := processCPU(b)
		res := m.ApplyBatch([]*raft.Log{{Index: index, Term: 1, Type: raft.LogCommand, Data: buf}})[0]
		run.applyCPU += processCPU(b) - start
		run.logBytes += uint64(len(buf))
		if err, ok := res.(error); ok {
			b.Fatalf("command %d: %v", mt, err)
		}
		run.maxReplay = max(run.maxReplay, meter.Since().Bytes)
		return res
	}
	snapshot := func() {
		snap, err := m.Snapshot()
		if err != nil {
			b.Fatal(err)
		}
		sink := &discardSink{}
		start := processCPU(b)
		if err := snap.Persist(sink); err != nil {
			b.Fatal(err)
		}
		run.snapshotCPU += processCPU(b) - start
		run.snapshots++
		run.snapshotBytes += sink.n
	}
	checking := !warm
	// tick advances the simulated clock by a second, checking as it passes.
	tick := func() {
		now += time.Second
		for checking && check <= now {
			if due(meter.Since()) {
				snapshot()
			}
			check += interval + time.Duration(rng.Int64N(int64(interval)))
		}
	}
	node := func(i int) string { return fmt.Sprintf("n%04d", i%nodes) }
	task := scheduler.Resources{MemoryMB: 1024, Vcores: 1}
	for i := 0; i < nodes; i++ {
		apply(fsm.NodeRegisterType, &fsm.NodeRegisterRequest{ID: node(i), Address: node(i) + ":8049",
			Capacity: scheduler.Resources{MemoryMB: 1 << 40, Vcores: 1 << 30}})
	}
	appIDs := make([]string, apps)
	perApp := (running + churnSeconds*perSecond) / apps
	for a := range appIDs {
		spec := scheduler.AppSpec{User: "bench", AMResources: task,
			DShell: scheduler.DShell{NumContainers: perApp, Command: []string{"true"}, Resources: task}}
		appIDs[a] = apply(fsm.AppSubmitType, &fsm.AppSubmitRequest{Spec: spec}).(string)
		apply(fsm.PlanApplyType, &fsm.PlanApplyRequest{Placements: []scheduler.Placement{{
			AppID: appIDs[a], Attempt: 1, NodeID: node(a), Resources: task, IsAM: true}}})
		apply(fsm.AppRegisterType, &fsm.AppRegisterRequest{AppID: appIDs[a], Attempt: 1})
		apply(fsm.AskUpdateType, &fsm.AskUpdateRequest{AppID: appIDs[a], Attempt: 1,
			Asks: []scheduler.Ask{{AskID: 1, Count: perApp, Resources: task, ExecutionType: scheduler.Guaranteed}}})
	}
	b.StartTimer()

	type placed struct{ id, node string }
	var live []placed // oldest first
	report := func(cs []placed, state scheduler.ContainerState) {
		for k := 0; k < reportBatches; k++ {
			part := cs[k*len(cs)/reportBatches : (k+1)*len(cs)/reportBatches]
			byNode := map[string][]fsm.ContainerStatus{}
			var order []string
			for _, c := range part {
				if byNode[c.node] == nil {
					order = append(order, c.node)
				}
				byNode[c.node] = append(byNode[c.node], fsm.ContainerStatus{ID: c.id, State: state, At: int64(now)})
			}
			req := &fsm.ContainerUpdateBatchRequest{}
			for _, n := range order {
				req.Updates = append(req.Updates, fsm.ContainerUpdateRequest{NodeID: n, Updates: byNode[n]})
			}
			apply(fsm.ContainerUpdateBatchType, req)
		}
	}
	k := 0
	second := func(complete bool) {
		ps := make([]scheduler.Placement, perSecond)
		for j := range ps {
			ps[j] = scheduler.Placement{AppID: appIDs[k%apps], Attempt: 1, AskID: 1, NodeID: node(k), Resources: task}
			k++
		}
		res := apply(fsm.PlanApplyType, &fsm.PlanApplyRequest{Placements: ps, Now: int64(now)}).(*fsm.PlanResult)
		fresh := make([]placed, len(ps))
		for j, id := range res.IDs {
			if id == "" {
				b.Fatalf("placement refused: %v", res.Refused)
			}
			fresh[j] = placed{id: id, node: ps[j].NodeID}
		}
		report(fresh, scheduler.ContainerRunning)
		if complete {
			report(live[:perSecond], scheduler.ContainerCompleted)
			live = live[perSecond:]
		}
		live = append(live, fresh...)
		tick()
	}
	if warm {
		b.StopTimer()
	}
	for len(live) < running {
		second(false)
	}
	if warm {
		snapshot()
		run, checking, check = policyRun{}, true, now+check
		b.StartTimer()
	}
	for s := 0; s < churnSeconds; s++ {
		second(true)
	}
	b.StopTimer()
	return run
}

// processCPU is the CPU time this process has used, its garbage
// collector's included.
func processCPU(b *testing.B) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		b.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// discardSink is a raft.SnapshotSink that only counts what is written.
type discardSink struct{ n uint64 }

func (s *discardSink) Write(p []byte) (int, error) { s.n += uint64(len(p)); return len(p), nil }
func (s *discardSink) Close() error                { return nil }
func (s *discardSink) ID() string                  { return "bench" }
func (s *discardSink) Cancel() error               { return nil }
