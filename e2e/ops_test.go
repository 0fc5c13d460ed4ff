package e2e

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
)

// The operator's side of weft (SPEC §16 metrics, §20 operations), tried
// against real processes: what Prometheus scrapes, a drain, garbage
// collection, a queue dry run and the list filters.

// scrape GETs a /v1/metrics page with token ("" for none) and parses it
// as Prometheus does.
func scrape(t *testing.T, c *http.Client, url, token string) map[string]*dto.MetricFamily {
	t.Helper()
	code, _, body := httpGet(t, c, url, token)
	if code != http.StatusOK {
		t.Fatalf("GET %s (token given: %v): %d %s", url, token != "", code, body)
	}
	p := expfmt.NewTextParser(model.LegacyValidation)
	fams, err := p.TextToMetricFamilies(bytes.NewReader(body))
	if err != nil {
		t.Fatalf("parse %s: %v", url, err)
	}
	return fams
}

// series sums the samples of family name whose labels include want: a
// counter's or gauge's value, a histogram's or summary's count. ok is
// false when no sample matches.
func series(fams map[string]*dto.MetricFamily, name string, want map[string]string) (sum float64, ok bool) {
	f := fams[name]
	if f == nil {
		return 0, false
	}
samples:
	for _, m := range f.Metric {
		have := map[string]string{}
		for _, l := range m.Label {
			have[l.GetName()] = l.GetValue()
		}
		for k, v := range want {
			if have[k] != v {
				continue samples
			}
		}
		ok = true
		switch {
		case m.Counter != nil:
			sum += m.Counter.GetValue()
		case m.Gauge != nil:
			sum += m.Gauge.GetValue()
		case m.Histogram != nil:
			sum += float64(m.Histogram.GetSampleCount())
		case m.Summary != nil:
			sum += float64(m.Summary.GetSampleCount())
		case m.Untyped != nil:
			sum += m.Untyped.GetValue()
		}
	}
	return sum, ok
}

// withPrefix says whether some family's name starts with prefix.
func withPrefix(fams map[string]*dto.MetricFamily, prefix string) bool {
	for name := range fams {
		if strings.HasPrefix(name, prefix) {
			return true
		}
	}
	return false
}

// metricCheck is one series a scrape must have: present (min < 0), or
// at least min, or exactly eq when eq is set.
type metricCheck struct {
	name   string
	labels map[string]string
	min    float64
	eq     *float64
}

func checkMetrics(t *testing.T, who string, fams map[string]*dto.MetricFamily, checks []metricCheck) {
	t.Helper()
	for _, c := range checks {
		v, ok := series(fams, c.name, c.labels)
		switch {
		case !ok:
			t.Errorf("%s: no series %s %v", who, c.name, c.labels)
		case c.eq != nil && v != *c.eq:
			t.Errorf("%s: %s %v = %v, want %v", who, c.name, c.labels, v, *c.eq)
		case c.eq == nil && v < c.min:
			t.Errorf("%s: %s %v = %v, want at least %v", who, c.name, c.labels, v, c.min)
		}
	}
}

func exactly(v float64) *float64 { return &v }

