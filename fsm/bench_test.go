package fsm

import (
	"bytes"
	"fmt"
	"io"
	"testing"

	"github.com/hashicorp/raft"
	"github.com/weft-sched/weft/scheduler"
)

// wideConfig is a realistic large tree: 10 parents × 10 leaves.
func wideConfig() *scheduler.QueueConfig {
	cfg := scheduler.DefaultQueueConfig()
	for i := 0; i < 10; i++ {
		p := scheduler.NewQueueSpec(fmt.Sprintf("team%d", i))
		p.MinResources = scheduler.Resources{MemoryMB: 1024, Vcores: 1}
		for j := 0; j < 10; j++ {
			p.Children = append(p.Children, scheduler.NewQueueSpec(fmt.Sprintf("q%d", j)))
		}
		cfg.Root.Children = append(cfg.Root.Children, p)
	}
	return cfg
}

// BenchmarkFSMApply measures Apply of one queue-configuration command
// (decode, validate, resolve, publish) for a 111-queue tree.
func BenchmarkFSMApply(b *testing.B) {
	f := New(nil)
	l := command(b, 1, QueueConfigApplyType, &QueueConfigApplyRequest{Config: wideConfig()})
	b.ReportAllocs()
	b.SetBytes(int64(len(l.Data)))
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		l.Index = uint64(i + 1)
		if res := f.Apply(l); res != nil {
			b.Fatal(res)
		}
	}
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "commands/s")
}

// BenchmarkFSMApplyBatch measures ApplyBatch with Raft's maximum batch of
// 64 commands, which publishes one state per batch.
func BenchmarkFSMApplyBatch(b *testing.B) {
	f := New(nil)
	logs := make([]*raft.Log, 64)
	for i := range logs {
		logs[i] = command(b, uint64(i+1), QueueConfigApplyType, &QueueConfigApplyRequest{Config: scheduler.DefaultQueueConfig()})
	}
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		for j, l := range logs {
			l.Index = uint64(i*64 + j + 1)
		}
		f.ApplyBatch(logs)
	}
	b.ReportMetric(float64(b.N*64)/b.Elapsed().Seconds(), "commands/s")
}

// BenchmarkSnapshotRestore measures a persist and restore round trip.
func BenchmarkSnapshotRestore(b *testing.B) {
	f := New(nil)
	f.Apply(command(b, 1, QueueConfigApplyType, &QueueConfigApplyRequest{Config: wideConfig()}))
	var buf bytes.Buffer
	b.ReportAllocs()
	for i := 0; i < b.N; i++ {
		buf.Reset()
		if err := writeSnapshot(&buf, f.State()); err != nil {
			b.Fatal(err)
		}
		if err := New(nil).Restore(io.NopCloser(&buf)); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkPlanApply measures one FSM applying plans of 4,096 guaranteed
// placements (100 running apps, 1,000 nodes): the per-server cost of
// committing containers.
func BenchmarkPlanApply(b *testing.B) {
	h, apps := newBenchFSM(b, 1000, 100)
	f, next := h.f, h.next
	size := scheduler.Resources{MemoryMB: 256, Vcores: 1}
	const perPlan = 4096
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		b.StopTimer()
		for _, id := range apps {
			next(AskUpdateType, &AskUpdateRequest{AppID: id, Attempt: 1, SeenIndex: h.idx,
				Asks: []scheduler.Ask{{AskID: uint64(i + 1), Count: perPlan/len(apps) + 1, Resources: size, ExecutionType: scheduler.Guaranteed}}})
		}
		ps := make([]scheduler.Placement, perPlan)
		for j := range ps {
			ps[j] = scheduler.Placement{AppID: apps[j%len(apps)], Attempt: 1, AskID: uint64(i + 1), NodeID: fmt.Sprintf("n%04d", j%1000), Resources: size}
		}
		l := command(b, h.idx+1, PlanApplyType, &PlanApplyRequest{Placements: ps})
		h.idx++
		b.StartTimer()
		res := f.Apply(l).(*PlanResult)
		if len(res.Refused) != 0 {
			b.Fatalf("refused %v", res.Refused[:1])
		}
	}
	b.ReportMetric(float64(b.N*perPlan)/b.Elapsed().Seconds(), "containers/s")
}

// benchFSM is an FSM fed commands at consecutive Raft indexes.
type benchFSM struct {
	f   *FSM
	tb  testing.TB
	idx uint64
}

func (h *benchFSM) next(mt MessageType, body any) any {
	h.idx++
	return h.f.Apply(command(h.tb, h.idx, mt, body))
}

// newBenchFSM returns an FSM holding nodes nodes n0000, n0001, … with
// room for anything, and apps running dshell apps, each with its AM
// placed on n0000 and registered; it returns the apps' IDs.
func newBenchFSM(tb testing.TB, nodes, apps int) (*benchFSM, []string) {
	h := &benchFSM{f: New(nil), tb: tb}
	for i := 0; i < nodes; i++ {
		h.next(NodeRegisterType, &NodeRegisterRequest{ID: fmt.Sprintf("n%04d", i), Capacity: scheduler.Resources{MemoryMB: 1 << 40, Vcores: 1 << 30}})
	}
	var ids []string
	for i := 0; i < apps; i++ {
		id := h.next(AppSubmitType, &AppSubmitRequest{Spec: scheduler.AppSpec{DShell: scheduler.DShell{NumContainers: 1, Command: []string{"x"}}}}).(string)
		h.next(PlanApplyType, &PlanApplyRequest{Placements: []scheduler.Placement{{AppID: id, Attempt: 1, NodeID: "n0000",
			Resources: scheduler.Resources{MemoryMB: 256, Vcores: 1}, IsAM: true}}})
		h.next(AppRegisterType, &AppRegisterRequest{AppID: id, Attempt: 1})
		ids = append(ids, id)
	}
	return h, ids
}
