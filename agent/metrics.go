package agent

import "github.com/weft-sched/weft/internal/metrics"

// metricsSample is what this agent reports to a scrape (internal/metrics):
// its opportunistic queue and running containers, as its heartbeat does.
func (a *Agent) metricsSample() metrics.AgentSample {
	l := a.mgr.load()
	return metrics.AgentSample{Queued: l.Queued, QueueCapacity: l.QueueCapacity,
		RunningGuaranteed: l.RunningGuaranteed, RunningOpportunistic: l.RunningOpportunistic}
}
