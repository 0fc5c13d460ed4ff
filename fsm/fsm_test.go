package fsm

import (
	"bytes"
	"errors"
	"io"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/raft"
	"github.com/weft-sched/weft/scheduler"
)

func ptr[T any](v T) *T { return &v }

func testConfig() *scheduler.QueueConfig {
	prod := scheduler.NewQueueSpec("prod")
	prod.Weight = 3
	prod.MinResources = scheduler.Resources{MemoryMB: 4096, Vcores: 4, Extended: map[string]int64{"gpu": 1}}
	prod.MaxResources = &scheduler.Resources{MemoryMB: 1 << 20, Vcores: 512, Extended: map[string]int64{"gpu": 8}}
	prod.Preemptable = ptr(false)
	prod.MaxRunningApps = ptr(10)
	prod.FairSharePreemptionThreshold = ptr(0.8)
	prod.FairSharePreemptionTimeout = ptr(5 * time.Second)
	root := scheduler.NewQueueSpec("root")
	root.Policy = scheduler.PolicyDRF
	root.Children = []*scheduler.QueueSpec{prod, scheduler.NewQueueSpec("dev"), scheduler.NewQueueSpec("default")}
	cfg := &scheduler.QueueConfig{Scheduler: scheduler.DefaultSchedulerConfig(), Root: root}
	cfg.Scheduler.Preemption.Enabled = true
	cfg.Scheduler.Locality.NodeDelay = scheduler.Delay{Opportunities: 3}
	cfg.Scheduler.Locality.RackDelay = scheduler.Delay{Duration: 2 * time.Second}
	return cfg
}

func command(t testing.TB, index uint64, mt MessageType, body any) *raft.Log {
	t.Helper()
	buf, err := Encode(mt, body)
	if err != nil {
		t.Fatal(err)
	}
	return &raft.Log{Index: index, Term: 1, Type: raft.LogCommand, Data: buf}
}

func TestQueueConfigApply(t *testing.T) {
	f := New(nil)
	before := f.State()
	if got := before.QueueConfig().Leaves(); len(got) != 1 || got[0] != scheduler.DefaultQueue {
		t.Fatalf("initial leaves = %v", got)
	}
	res := f.Apply(command(t, 7, QueueConfigApplyType, &QueueConfigApplyRequest{Config: testConfig(), Now: 1}))
	if res != nil {
		t.Fatalf("apply returned %v", res)
	}
	st := f.State()
	if st.Index() != 7 || st.TableIndex(TableQueues) != 7 {
		t.Fatalf("index %d, queues table index %d; want 7, 7", st.Index(), st.TableIndex(TableQueues))
	}
	if !reflect.DeepEqual(st.QueueConfig(), testConfig()) {
		t.Fatalf("stored config differs:\n got %+v\nwant %+v", st.QueueConfig(), testConfig())
	}
	if len(st.Queues()) != 4 || st.Queues()[1].Path != "root.prod" || st.Queues()[1].Preemptable {
		t.Fatalf("resolved queues wrong: %+v", st.Queues()[1])
	}
	// The earlier snapshot is untouched: readers holding it see no change.
	if before.Index() != 0 || len(before.QueueConfig().Leaves()) != 1 {
		t.Fatalf("an old state changed under its reader")
	}
	select {
	case <-before.Changed():
	default:
		t.Fatalf("the old state's Changed channel was not closed")
	}
}

func TestRejectedCommandChangesNothing(t *testing.T) {
	f := New(nil)
	f.Apply(command(t, 1, QueueConfigApplyType, &QueueConfigApplyRequest{Config: testConfig()}))
	good := f.State()

	bad := testConfig()
	bad.Root.Children[1].Weight = -2
	bad.Root.Children = append(bad.Root.Children, scheduler.NewQueueSpec("new"))
	for name, req := range map[string]*QueueConfigApplyRequest{
		"invalid config": {Config: bad},
		"no config":      {},
	} {
		res := f.Apply(command(t, 2, QueueConfigApplyType, req))
		err, ok := res.(error)
		if !ok || !errors.Is(err, ErrInvalid) || !strings.HasPrefix(err.Error(), "invalid queue configuration: ") {
			t.Fatalf("%s: apply returned %v, want an invalid queue configuration", name, res)
		}
		st := f.State()
		if !reflect.DeepEqual(st.QueueConfig(), good.QueueConfig()) || st.TableIndex(TableQueues) != 1 {
			t.Fatalf("%s: a rejected command changed the queue table", name)
		}
	}
	if !strings.Contains(f.Apply(command(t, 3, QueueConfigApplyType, &QueueConfigApplyRequest{Config: bad})).(error).Error(), "root.dev: weight") {
		t.Fatalf("rejection does not name the queue and field")
	}
}

