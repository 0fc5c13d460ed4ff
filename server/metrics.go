package server

import (
	"strings"

	"github.com/weft-sched/weft/fsm"
	"github.com/weft-sched/weft/internal/metrics"
	"github.com/weft-sched/weft/scheduler"
)

// metricsSample is what this server reports to a scrape (internal/metrics):
// the queues and nodes of its state, while it leads and has applied its
// barrier. It costs one fair-share computation, as Queue.List does:
// O(queues + active apps), plus O(nodes) to count them by state.
func (s *Server) metricsSample() (metrics.ServerSample, bool) {
	if !s.IsLeader() || !s.leaderReady.Load() {
		return metrics.ServerSample{}, false
	}
	return serverSample(s.fsm.State()), true
}

// serverSample computes the per-queue and per-node-state series of st.
func serverSample(st *fsm.State) metrics.ServerSample {
	stats := scheduler.QueueStats(st)
	out := metrics.ServerSample{Nodes: map[string]int{}}
	for _, status := range []scheduler.NodeStatus{scheduler.NodeReady, scheduler.NodeDraining, scheduler.NodeDown} {
		out.Nodes[string(status)] = 0
	}
	for _, n := range st.Nodes() {
		out.Nodes[string(n.Status)]++
	}
	for _, q := range st.Queues() {
		stat := stats[q.Path]
		out.Queues = append(out.Queues, metrics.QueueSample{
			Queue: q.Path, RunningApps: stat.RunningApps,
			Used: resourceMap(stat.Used), Pending: resourceMap(stat.Pending),
			SteadyFairShare: resourceMap(stat.SteadyFairShare), InstantaneousFairShare: resourceMap(stat.InstantaneousFairShare),
		})
	}
	return out
}

// resourceMap names each amount of r by its resource.
func resourceMap(r scheduler.Resources) map[string]int64 {
	out := map[string]int64{scheduler.ResourceMemoryMB: r.MemoryMB, scheduler.ResourceVcores: r.Vcores}
	for name, v := range r.Extended {
		out[name] = v
	}
	return out
}

// countPreemptions records committed preemption marks by why their taker
// starved.
func countPreemptions(plan []scheduler.Preemption) {
	by := map[metrics.PreemptionReason]int{}
	for _, p := range plan {
		by[preemptionReason(p.Reason)]++
	}
	for reason, n := range by {
		metrics.Preempted(reason, n)
	}
}

// preemptionReason reduces a preemption's explanation (free text, from
// scheduler.PlanPreemption) to its kind.
func preemptionReason(why string) metrics.PreemptionReason {
	switch {
	case strings.HasPrefix(why, "fair-share starvation"):
		return metrics.PreemptFairShare
	case strings.HasPrefix(why, "min-share starvation"):
		return metrics.PreemptMinShare
	}
	return metrics.PreemptOther
}
