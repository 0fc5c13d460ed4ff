package metrics

import (
	"sort"
	"sync"

	"github.com/prometheus/client_golang/prometheus"
)

// QueueSample is one queue as the leader's state has it.
type QueueSample struct {
	Queue       string // full path, root.a.b
	RunningApps int
	// Each maps a resource name (memory_mb, vcores or an extended
	// resource of the cluster) to an amount of it.
	Used, Pending, SteadyFairShare, InstantaneousFairShare map[string]int64
}

// ServerSample is what a server reports at scrape time.
type ServerSample struct {
	Queues []QueueSample
	// Nodes counts the nodes in each state (READY, DRAINING, DOWN); a state
	// present with 0 is reported as 0.
	Nodes map[string]int
}

// AgentSample is what an agent reports at scrape time.
type AgentSample struct {
	// Queued counts the opportunistic containers waiting in the node's
	// queue; QueueCapacity is the most it queues.
	Queued, QueueCapacity                   int
	RunningGuaranteed, RunningOpportunistic int
}

// RegisterServer makes sample part of every scrape until unregister is
// called. sample returns ok=false when its server does not lead: only a
// leader reports cluster-wide series, so that summing them over servers
// counts each queue and node once. When several servers of one process
// lead at once (in-process tests, briefly), the first registered reports.
// sample must be cheap (O(queues + nodes)) and safe to call concurrently.
func RegisterServer(sample func() (s ServerSample, ok bool)) (unregister func()) {
	return state.add(&source{server: sample})
}

// RegisterAgent makes sample part of every scrape until unregister is
// called. The samples of several agents of one process (weft dev) are
// summed. sample must be cheap and safe to call concurrently.
func RegisterAgent(sample func() AgentSample) (unregister func()) {
	return state.add(&source{agent: sample})
}

type source struct {
	server func() (ServerSample, bool)
	agent  func() AgentSample
}

// stateCollector computes the state series from the registered sources
// at each scrape.
type stateCollector struct {
	mu      sync.Mutex
	sources []*source // in registration order
}

var state = &stateCollector{}

func (c *stateCollector) add(s *source) func() {
	c.mu.Lock()
	c.sources = append(c.sources, s)
	c.mu.Unlock()
	var once sync.Once
	return func() {
		once.Do(func() {
			c.mu.Lock()
			defer c.mu.Unlock()
			for i, have := range c.sources {
				if have == s {
					c.sources = append(c.sources[:i:i], c.sources[i+1:]...)
					return
				}
			}
		})
	}
}

func desc(name, help string, labels ...string) *prometheus.Desc {
	return prometheus.NewDesc(prometheus.BuildFQName(Namespace, "", name), help, labels, nil)
}

var (
	leaderDesc = desc("server_leader",
		"1 if a server of this process is the Raft leader (and has applied its barrier), else 0; absent on agents.")
	runningAppsDesc = desc("queue_running_apps", "Running apps of each queue (a parent counts its children's).", "queue")
	usedDesc        = desc("queue_used", "Resources allocated to each queue's guaranteed containers.", "queue", "resource")
	pendingDesc     = desc("queue_pending", "Resources each queue's apps ask for and do not hold yet.", "queue", "resource")
	steadyDesc      = desc("queue_steady_fair_share",
		"Each queue's steady fair share: its share of the cluster by weight, whether or not it has demand.", "queue", "resource")
	instantDesc = desc("queue_instantaneous_fair_share",
		"Each queue's instantaneous fair share: its share among the queues with demand now.", "queue", "resource")
	nodesDesc        = desc("nodes", "Nodes the cluster knows, by state.", "state")
	queuedDesc       = desc("agent_opportunistic_queued", "Opportunistic containers waiting in this process's agents' queues.")
	queueCapDesc     = desc("agent_opportunistic_queue_capacity", "The most opportunistic containers this process's agents queue.")
	agentRunningDesc = desc("agent_containers_running", "Containers running on this process's agents, by execution type.", "execution_type")
)

// Describe sends every state series' descriptor.
func (c *stateCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{leaderDesc, runningAppsDesc, usedDesc, pendingDesc, steadyDesc, instantDesc,
		nodesDesc, queuedDesc, queueCapDesc, agentRunningDesc} {
		ch <- d
	}
}

// Collect asks each source for its sample (outside the lock: a sample
// may take a while) and sends the state series.
func (c *stateCollector) Collect(ch chan<- prometheus.Metric) {
	c.mu.Lock()
	sources := append([]*source(nil), c.sources...)
	c.mu.Unlock()
	var (
		servers, agents int
		lead            *ServerSample
		sum             AgentSample
	)
	for _, s := range sources {
		switch {
		case s.server != nil:
			servers++
			if lead != nil {
				continue
			}
			if sample, ok := s.server(); ok {
				lead = &sample
			}
		case s.agent != nil:
			agents++
			a := s.agent()
			sum.Queued += a.Queued
			sum.QueueCapacity += a.QueueCapacity
			sum.RunningGuaranteed += a.RunningGuaranteed
			sum.RunningOpportunistic += a.RunningOpportunistic
		}
	}
	if servers > 0 {
		ch <- gauge(leaderDesc, boolValue(lead != nil))
	}
	if lead != nil {
		collectServer(ch, lead)
	}
	if agents > 0 {
		ch <- gauge(queuedDesc, float64(sum.Queued))
		ch <- gauge(queueCapDesc, float64(sum.QueueCapacity))
		ch <- gauge(agentRunningDesc, float64(sum.RunningGuaranteed), "guaranteed")
		ch <- gauge(agentRunningDesc, float64(sum.RunningOpportunistic), "opportunistic")
	}
}

func collectServer(ch chan<- prometheus.Metric, s *ServerSample) {
	seen := map[string]bool{} // a queue reported twice would fail the whole scrape
	for _, q := range s.Queues {
		if seen[q.Queue] {
			continue
		}
		seen[q.Queue] = true
		ch <- gauge(runningAppsDesc, float64(q.RunningApps), q.Queue)
		for _, r := range []struct {
			d   *prometheus.Desc
			res map[string]int64
		}{{usedDesc, q.Used}, {pendingDesc, q.Pending}, {steadyDesc, q.SteadyFairShare}, {instantDesc, q.InstantaneousFairShare}} {
			for _, name := range sortedKeys(r.res) {
				ch <- gauge(r.d, float64(r.res[name]), q.Queue, name)
			}
		}
	}
	for _, st := range sortedKeys(s.Nodes) {
		ch <- gauge(nodesDesc, float64(s.Nodes[st]), st)
	}
}

func gauge(d *prometheus.Desc, v float64, labels ...string) prometheus.Metric {
	return prometheus.MustNewConstMetric(d, prometheus.GaugeValue, v, labels...)
}

func boolValue(b bool) float64 {
	if b {
		return 1
	}
	return 0
}

func sortedKeys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}
