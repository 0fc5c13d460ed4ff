package metrics

import (
	"net/http/httptest"
	"strings"
	"testing"

	gometrics "github.com/hashicorp/go-metrics/compat"
	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
)

// scrape fetches Handler's answer and parses it as the Prometheus text
// format, failing the test if it is not.
func scrape(t *testing.T) map[string]*dto.MetricFamily {
	t.Helper()
	rec := httptest.NewRecorder()
	Handler().ServeHTTP(rec, httptest.NewRequest("GET", "/v1/metrics", nil))
	if rec.Code != 200 {
		t.Fatalf("scrape answered %d: %s", rec.Code, rec.Body)
	}
	if ct := rec.Header().Get("Content-Type"); !strings.HasPrefix(ct, "text/plain") {
		t.Fatalf("scrape content type %q, want the text format", ct)
	}
	p := expfmt.NewTextParser(model.LegacyValidation)
	families, err := p.TextToMetricFamilies(rec.Body)
	if err != nil {
		t.Fatalf("scrape does not parse: %v", err)
	}
	return families
}

// value returns the value of the sample of family name whose labels
// include want (a histogram's sample count), and whether there is one.
func value(families map[string]*dto.MetricFamily, name string, want map[string]string) (float64, bool) {
	f := families[name]
	if f == nil {
		return 0, false
	}
	for _, m := range f.GetMetric() {
		if !hasLabels(m, want) {
			continue
		}
		switch f.GetType() {
		case dto.MetricType_COUNTER:
			return m.GetCounter().GetValue(), true
		case dto.MetricType_GAUGE:
			return m.GetGauge().GetValue(), true
		case dto.MetricType_HISTOGRAM:
			return float64(m.GetHistogram().GetSampleCount()), true
		case dto.MetricType_SUMMARY:
			return float64(m.GetSummary().GetSampleCount()), true
		case dto.MetricType_UNTYPED:
			return m.GetUntyped().GetValue(), true
		}
	}
	return 0, false
}

func hasLabels(m *dto.Metric, want map[string]string) bool {
	have := map[string]string{}
	for _, l := range m.GetLabel() {
		have[l.GetName()] = l.GetValue()
	}
	for k, v := range want {
		if have[k] != v {
			return false
		}
	}
	return true
}

func TestEventSeriesMoveAndParse(t *testing.T) {
	before := scrape(t)
	count := func(families map[string]*dto.MetricFamily, name string, labels map[string]string) float64 {
		v, _ := value(families, name, labels)
		return v
	}
	SchedulingPass(Start())
	PlanCommitted(Start(), 3, 1)
	Preempted(PreemptMinShare, 2)
	RPC("App.Submit", "ok", Start())
	RPC("App.Submit", "bad_request", Start())
	FSMApply("plan_apply")()
	AMRMProxyAllocate(Start(), ServedLocal)
	after := scrape(t)

	for _, c := range []struct {
		name   string
		labels map[string]string
		delta  float64
	}{
		{"weft_scheduler_pass_seconds", nil, 1},
		{"weft_scheduler_plan_apply_seconds", nil, 1},
		{"weft_scheduler_placements_total", nil, 3},
		{"weft_scheduler_placements_refused_total", nil, 1},
		{"weft_preemptions_total", map[string]string{"reason": "min_share"}, 2},
		{"weft_rpc_requests_total", map[string]string{"method": "App.Submit", "code": "ok"}, 1},
		{"weft_rpc_requests_total", map[string]string{"method": "App.Submit", "code": "bad_request"}, 1},
		{"weft_rpc_request_seconds", map[string]string{"method": "App.Submit"}, 2},
		{"weft_fsm_apply_seconds", map[string]string{"command": "plan_apply"}, 1},
		{"weft_amrmproxy_allocate_seconds", map[string]string{"served": "local"}, 1},
	} {
		if d := count(after, c.name, c.labels) - count(before, c.name, c.labels); d != c.delta {
			t.Errorf("%s%v moved by %g, want %g", c.name, c.labels, d, c.delta)
		}
	}
	if after["weft_scheduler_pass_seconds"].GetType() != dto.MetricType_HISTOGRAM {
		t.Errorf("weft_scheduler_pass_seconds is a %v, want a histogram", after["weft_scheduler_pass_seconds"].GetType())
	}
	if _, ok := value(after, "go_goroutines", nil); !ok {
		t.Error("no go_goroutines: the Go collector is not registered")
	}
}

