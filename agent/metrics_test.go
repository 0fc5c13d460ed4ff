package agent

import (
	"context"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	"github.com/weft-sched/weft/internal/metrics"
	"github.com/weft-sched/weft/internal/testutil"
	"github.com/weft-sched/weft/rpc"
	"github.com/weft-sched/weft/scheduler"
)

// scrapeMetrics reads metrics.Handler as Prometheus does and parses it.
func scrapeMetrics(t *testing.T) map[string]*dto.MetricFamily {
	t.Helper()
	rec := httptest.NewRecorder()
	metrics.Handler().ServeHTTP(rec, httptest.NewRequest("GET", "/v1/metrics", nil))
	if rec.Code != 200 {
		t.Fatalf("scrape answered %d: %s", rec.Code, rec.Body)
	}
	parser := expfmt.NewTextParser(model.LegacyValidation)
	families, err := parser.TextToMetricFamilies(rec.Body)
	if err != nil {
		t.Fatalf("scrape does not parse as the Prometheus text format: %v", err)
	}
	return families
}

// sample returns the value of family name's sample whose labels include
// labels (for a histogram or summary, its count), and whether there is one.
func sample(families map[string]*dto.MetricFamily, name string, labels ...string) (float64, bool) {
	f := families[name]
	if f == nil {
		return 0, false
	}
next:
	for _, m := range f.GetMetric() {
		have := map[string]string{}
		for _, l := range m.GetLabel() {
			have[l.GetName()] = l.GetValue()
		}
		for i := 0; i+1 < len(labels); i += 2 {
			if have[labels[i]] != labels[i+1] {
				continue next
			}
		}
		switch {
		case m.Counter != nil:
			return m.GetCounter().GetValue(), true
		case m.Gauge != nil:
			return m.GetGauge().GetValue(), true
		case m.Histogram != nil:
			return float64(m.GetHistogram().GetSampleCount()), true
		case m.Summary != nil:
			return float64(m.GetSummary().GetSampleCount()), true
		case m.Untyped != nil:
			return m.GetUntyped().GetValue(), true
		}
	}
	return 0, false
}

func TestMetricsMoveWhenAnAppRuns(t *testing.T) {
	if err := metrics.Init(); err != nil { // before Raft and serf start: they emit from their first moment
		t.Fatal(err)
	}
	_, _, c := cluster(t, 2)
	before := scrapeMetrics(t)

	var sub rpc.AppSubmitResponse
	spec := scheduler.AppSpec{User: "test", DShell: scheduler.DShell{NumContainers: 2, Command: []string{"true"}}}
	if err := c.Call(context.Background(), "App.Submit", &rpc.AppSubmitRequest{Spec: spec}, &sub); err != nil {
		t.Fatal(err)
	}
	if app := waitApp(t, c, sub.AppID); app.State != "FINISHED" {
		t.Fatalf("app ended %+v", app)
	}
	after := scrapeMetrics(t)

	// Event series moved by what the app did.
	for _, m := range []struct {
		name    string
		labels  []string
		atLeast float64 // how much it must have moved
	}{
		{"weft_scheduler_placements_total", nil, 3}, // the AM and two tasks
		{"weft_scheduler_pass_seconds", nil, 1},
		{"weft_scheduler_plan_apply_seconds", nil, 1},
		{"weft_rpc_requests_total", []string{"method", "App.Submit", "code", "ok"}, 1},
		{"weft_rpc_request_seconds", []string{"method", "App.Submit"}, 1},
		{"weft_rpc_requests_total", []string{"method", "AM.Allocate", "code", "ok"}, 1},
		{"weft_fsm_apply_seconds", []string{"command", "app_submit"}, 1},
		{"weft_fsm_apply_seconds", []string{"command", "plan_apply"}, 1},
		{"weft_amrmproxy_allocate_seconds", []string{"served", "servers"}, 1},
		{"weft_raft_commitTime", nil, 1}, // Raft's own, through the go-metrics sink
	} {
		was, _ := sample(before, m.name, m.labels...)
		now, ok := sample(after, m.name, m.labels...)
		if !ok || now-was < m.atLeast {
			t.Errorf("%s%v went from %g to %g (present %v), want a rise of at least %g", m.name, m.labels, was, now, ok, m.atLeast)
		}
	}

	// Raft's, serf's and memberlist's own series are there.
	for _, prefix := range []string{"weft_raft_", "weft_serf_", "weft_memberlist_"} {
		found := false
		for name := range after {
			found = found || strings.HasPrefix(name, prefix)
		}
		if !found {
			t.Errorf("no series named %s*: the go-metrics sink does not carry them", prefix)
		}
	}

	// State series, computed from the leader's state at scrape time.
	for _, g := range []struct {
		name   string
		labels []string
		want   float64
	}{
		{"weft_server_leader", nil, 1},
		{"weft_nodes", []string{"state", "READY"}, 2},
		{"weft_nodes", []string{"state", "DOWN"}, 0},
		{"weft_queue_running_apps", []string{"queue", "root.default"}, 0}, // the app finished
		{"weft_queue_steady_fair_share", []string{"queue", "root.default", "resource", "memory_mb"}, 4096},
		{"weft_queue_used", []string{"queue", "root.default", "resource", "vcores"}, 0},
		{"weft_agent_opportunistic_queue_capacity", nil, 2 * DefaultOpportunisticQueueLength},
		{"weft_agent_opportunistic_queued", nil, 0},
	} {
		// The finished app's containers are given back by the agents'
		// next reports: wait for the state to settle.
		var got float64
		var ok bool
		if !testutil.Eventually(10*time.Second, func() bool {
			got, ok = sample(scrapeMetrics(t), g.name, g.labels...)
			return ok && got == g.want
		}) {
			t.Errorf("%s%v = %g (present %v), want %g", g.name, g.labels, got, ok, g.want)
		}
	}
	for _, name := range []string{"weft_queue_pending", "weft_queue_instantaneous_fair_share"} {
		if _, ok := sample(after, name, "queue", "root.default", "resource", "memory_mb"); !ok {
			t.Errorf("no %s for root.default", name)
		}
	}
}
