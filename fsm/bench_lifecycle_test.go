package fsm

import (
	"fmt"
	"testing"
	"time"

	"github.com/weft-sched/weft/scheduler"
)

// BenchmarkContainerLifecycle measures what one server's FSM spends on a
// guaranteed container's whole life as the leader commits it: placed by a
// plan of 4,096, reported RUNNING and then COMPLETED by its node's
// heartbeats, batched as the leader batches them (one update per node).
// Every server of a quorum applies all three, so a quorum's committed
// container rate can never pass (cores ÷ servers) ÷ this cost.
// cpu-ns/container is the process's CPU time over the same spans (the
// garbage collector's included): steadier than the wall time on a
// machine that is busy with other work.
func BenchmarkContainerLifecycle(b *testing.B) {
	const nodes = 1000
	h, apps := newBenchFSM(b, nodes, 100)
	f, next := h.f, h.next
	size := scheduler.Resources{MemoryMB: 256, Vcores: 1}
	const perPlan = 4096
	// byNode groups a plan's containers into one update per node, as
	// heartbeats arrive.
	byNode := func(ps []scheduler.Placement, ids []string, state scheduler.ContainerState, at int64) *ContainerUpdateBatchRequest {
		per := map[string]int{}
		req := &ContainerUpdateBatchRequest{}
		for j, p := range ps {
			k, ok := per[p.NodeID]
			if !ok {
				k = len(req.Updates)
				per[p.NodeID] = k
				req.Updates = append(req.Updates, ContainerUpdateRequest{NodeID: p.NodeID})
			}
			u := &req.Updates[k]
			u.Updates = append(u.Updates, ContainerStatus{ID: ids[j], State: state, At: at, StartedAt: at})
		}
		return req
	}
	var phase [3]float64
	var cpu time.Duration
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
			ps[j] = scheduler.Placement{AppID: apps[j%len(apps)], Attempt: 1, AskID: uint64(i + 1), NodeID: fmt.Sprintf("n%04d", j%nodes), Resources: size}
		}
		plan := command(b, h.idx+1, PlanApplyType, &PlanApplyRequest{Placements: ps})
		b.StartTimer()
		c0 := cpuTime(b)
		t0 := b.Elapsed()
		h.idx++
		res := f.Apply(plan).(*PlanResult)
		phase[0] += float64(b.Elapsed() - t0)
		cpu += cpuTime(b) - c0
		b.StopTimer()
		if len(res.Refused) != 0 {
			b.Fatalf("refused %v", res.Refused[:1])
		}
		running := command(b, h.idx+1, ContainerUpdateBatchType, byNode(ps, res.IDs, scheduler.ContainerRunning, int64(i+1)))
		completed := command(b, h.idx+2, ContainerUpdateBatchType, byNode(ps, res.IDs, scheduler.ContainerCompleted, int64(i+2)))
		b.StartTimer()
		c1 := cpuTime(b)
		t1 := b.Elapsed()
		h.idx++
		if r, ok := f.Apply(running).(*ContainerUpdateBatchResult); !ok || firstErr(r.Errors) != nil {
			b.Fatalf("running: %v", f.Apply(running))
		}
		t2 := b.Elapsed()
		h.idx++
		f.Apply(completed)
		phase[1] += float64(t2 - t1)
		phase[2] += float64(b.Elapsed() - t2)
		cpu += cpuTime(b) - c1
		b.StopTimer()
		c, _ := f.State().Container(res.IDs[perPlan-1])
		if c == nil || c.State != scheduler.ContainerCompleted {
			b.Fatalf("container %s after its life: %+v", res.IDs[perPlan-1], c)
		}
		b.StartTimer()
	}
	n := float64(b.N * perPlan)
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/n, "ns/container")
	b.ReportMetric(float64(cpu.Nanoseconds())/n, "cpu-ns/container")
	b.ReportMetric(phase[0]/n, "ns/placed")
	b.ReportMetric(phase[1]/n, "ns/running")
	b.ReportMetric(phase[2]/n, "ns/completed")
}

func firstErr(errs []error) error {
	for _, e := range errs {
		if e != nil {
			return e
		}
	}
	return nil
}
