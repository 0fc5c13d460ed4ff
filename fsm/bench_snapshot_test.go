package fsm

import (
	"bytes"
	"fmt"
	"io"
	"os"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/hashicorp/raft"
	"github.com/weft-sched/weft/scheduler"
)

// Sizes of the snapshot benchmarks' state: 10,000 nodes running 1,000,000
// containers of 100 apps, every container reported RUNNING, as the leader
// would have committed them (plans of 4,096, one status update per node).
const (
	snapNodes  = 10_000
	snapApps   = 100
	snapPerApp = 10_000
	snapNow    = int64(2_000_000_000) * 1e9
)

var (
	snapOnce  sync.Once
	snapState *State
	snapBytes []byte
	snapIndex uint64
)

// bigState builds the 1 M container state once, and its snapshot.
func bigState(b *testing.B) (*State, []byte) {
	snapOnce.Do(func() {
		f := New(nil)
		c := &snapBuilder{tb: b, f: f}
		c.build()
		snapState, snapIndex = f.State(), c.index
		var buf bytes.Buffer
		if err := writeSnapshot(&buf, snapState); err != nil {
			b.Fatal(err)
		}
		snapBytes = buf.Bytes()
		if path := os.Getenv("WEFT_BENCH_SNAPSHOT_WRITE"); path != "" {
			if err := os.WriteFile(path, snapBytes, 0o644); err != nil {
				b.Fatal(err)
			}
		}
	})
	if snapState == nil {
		b.Fatal("the benchmark state could not be built")
	}
	return snapState, snapBytes
}

// snapBuilder applies commands to an FSM as a leader would commit them.
type snapBuilder struct {
	tb    testing.TB
	f     *FSM
	index uint64
}

func (c *snapBuilder) apply(mt MessageType, body any) any {
	c.index++
	res := c.f.Apply(command(c.tb, c.index, mt, body))
	if err, ok := res.(error); ok {
		c.tb.Fatalf("command %d: %v", mt, err)
	}
	return res
}

func snapNode(i int) string { return fmt.Sprintf("n%05d", i) }

func (c *snapBuilder) build() {
	task := scheduler.Resources{MemoryMB: 1024, Vcores: 1}
	for i := 0; i < snapNodes; i++ {
		c.apply(NodeRegisterType, &NodeRegisterRequest{ID: snapNode(i), Address: snapNode(i) + ":8049",
			Capacity: scheduler.Resources{MemoryMB: 200 * 1024, Vcores: 200}})
	}
	apps := make([]string, snapApps)
	for a := range apps {
		spec := scheduler.AppSpec{User: "bench", AMResources: task,
			DShell: scheduler.DShell{NumContainers: snapPerApp, Command: []string{"true"}, Resources: task}}
		apps[a] = c.apply(AppSubmitType, &AppSubmitRequest{Spec: spec, Now: snapNow}).(string)
		c.apply(PlanApplyType, &PlanApplyRequest{Placements: []scheduler.Placement{{
			AppID: apps[a], Attempt: 1, NodeID: snapNode(a), Resources: task, IsAM: true}}, Now: snapNow})
		c.apply(AppRegisterType, &AppRegisterRequest{AppID: apps[a], Attempt: 1, Now: snapNow})
		c.apply(AskUpdateType, &AskUpdateRequest{AppID: apps[a], Attempt: 1,
			Asks: []scheduler.Ask{{AskID: 1, Count: snapPerApp, Resources: task, ExecutionType: scheduler.Guaranteed}}})
	}
	byNode := make([][]string, snapNodes)
	var plan []scheduler.Placement
	var nodeOf []int
	commit := func() {
		res := c.apply(PlanApplyType, &PlanApplyRequest{Placements: plan, Now: snapNow}).(*PlanResult)
		for i, id := range res.IDs {
			if id == "" {
				c.tb.Fatalf("placement refused: %v", res.Refused)
			}
			byNode[nodeOf[i]] = append(byNode[nodeOf[i]], id)
		}
		plan, nodeOf = plan[:0], nodeOf[:0]
	}
	k := 0
	for _, app := range apps {
		for i := 0; i < snapPerApp; i++ {
			plan = append(plan, scheduler.Placement{AppID: app, Attempt: 1, AskID: 1, NodeID: snapNode(k % snapNodes), Resources: task})
			nodeOf = append(nodeOf, k%snapNodes)
			k++
			if len(plan) == scheduler.DefaultMaxPlacements {
				commit()
			}
		}
	}
	if len(plan) > 0 {
		commit()
	}
	for n, ids := range byNode {
		ups := make([]ContainerStatus, len(ids))
		for j, id := range ids {
			ups[j] = ContainerStatus{ID: id, State: scheduler.ContainerRunning, At: snapNow}
		}
		c.apply(ContainerUpdateType, &ContainerUpdateRequest{NodeID: snapNode(n), Updates: ups})
	}
}