// After an app ran on a secure cluster of two agents, the leader's and the
// AM's agent's /v1/metrics parse and the SPEC §16 series are there and
// moved; a server's /v1/metrics asks a token as the API does, an agent's
// is public.
func TestMetricsMoveWhenAnAppRuns(t *testing.T) {
	w := startWorldOn(t, startQuorum(t), 2, nil)
	id := w.submit("-num-containers", "2", "-memory-mb", "64", "--", "true")
	if a := w.waitApp(id, 60*time.Second); a.State != "FINISHED" {
		t.Fatalf("app %+v", a)
	}
	var amNode string
	for _, c := range w.containers(id) {
		if c.IsAM {
			amNode = c.NodeID
		}
	}
	leader := w.waitForLeader("s1", 10*time.Second, "")
	srv := httpsClient(t, w.sec, "server")
	base := httpURL(t, w.procs[leader])

	if code, _, body := httpGet(t, srv, base+"/v1/status", ""); code != http.StatusForbidden {
		t.Errorf("GET /v1/status without a token: %d %s; want 403", code, body)
	}
	if code, _, body := httpGet(t, srv, base+"/v1/status", os.Getenv("WEFT_TOKEN")); code != http.StatusOK {
		t.Errorf("GET /v1/status with the token: %d %s", code, body)
	}

	if code, _, body := httpGet(t, srv, base+"/v1/metrics", ""); code != http.StatusForbidden {
		t.Errorf("GET /v1/metrics on a server without a token: %d %s; want 403", code, body)
	}
	fams := scrape(t, srv, base+"/v1/metrics", os.Getenv("WEFT_TOKEN"))
	q := map[string]string{"queue": "root.default"}
	checkMetrics(t, "leader "+leader, fams, []metricCheck{
		{name: "weft_server_leader", eq: exactly(1)},
		{name: "weft_scheduler_pass_seconds", min: 1},
		{name: "weft_scheduler_placements_total", min: 1},
		{name: "weft_scheduler_plan_apply_seconds", min: 1},
		{name: "weft_rpc_requests_total", labels: map[string]string{"method": "App.Submit", "code": "ok"}, min: 1},
		{name: "weft_rpc_request_seconds", labels: map[string]string{"method": "App.Submit"}, min: 1},
		{name: "weft_fsm_apply_seconds", labels: map[string]string{"command": "app_submit"}, min: 1},
		{name: "weft_fsm_apply_seconds", labels: map[string]string{"command": "plan_apply"}, min: 1},
		{name: "weft_raft_commitTime", min: 1},
		{name: "weft_raft_state_leader", min: 1},
		{name: "weft_nodes", labels: map[string]string{"state": "READY"}, eq: exactly(2)},
		{name: "weft_nodes", labels: map[string]string{"state": "DOWN"}, eq: exactly(0)},
		{name: "weft_queue_running_apps", labels: q, eq: exactly(0)},
		{name: "weft_queue_used", labels: map[string]string{"queue": "root.default", "resource": "memory_mb"}, eq: exactly(0)},
		{name: "weft_queue_pending", labels: map[string]string{"queue": "root.default", "resource": "vcores"}, eq: exactly(0)},
		// Two agents of 2048 MB: the only leaf queue's steady share is all of it.
		{name: "weft_queue_steady_fair_share", labels: map[string]string{"queue": "root.default", "resource": "memory_mb"}, eq: exactly(4096)},
		{name: "weft_queue_instantaneous_fair_share", labels: q, min: -1},
	})
	for _, prefix := range []string{"weft_serf_", "weft_memberlist_", "go_", "process_"} {
		if !withPrefix(fams, prefix) {
			t.Errorf("leader %s: no %s* series", leader, prefix)
		}
	}
	for name := range fams {
		if strings.HasPrefix(name, "weft_agent_") || strings.HasPrefix(name, "weft_amrmproxy_") {
			t.Errorf("leader %s exports the agent series %s", leader, name)
		}
	}

	agent := httpsClient(t, w.sec, "agent")
	fams = scrape(t, agent, httpURL(t, w.agents[amNode])+"/v1/metrics", "")
	checkMetrics(t, "agent "+amNode, fams, []metricCheck{
		{name: "weft_agent_containers_running", labels: map[string]string{"execution_type": "guaranteed"}, eq: exactly(0)},
		{name: "weft_agent_containers_running", labels: map[string]string{"execution_type": "opportunistic"}, eq: exactly(0)},
		{name: "weft_agent_opportunistic_queued", eq: exactly(0)},
		{name: "weft_agent_opportunistic_queue_capacity", eq: exactly(10)}, // the default queue length
		// The AM asked for its two containers through this agent.
		{name: "weft_amrmproxy_allocate_seconds", min: 1},
		{name: "weft_rpc_requests_total", labels: map[string]string{"method": "AM.Allocate", "code": "ok"}, min: 1},
	})
	if _, ok := fams["weft_server_leader"]; ok {
		t.Errorf("agent %s exports weft_server_leader", amNode)
	}
}

