package server

import (
	"context"
	"fmt"
	"sort"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/weft-sched/weft/fsm"
	"github.com/weft-sched/weft/internal/testutil"
	wrpc "github.com/weft-sched/weft/rpc"
	"github.com/weft-sched/weft/scheduler"
)

// BenchmarkHeartbeatContainerChanges measures heartbeats that each report a
// container change, sent concurrently by 256 nodes to the leader of a
// three-server cluster on raft-boltdb (fsync): every heartbeat records one
// finished opportunistic container. It reports heartbeats/s, the Raft
// entries/s they took (with the plans'), the heartbeat latency, and the
// commit latency of empty plans proposed one after another meanwhile, as
// the scheduling loop proposes its plans.
func BenchmarkHeartbeatContainerChanges(b *testing.B) {
	c := benchCluster(b)
	l := c.leader()
	res, _, err := l.raftApply(context.Background(), fsm.AppSubmitType, &fsm.AppSubmitRequest{Spec: testSpec("bench")})
	if err != nil {
		b.Fatal(err)
	}
	app := res.(string)
	const nodes = 256
	ns := make([]*fakeNode, nodes)
	var wg sync.WaitGroup
	for w := 0; w < 8; w++ {
		wg.Add(1)
		go func(w int) {
			defer wg.Done()
			for i := w; i < nodes; i += 8 {
				ns[i] = registerFake(b, c, l, fmt.Sprintf("n%04d", i), scheduler.Resources{MemoryMB: 1 << 20, Vcores: 1 << 10})
			}
		}(w)
	}
	wg.Wait()
	if b.Failed() {
		return
	}
	testutil.WaitFor(b, 10*time.Second, func() bool { a, ok := l.State().App(app); return ok && !a.AMPending })
	minter := amNode(b, l, app, ns) // the AMRMProxy that allocates the app's containers
	var next atomic.Int64
	var mu sync.Mutex
	var lat []time.Duration
	// Meanwhile the scheduler's path: empty plans committed one after
	// another, timed, as the leader's scheduling loop commits its plans.
	stopPlans := make(chan struct{})
	plansDone := make(chan []time.Duration)
	go func() {
		var took []time.Duration
		for {
			select {
			case <-stopPlans:
				plansDone <- took
				return
			default:
			}
			start := time.Now()
			if _, _, err := l.raftApply(context.Background(), fsm.PlanApplyType, &fsm.PlanApplyRequest{}); err != nil {
				b.Error(err)
			}
			took = append(took, time.Since(start))
		}
	}()
	before := l.raft.AppliedIndex()
	b.ResetTimer()
	b.SetParallelism(nodes / 2) // 2 cores: one goroutine per node
	b.RunParallel(func(pb *testing.PB) {
		g := int(next.Add(1) - 1)
		n := ns[g%nodes]
		seq := 0
		var mine []time.Duration
		var minted []wrpc.ContainerReport // tokens signed a batch at a time, as an AMRMProxy signs them
		for pb.Next() {
			if len(minted) == 0 {
				minted = make([]wrpc.ContainerReport, 256)
				for i := range minted {
					seq++
					minted[i] = wrpc.ContainerReport{ID: fmt.Sprintf("o-%s-%d-%d", minter.id, g, seq), AppID: app, Attempt: 1, AskID: 1,
						Resources:     scheduler.Resources{MemoryMB: 64, Vcores: 1},
						ExecutionType: string(scheduler.Opportunistic), State: scheduler.ContainerCompleted, AllocatedAt: 1, At: 2}
				}
				minter.mint(b, n.id, minted)
			}
			req := &wrpc.HeartbeatRequest{NodeID: n.id, Epoch: n.epoch, Secret: n.secret, Containers: minted[:1]}
			minted = minted[1:]
			var hb wrpc.HeartbeatResponse
			start := time.Now()
			if err := c.call(l, "Node.Heartbeat", req, &hb); err != nil {
				b.Error(err)
				return
			}
			mine = append(mine, time.Since(start))
		}
		mu.Lock()
		lat = append(lat, mine...)
		mu.Unlock()
	})
	b.StopTimer()
	entries := l.raft.AppliedIndex() - before
	close(stopPlans)
	plans := <-plansDone
	sort.Slice(plans, func(i, j int) bool { return plans[i] < plans[j] })
	if len(plans) > 0 {
		b.ReportMetric(float64(plans[len(plans)/2].Microseconds()), "plan-p50-µs")
		b.ReportMetric(float64(plans[len(plans)*99/100].Microseconds()), "plan-p99-µs")
	}
	secs := b.Elapsed().Seconds()
	sort.Slice(lat, func(i, j int) bool { return lat[i] < lat[j] })
	if len(lat) > 0 {
		b.ReportMetric(float64(lat[len(lat)/2].Microseconds()), "p50-µs")
		b.ReportMetric(float64(lat[len(lat)*99/100].Microseconds()), "p99-µs")
	}
	b.ReportMetric(float64(len(lat))/secs, "heartbeats/s")
	b.ReportMetric(float64(entries)/secs, "entries/s")
}