// cpuTime is the CPU time the process has used, its garbage collector's
// included: on a machine shared with other work it measures a benchmark
// better than the wall clock does.
func cpuTime(b *testing.B) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		b.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// reportCPU reports the CPU seconds per operation since start.
func reportCPU(b *testing.B, start time.Duration) {
	b.ReportMetric((cpuTime(b)-start).Seconds()/float64(b.N), "cpu-s/op")
}

// countingWriter counts what a snapshot would write to disk.
type countingWriter struct{ n int64 }

func (w *countingWriter) Write(p []byte) (int, error) { w.n += int64(len(p)); return len(p), nil }

// BenchmarkSnapshotPersist1M measures writing the snapshot of a state of
// 10,000 nodes and 1,000,000 containers (to a writer that only counts,
// so the figure is the encoder's, not the disk's).
func BenchmarkSnapshotPersist1M(b *testing.B) {
	st, _ := bigState(b)
	benchPersist(b, st)
}

// benchPersist measures writing st's snapshot b.N times to a writer that
// only counts: time, CPU and the snapshot's size.
func benchPersist(b *testing.B, st *State) {
	b.ReportAllocs()
	b.ResetTimer()
	var w countingWriter
	cpu := cpuTime(b)
	for i := 0; i < b.N; i++ {
		w.n = 0
		if err := writeSnapshot(&w, st); err != nil {
			b.Fatal(err)
		}
	}
	reportCPU(b, cpu)
	b.ReportMetric(float64(w.n)/(1<<20), "MB/snapshot")
}

// BenchmarkSnapshotRestore1M measures restoring that snapshot from memory:
// decoding every record and rebuilding the secondary indexes.
func BenchmarkSnapshotRestore1M(b *testing.B) {
	st, data := bigState(b)
	b.SetBytes(int64(len(data)))
	b.ReportAllocs()
	b.ResetTimer()
	cpu := cpuTime(b)
	for i := 0; i < b.N; i++ {
		f := New(nil)
		if err := f.Restore(io.NopCloser(bytes.NewReader(data))); err != nil {
			b.Fatal(err)
		}
		if got := f.State(); got.Index() != st.Index() || got.containers.Len() != snapApps*(snapPerApp+1) {
			b.Fatalf("restored index %d with %d containers", got.Index(), got.containers.Len())
		}
	}
	reportCPU(b, cpu)
}