type drainNode struct {
	ID            string `json:"id"`
	Status        string `json:"status"`
	DrainDeadline int64  `json:"drain_deadline"`
}

// A node drained with a short deadline takes no new container, its tasks
// are killed as `drained` at the deadline and run again elsewhere, and the
// app finishes with every task exited 0; -disable makes the node READY.
func TestDrainEmptiesANodeWithoutFailingTheApp(t *testing.T) {
	w := startWorld(t)
	id := w.submit("-num-containers", "6", "-memory-mb", "128", "--", "sleep", "8")

	// Drain a node that runs tasks but not the AM (draining the AM's node
	// would start a new attempt, which is a different story).
	var node string
	waitFor(t, 30*time.Second, "six running tasks", func() error {
		cs := w.containers(id)
		amNode, running := "", map[string]int{}
		for _, c := range cs {
			switch {
			case c.IsAM:
				amNode = c.NodeID
			case c.State == "RUNNING":
				running[c.NodeID]++
			}
		}
		total := 0
		node = ""
		for n, k := range running {
			total += k
			if n != amNode {
				node = n
			}
		}
		if total != 6 || node == "" {
			return fmt.Errorf("containers %+v", cs)
		}
		return nil
	})
	stdout, stderr, code := cli(t, "node", "drain", "-deadline", "3s", "-address", w.any(), node)
	if code != 0 || !strings.Contains(stdout, "Node "+node+" is DRAINING") {
		t.Fatalf("node drain %s: exit %d\n%s%s", node, code, stdout, stderr)
	}
	before := map[string]bool{}
	for _, c := range w.containers(id) {
		if c.NodeID == node {
			before[c.ID] = true
		}
	}

	var draining []drainNode
	if err := cliJSON(t, &draining, "node", "list", "-state", "DRAINING", "-address", w.any()); err != nil {
		t.Fatal(err)
	}
	if len(draining) != 1 || draining[0].ID != node || draining[0].Status != "DRAINING" || draining[0].DrainDeadline == 0 {
		t.Fatalf("node list -state DRAINING: %+v; want %s alone, with its deadline", draining, node)
	}
	deadline := time.Unix(0, draining[0].DrainDeadline)
	code, _, body := httpGet(t, httpsClient(t, w.sec, "server"), httpURL(t, w.procs["s2"])+"/v1/node/"+node, os.Getenv("WEFT_TOKEN"))
	var status struct {
		Node drainNode `json:"node"`
	}
	if code != http.StatusOK || json.Unmarshal(body, &status) != nil || status.Node != draining[0] {
		t.Fatalf("GET /v1/node/%s: %d %s; want %+v", node, code, body, draining[0])
	}

	if a := w.waitApp(id, 60*time.Second); a.State != "FINISHED" {
		t.Fatalf("app ended %+v after the drain of %s", a, node)
	}
	exited, drained := 0, 0
	for _, c := range w.containers(id) {
		if c.NodeID == node && !before[c.ID] {
			t.Errorf("container %s was placed on %s while it drained", c.ID, node)
		}
		if c.IsAM {
			continue
		}
		switch {
		case exitedZero(c):
			exited++
		case c.NodeID == node && c.Reason == "drained":
			drained++
			if end := time.Unix(0, c.FinishedAt); end.Before(deadline) {
				t.Errorf("container %s was drained at %s, before the deadline %s", c.ID, end, deadline)
			}
		default:
			t.Errorf("task container %+v neither exited 0 nor was drained from %s", c, node)
		}
		if c.NodeID == node && c.State != "COMPLETED" {
			t.Errorf("container %s is %s on the drained node", c.ID, c.State)
		}
	}
	// A drained task ran again elsewhere: six exited 0 in the end.
	if exited != 6 {
		t.Errorf("%d task containers exited 0; want six", exited)
	}
	if drained == 0 {
		t.Errorf("no task was drained from %s", node)
	}

	stdout, stderr, code = cli(t, "node", "drain", "-disable", "-address", w.any(), node)
	if code != 0 || !strings.Contains(stdout, "Node "+node+" is READY") {
		t.Fatalf("node drain -disable %s: exit %d\n%s%s", node, code, stdout, stderr)
	}
	for _, n := range w.nodes("s3") {
		if n.ID == node && n.Status != "READY" {
			t.Errorf("%s is %s after -disable; want READY", node, n.Status)
		}
	}
}