func TestInitCarriesGoMetricsIntoTheRegistry(t *testing.T) {
	if err := Init(); err != nil {
		t.Fatal(err)
	}
	if err := Init(); err != nil { // a second server or agent of the process
		t.Fatalf("second Init: %v", err)
	}
	// What Raft and serf do: write to the go-metrics global.
	gometrics.IncrCounter([]string{"metrics_test", "commits"}, 2)
	gometrics.SetGauge([]string{"metrics_test", "peers"}, 3)
	families := scrape(t)
	if v, ok := value(families, "weft_metrics_test_commits", nil); !ok || v < 2 {
		t.Errorf("go-metrics counter: weft_metrics_test_commits = %g (present %v), want at least 2", v, ok)
	}
	if v, ok := value(families, "weft_metrics_test_peers", nil); !ok || v != 3 {
		t.Errorf("go-metrics gauge: weft_metrics_test_peers = %g (present %v), want 3", v, ok)
	}
}

func TestStateSeriesComeFromTheLeadingServer(t *testing.T) {
	follower := RegisterServer(func() (ServerSample, bool) { return ServerSample{}, false })
	defer follower()
	lead := RegisterServer(func() (ServerSample, bool) {
		return ServerSample{
			Queues: []QueueSample{{
				Queue: "root.a", RunningApps: 2,
				Used: map[string]int64{"memory_mb": 1024, "vcores": 1}, Pending: map[string]int64{"memory_mb": 512, "vcores": 1},
				SteadyFairShare: map[string]int64{"memory_mb": 4096, "vcores": 4}, InstantaneousFairShare: map[string]int64{"memory_mb": 8192, "vcores": 8},
			}, {Queue: "root.a", RunningApps: 9}}, // a duplicate is dropped, not a failed scrape
			Nodes: map[string]int{"READY": 3, "DOWN": 0},
		}, true
	})
	second := RegisterServer(func() (ServerSample, bool) {
		return ServerSample{Queues: []QueueSample{{Queue: "root.a", RunningApps: 7}}}, true
	})
	defer second()
	agents := []func(){
		RegisterAgent(func() AgentSample { return AgentSample{Queued: 2, QueueCapacity: 10, RunningOpportunistic: 1} }),
		RegisterAgent(func() AgentSample { return AgentSample{Queued: 1, QueueCapacity: 10, RunningGuaranteed: 4} }),
	}

	families := scrape(t)
	for _, c := range []struct {
		name   string
		labels map[string]string
		want   float64
	}{
		{"weft_server_leader", nil, 1},
		{"weft_queue_running_apps", map[string]string{"queue": "root.a"}, 2},
		{"weft_queue_used", map[string]string{"queue": "root.a", "resource": "memory_mb"}, 1024},
		{"weft_queue_pending", map[string]string{"queue": "root.a", "resource": "vcores"}, 1},
		{"weft_queue_steady_fair_share", map[string]string{"queue": "root.a", "resource": "memory_mb"}, 4096},
		{"weft_queue_instantaneous_fair_share", map[string]string{"queue": "root.a", "resource": "vcores"}, 8},
		{"weft_nodes", map[string]string{"state": "READY"}, 3},
		{"weft_nodes", map[string]string{"state": "DOWN"}, 0},
		{"weft_agent_opportunistic_queued", nil, 3},
		{"weft_agent_opportunistic_queue_capacity", nil, 20},
		{"weft_agent_containers_running", map[string]string{"execution_type": "guaranteed"}, 4},
		{"weft_agent_containers_running", map[string]string{"execution_type": "opportunistic"}, 1},
	} {
		if v, ok := value(families, c.name, c.labels); !ok || v != c.want {
			t.Errorf("%s%v = %g (present %v), want %g", c.name, c.labels, v, ok, c.want)
		}
	}

	// Without a leader, no cluster-wide series; without agents, no agent series.
	lead()
	second()
	for _, unregister := range agents {
		unregister()
	}
	families = scrape(t)
	if v, ok := value(families, "weft_server_leader", nil); !ok || v != 0 {
		t.Errorf("weft_server_leader = %g (present %v) with no leader, want 0", v, ok)
	}
	for _, name := range []string{"weft_queue_running_apps", "weft_nodes", "weft_agent_opportunistic_queued"} {
		if _, ok := families[name]; ok {
			t.Errorf("%s reported with no source for it", name)
		}
	}
	follower()
	lead() // unregistering twice does nothing
	if _, ok := scrape(t)["weft_server_leader"]; ok {
		t.Error("weft_server_leader reported in a process without servers")
	}
}

func TestSnapshotLogGauges(t *testing.T) {
	SnapshotLog(1234, 5678)
	families := scrape(t)
	for name, want := range map[string]float64{"weft_snapshot_log_bytes": 1234, "weft_snapshot_size_bytes": 5678} {
		if v, ok := value(families, name, nil); !ok || v != want {
			t.Errorf("%s = %g (present %v), want %g", name, v, ok, want)
		}
	}
}