// BenchmarkReplay measures what a restarting server spends per log entry
// it replays after its snapshot: the FSM applying the entries a busy
// cluster commits most, a plan of 4,096 placements over 1,000 nodes and a
// node's report that the containers a plan put on it (about 4) run. The
// state grows by a plan each round.
func BenchmarkReplay(b *testing.B) {
	build := func(b *testing.B) (*snapBuilder, []string) {
		c := &snapBuilder{tb: b, f: New(nil)}
		task := scheduler.Resources{MemoryMB: 1024, Vcores: 1}
		for i := 0; i < 1000; i++ {
			c.apply(NodeRegisterType, &NodeRegisterRequest{ID: snapNode(i), Address: snapNode(i) + ":8049",
				Capacity: scheduler.Resources{MemoryMB: 1 << 40, Vcores: 1 << 30}})
		}
		apps := make([]string, 100)
		for a := range apps {
			spec := scheduler.AppSpec{User: "bench", AMResources: task,
				DShell: scheduler.DShell{NumContainers: 1, Command: []string{"true"}, Resources: task}}
			apps[a] = c.apply(AppSubmitType, &AppSubmitRequest{Spec: spec, Now: snapNow}).(string)
			c.apply(PlanApplyType, &PlanApplyRequest{Placements: []scheduler.Placement{{
				AppID: apps[a], Attempt: 1, NodeID: snapNode(a), Resources: task, IsAM: true}}, Now: snapNow})
			c.apply(AppRegisterType, &AppRegisterRequest{AppID: apps[a], Attempt: 1, Now: snapNow})
		}
		return c, apps
	}
	task := scheduler.Resources{MemoryMB: 1024, Vcores: 1}
	plan := func(c *snapBuilder, apps []string, round int) (*raft.Log, []string) {
		for _, id := range apps {
			c.apply(AskUpdateType, &AskUpdateRequest{AppID: id, Attempt: 1, SeenIndex: c.index,
				Asks: []scheduler.Ask{{AskID: uint64(round + 1), Count: scheduler.DefaultMaxPlacements/len(apps) + 1, Resources: task, ExecutionType: scheduler.Guaranteed}}})
		}
		ps := make([]scheduler.Placement, scheduler.DefaultMaxPlacements)
		nodes := make([]string, len(ps))
		for j := range ps {
			nodes[j] = snapNode(j % 1000)
			ps[j] = scheduler.Placement{AppID: apps[j%len(apps)], Attempt: 1, AskID: uint64(round + 1), NodeID: nodes[j], Resources: task}
		}
		c.index++
		return command(b, c.index, PlanApplyType, &PlanApplyRequest{Placements: ps, Now: snapNow}), nodes
	}
	b.Run("plan-4096", func(b *testing.B) {
		c, apps := build(b)
		b.ReportAllocs()
		b.ResetTimer()
		for i := 0; i < b.N; i++ {
			b.StopTimer()
			l, _ := plan(c, apps, i)
			b.StartTimer()
			if res := c.f.Apply(l).(*PlanResult); len(res.Refused) != 0 {
				b.Fatalf("refused %v", res.Refused[:1])
			}
		}
		b.ReportMetric(float64(b.Elapsed().Microseconds())/float64(b.N), "µs/entry")
	})
	b.Run("container-update", func(b *testing.B) {
		c, apps := build(b)
		// Containers to report: a plan's worth per round, grouped by node
		// (at most 100 to a report).
		var pending [][]string
		refill := func(round int) {
			l, nodes := plan(c, apps, round)
			res := c.f.Apply(l).(*PlanResult)
			byNode := map[string][]string{}
			for j, id := range res.IDs {
				byNode[nodes[j]] = append(byNode[nodes[j]], id)
			}
			for _, ids := range byNode {
				for len(ids) > 0 {
					n := min(100, len(ids))
					pending = append(pending, ids[:n])
					ids = ids[n:]
				}
			}
		}
		b.ReportAllocs()
		b.ResetTimer()
		for i := 0; i < b.N; i++ {
			b.StopTimer()
			if len(pending) == 0 {
				refill(i)
			}
			ids := pending[0]
			pending = pending[1:]
			ct, _ := c.f.State().Container(ids[0])
			ups := make([]ContainerStatus, len(ids))
			for j, id := range ids {
				ups[j] = ContainerStatus{ID: id, State: scheduler.ContainerRunning, At: snapNow}
			}
			c.index++
			l := command(b, c.index, ContainerUpdateType, &ContainerUpdateRequest{NodeID: ct.NodeID, Updates: ups})
			b.StartTimer()
			if err, ok := c.f.Apply(l).(error); ok {
				b.Fatal(err)
			}
		}
		b.ReportMetric(float64(b.Elapsed().Microseconds())/float64(b.N), "µs/entry")
	})
}
