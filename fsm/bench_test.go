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