// With max_completed_apps = 3, every server's state keeps only the three
// newest finished apps (the collection is one Raft command), the API agrees,
// and a collected app is plainly not found.
func TestGarbageCollectionKeepsTheNewestFinishedApps(t *testing.T) {
	q := startQuorumWith(t, newSecurity(t), "-max-completed-apps", "3", "-app-gc-threshold", "1h")
	w := startWorldOn(t, q, 1, nil)
	var ids []string
	for i := 0; i < 6; i++ {
		id := w.submit("-num-containers", "1", "-memory-mb", "64", "--", "true")
		if a := w.waitApp(id, 60*time.Second); a.State != "FINISHED" {
			t.Fatalf("app %+v", a)
		}
		ids = append(ids, id)
	}
	want := ids[3:]
	appIDs := func(apps []appInfo) []string {
		var out []string
		for _, a := range apps {
			out = append(out, a.ID)
		}
		return out
	}
	for _, s := range []string{"s1", "s2", "s3"} {
		waitFor(t, 20*time.Second, s+" to keep the three newest apps", func() error {
			var apps []appInfo
			if err := cliJSON(t, &apps, "app", "list", "-stale", "-address", w.rpcAddr(s)); err != nil {
				return err
			}
			if got := appIDs(apps); !reflect.DeepEqual(got, want) {
				return fmt.Errorf("%s lists %v", s, got)
			}
			return nil
		})
	}
	leader := w.waitForLeader("s1", 10*time.Second, "")
	code, _, body := httpGet(t, httpsClient(t, w.sec, "server"), httpURL(t, w.procs[leader])+"/v1/apps", os.Getenv("WEFT_TOKEN"))
	var apps []appInfo
	if code != http.StatusOK || json.Unmarshal(body, &apps) != nil || !reflect.DeepEqual(appIDs(apps), want) {
		t.Errorf("GET /v1/apps: %d %s; want %v", code, body, want)
	}

	gone := ids[0]
	_, stderr, code := cli(t, "app", "status", "-address", w.any(), gone)
	if code != 1 || strings.Count(stderr, "\n") != 1 || !strings.Contains(stderr, "app "+gone+" not found (finished apps are removed past max_completed_apps") {
		t.Errorf("app status of the collected %s: exit %d %q; want one line saying it is not found, and why it may be", gone, code, stderr)
	}
	var cs []containerInfo
	if err := cliJSON(t, &cs, "container", "list", "-app", gone, "-address", w.any()); err != nil || len(cs) != 0 {
		t.Errorf("containers of the collected %s: %+v %v; want none", gone, cs, err)
	}
}