func TestApplyBatchMatchesSequentialApply(t *testing.T) {
	cfgs := []*scheduler.QueueConfig{testConfig(), scheduler.DefaultQueueConfig(), testConfig()}
	cfgs[2].Root.Children[1].Weight = 7
	invalid := testConfig()
	invalid.Root.Policy = "nope"

	var logs []*raft.Log
	for i, c := range cfgs {
		logs = append(logs, command(t, uint64(10+2*i), QueueConfigApplyType, &QueueConfigApplyRequest{Config: c}))
		logs = append(logs, command(t, uint64(11+2*i), QueueConfigApplyType, &QueueConfigApplyRequest{Config: invalid}))
	}
	logs = append(logs, &raft.Log{Index: 16, Type: raft.LogNoop})

	seq, batch := New(nil), New(nil)
	var seqRes []any
	for _, l := range logs {
		seqRes = append(seqRes, seq.Apply(l))
	}
	batchRes := batch.ApplyBatch(logs)
	if len(batchRes) != len(seqRes) {
		t.Fatalf("batch returned %d results for %d logs", len(batchRes), len(logs))
	}
	for i := range seqRes {
		if (seqRes[i] == nil) != (batchRes[i] == nil) {
			t.Fatalf("result %d differs: %v vs %v", i, seqRes[i], batchRes[i])
		}
	}
	if !statesEqual(seq.State(), batch.State()) {
		t.Fatalf("batch and sequential apply diverged")
	}
	if batch.State().Index() != 16 || batch.State().QueueConfig().Root.Children[1].Weight != 7 {
		t.Fatalf("batch state wrong: index %d", batch.State().Index())
	}
}

type memSink struct {
	bytes.Buffer
	cancelled bool
}

func (s *memSink) ID() string    { return "mem" }
func (s *memSink) Cancel() error { s.cancelled = true; return nil }
func (s *memSink) Close() error  { return nil }

func persist(t testing.TB, f *FSM) []byte {
	t.Helper()
	snap, err := f.Snapshot()
	if err != nil {
		t.Fatal(err)
	}
	var sink memSink
	if err := snap.Persist(&sink); err != nil {
		t.Fatal(err)
	}
	snap.Release()
	return sink.Bytes()
}

func statesEqual(a, b *State) bool {
	return a.Index() == b.Index() && a.tableIndex == b.tableIndex &&
		reflect.DeepEqual(a.QueueConfig(), b.QueueConfig()) && reflect.DeepEqual(a.Queues(), b.Queues()) &&
		reflect.DeepEqual(a.WorkloadKeys(), b.WorkloadKeys())
}

func TestSnapshotRestoreIsIdentical(t *testing.T) {
	f := New(nil)
	f.Apply(command(t, 42, QueueConfigApplyType, &QueueConfigApplyRequest{Config: testConfig()}))
	data := persist(t, f)

	g := New(nil)
	old := g.State()
	if err := g.Restore(io.NopCloser(bytes.NewReader(data))); err != nil {
		t.Fatal(err)
	}
	if !statesEqual(f.State(), g.State()) {
		t.Fatalf("restored state differs:\n got %+v\nwant %+v", g.State().QueueConfig(), f.State().QueueConfig())
	}
	select {
	case <-old.Changed():
	default:
		t.Fatalf("restore did not wake watchers of the old state")
	}
	// Persisting the restored state gives the same bytes.
	if again := persist(t, g); !bytes.Equal(again, data) {
		t.Fatalf("snapshot of the restored state differs from the original")
	}
}

func TestRestoreRejectsDamagedSnapshots(t *testing.T) {
	f := New(nil)
	f.Apply(command(t, 5, QueueConfigApplyType, &QueueConfigApplyRequest{Config: testConfig()}))
	data := persist(t, f)
	damaged := map[string][]byte{
		"truncated":     data[:len(data)-1],
		"not weft":      append([]byte("NOTASNAP"), data[8:]...),
		"newer version": append(append([]byte("WEFTSNAP"), 99), data[9:]...),
		"unknown record": func() []byte {
			b := append([]byte(nil), data[:len(data)-1]...)
			return append(b, 0x33, byte(recordEnd))
		}(),
	}
	for name, d := range damaged {
		g := New(nil)
		if err := g.Restore(io.NopCloser(bytes.NewReader(d))); err == nil {
			t.Errorf("%s snapshot restored without error", name)
		}
		if g.State().Index() != 0 {
			t.Errorf("%s snapshot changed the state", name)
		}
	}
	// An unknown record with the high bit set is skipped: in format 2
	// by its length, in format 1 as one msgpack value.
	b := append([]byte(nil), data[:len(data)-1]...)
	b = append(b, 0x81, 4, 0x81, 0xa1, 'k', 0x01, byte(recordEnd))
	g := New(nil)
	if err := g.Restore(io.NopCloser(bytes.NewReader(b))); err != nil || !statesEqual(f.State(), g.State()) {
		t.Fatalf("skippable record: %v", err)
	}
	var v1 bytes.Buffer
	if err := writeSnapshotV1(&v1, f.State()); err != nil {
		t.Fatal(err)
	}
	b = append(v1.Bytes()[:v1.Len()-1], 0x81, 0x81, 0xa1, 'k', 0x01, byte(recordEnd))
	g = New(nil)
	if err := g.Restore(io.NopCloser(bytes.NewReader(b))); err != nil || !statesEqual(f.State(), g.State()) {
		t.Fatalf("skippable format 1 record: %v", err)
	}
}