// A queue dry run changes nothing and shows the plan as a table with no
// ragged edges; the list filters refuse an unknown state in one line and
// accept a known one in any case.
func TestDryRunAndListFiltersAsAnOperatorReadsThem(t *testing.T) {
	_, addr := startDev(t)
	// The fair shares are computed over the READY nodes: wait for all three
	// dev agents, so that only the dry run could change the queue list.
	waitFor(t, 20*time.Second, "three READY dev agents", func() error {
		var ns []nodeInfo
		if err := cliJSON(t, &ns, "node", "list", "-state", "READY", "-address", addr); err != nil {
			return err
		}
		if len(ns) != 3 {
			return fmt.Errorf("READY nodes %+v", ns)
		}
		return nil
	})
	queues := func() string {
		out, stderr, code := cli(t, "queue", "list", "-json", "-address", addr)
		if code != 0 {
			t.Fatalf("queue list: exit %d %s", code, stderr)
		}
		return out
	}
	before := queues()
	stdout, stderr, code := cli(t, "queue", "apply", "-dry-run", "-address", addr, "../examples/queues.hcl")
	if code != 0 {
		t.Fatalf("queue apply -dry-run: exit %d %s", code, stderr)
	}
	lines := strings.Split(strings.TrimSuffix(stdout, "\n"), "\n")
	if !strings.HasPrefix(lines[0], "Dry run of ../examples/queues.hcl: nothing was changed.") {
		t.Errorf("dry run begins %q", lines[0])
	}
	for _, want := range []string{"root.prod (new)", "root.dev (new)", "No running app would become preemptable."} {
		if !strings.Contains(stdout, want) {
			t.Errorf("dry run lacks %q:\n%s", want, stdout)
		}
	}
	for _, l := range lines {
		if strings.TrimRight(l, " \t") != l {
			t.Errorf("dry run line ends in blanks: %q", l)
		}
	}
	var plan struct {
		Queues []struct {
			Name  string `json:"name"`
			Added bool   `json:"added"`
		} `json:"queues"`
		Preemptable []any `json:"preemptable"`
	}
	if err := cliJSON(t, &plan, "queue", "apply", "-dry-run", "-address", addr, "../examples/queues.hcl"); err != nil {
		t.Fatal(err)
	}
	var added []string
	for _, q := range plan.Queues {
		if q.Added {
			added = append(added, q.Name)
		}
	}
	slices.Sort(added)
	if !reflect.DeepEqual(added, []string{"root.dev", "root.prod"}) || plan.Preemptable == nil {
		t.Errorf("dry run -json: %+v", plan)
	}
	if after := queues(); after != before {
		t.Errorf("the dry run changed the queues:\nbefore %s\nafter %s", before, after)
	}

	for _, c := range []struct{ cmd, kind string }{{"app", "an app"}, {"container", "a container"}, {"node", "a node"}} {
		stdout, stderr, code := cli(t, c.cmd, "list", "-state", "BOGUS", "-address", addr)
		if code != 2 || stdout != "" || strings.Count(stderr, "\n") != 1 ||
			!strings.Contains(stderr, `-state: state "BOGUS" is not `+c.kind+" state; use one of ") {
			t.Errorf("%s list -state BOGUS: exit %d, stdout %q, stderr %q", c.cmd, code, stdout, stderr)
		}
	}

	id := ""
	{
		var resp struct {
			AppID string `json:"app_id"`
		}
		if err := cliJSON(t, &resp, "app", "submit", "-num-containers", "2", "-address", addr, "--", "sleep", "30"); err != nil {
			t.Fatal(err)
		}
		id = resp.AppID
	}
	waitFor(t, 30*time.Second, "three running containers", func() error {
		var cs []containerInfo
		if err := cliJSON(t, &cs, "container", "list", "-state", "running", "-address", addr); err != nil {
			return err
		}
		if len(cs) != 3 {
			return fmt.Errorf("running: %+v", cs)
		}
		for _, c := range cs {
			if c.State != "RUNNING" || c.AppID != id {
				return fmt.Errorf("-state running listed %+v", c)
			}
		}
		return nil
	})
	var none []containerInfo
	if err := cliJSON(t, &none, "container", "list", "-state", "COMPLETED", "-address", addr); err != nil || none == nil || len(none) != 0 {
		t.Errorf("container list -state COMPLETED -json: %+v %v; want []", none, err)
	}
	if out, stderr, code := cli(t, "container", "list", "-state", "COMPLETED", "-address", addr); code != 0 || out != "No containers with state=COMPLETED.\n" {
		t.Errorf("container list -state COMPLETED: exit %d, stdout %q, stderr %q; want one line saying there are none", code, out, stderr)
	}
	var running []appInfo
	if err := cliJSON(t, &running, "app", "list", "-state", "Running", "-address", addr); err != nil || len(running) != 1 || running[0].ID != id {
		t.Errorf("app list -state Running: %+v %v; want %s", running, err, id)
	}
}
