package httpapi

import (
	"bytes"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/weft-sched/weft/internal/testutil"
	"github.com/weft-sched/weft/rpc"
	"github.com/weft-sched/weft/scheduler"
)

// One app runs through the API: every read route answers with the rpc
// package's types (the CLI's -json shapes) and what the app did.
func TestEveryRouteAnswers(t *testing.T) {
	ta := newTestAPI(t, apiOpts{agents: 1})
	id := ta.submit(2, "sh", "-c", "echo out-$WEFT_CONTAINER_ID; echo err >&2")
	app := ta.waitApp(id)
	if app.State != "FINISHED" || app.User != "tester" {
		t.Fatalf("app ended %+v", app)
	}

	var health Health
	ta.do("GET", "/v1/health", nil).mustJSON(t, 200, &health)
	if health.Status != "ok" || health.Role != "server" || health.LeaderID != "s1" {
		t.Fatalf("health %+v", health)
	}
	var st rpc.ClusterStatus
	a := ta.do("GET", "/v1/status", nil)
	a.mustJSON(t, 200, &st)
	if st.Nodes.Ready != 1 || st.Apps["FINISHED"] != 1 || len(st.Servers) != 1 || a.header.Get(HeaderIndex) == "" {
		t.Fatalf("status %+v, index %q", st, a.header.Get(HeaderIndex))
	}
	var members []rpc.Member
	ta.do("GET", "/v1/members", nil).mustJSON(t, 200, &members)
	if len(members) != 2 {
		t.Fatalf("members %+v", members)
	}
	var peers []rpc.RaftServer
	ta.do("GET", "/v1/operator/raft/peers", nil).mustJSON(t, 200, &peers)
	if len(peers) != 1 || peers[0].State != "leader" || !peers[0].Voter {
		t.Fatalf("peers %+v", peers)
	}
	var nodes []rpc.NodeInfo
	ta.do("GET", "/v1/nodes", nil).mustJSON(t, 200, &nodes)
	if len(nodes) != 1 || nodes[0].ID != "n1" || nodes[0].Status != "READY" {
		t.Fatalf("nodes %+v", nodes)
	}
	var node rpc.NodeStatusResponse
	ta.do("GET", "/v1/node/n1", nil).mustJSON(t, 200, &node)
	if node.Node.ID != "n1" || node.Containers == nil {
		t.Fatalf("node n1 %+v", node)
	}
	var queues []rpc.QueueInfo
	ta.do("GET", "/v1/queues", nil).mustJSON(t, 200, &queues)
	if len(queues) < 2 || queues[0].Name != "root" {
		t.Fatalf("queues %+v", queues)
	}
	var q rpc.QueueInfo
	ta.do("GET", "/v1/queue/root.default", nil).mustJSON(t, 200, &q)
	if q.Name != "root.default" || !q.Leaf {
		t.Fatalf("queue %+v", q)
	}
	var apps []rpc.AppInfo
	ta.do("GET", "/v1/apps?queue=root.default&state=FINISHED&user=tester", nil).mustJSON(t, 200, &apps)
	if len(apps) != 1 || apps[0].ID != id {
		t.Fatalf("apps %+v", apps)
	}
	ta.do("GET", "/v1/apps?user=someone-else", nil).mustJSON(t, 200, &apps)
	if len(apps) != 0 {
		t.Fatalf("apps of another user %+v", apps)
	}
	var ctrs []rpc.ContainerInfo
	ta.do("GET", "/v1/app/"+id+"/containers", nil).mustJSON(t, 200, &ctrs)
	if len(ctrs) != 3 {
		t.Fatalf("app containers %+v", ctrs)
	}
	var work string
	for _, c := range ctrs {
		if !c.IsAM {
			work = c.ID
		}
	}
	// The app is FINISHED once its AM says so; its AM container completes
	// when the agent next reports it, so wait for all three to be.
	testutil.WaitForNoError(t, 15*time.Second, "every container of "+id+" COMPLETED", func() error {
		ta.do("GET", "/v1/containers?app="+id+"&node=n1&state=COMPLETED", nil).mustJSON(t, 200, &ctrs)
		if len(ctrs) != 3 {
			return fmt.Errorf("containers by app, node and state: %+v", ctrs)
		}
		return nil
	})
	ta.do("GET", "/v1/containers?state=RUNNING", nil).mustJSON(t, 200, &ctrs)
	if len(ctrs) != 0 {
		t.Fatalf("running containers %+v", ctrs)
	}

	logs := ta.do("GET", "/v1/container/"+work+"/logs", nil)
	if logs.code != 200 || string(logs.body) != "out-"+work+"\n" || logs.header.Get(HeaderLogDone) != "true" ||
		logs.header.Get(HeaderLogOffset) != strconv.Itoa(len(logs.body)) {
		t.Fatalf("stdout: %d %q %v", logs.code, logs.body, logs.header)
	}
	logs = ta.do("GET", "/v1/container/"+work+"/logs?stream=stderr&offset=1", nil)
	if logs.code != 200 || string(logs.body) != "rr\n" {
		t.Fatalf("stderr from 1: %d %q", logs.code, logs.body)
	}
	logs = ta.do("GET", "/v1/container/"+work+"/logs?follow=true", nil)
	if logs.code != 200 || string(logs.body) != "out-"+work+"\n" {
		t.Fatalf("followed stdout of an ended container: %d %q", logs.code, logs.body)
	}

	metrics := ta.do("GET", "/v1/metrics", nil)
	if metrics.code != 200 || string(metrics.body) != "weft_up 1\n" {
		t.Fatalf("metrics: %d %q", metrics.code, metrics.body)
	}
	if ui := ta.do("GET", "/ui/apps", nil); ui.code != 200 || string(ui.body) != "ui:apps" {
		t.Fatalf("ui: %d %q", ui.code, ui.body)
	}
}

// A followed log streams while the container runs and ends with it.
func TestFollowedLogsStreamUntilTheContainerEnds(t *testing.T) {
	ta := newTestAPI(t, apiOpts{agents: 1})
	id := ta.submit(1, "sh", "-c", "echo one; sleep 2; echo two")
	var running string
	testutilWait(t, func() bool {
		var ctrs []rpc.ContainerInfo
		ta.get("/v1/containers?app="+id+"&state=RUNNING", &ctrs)
		for _, c := range ctrs {
			if !c.IsAM {
				running = c.ID
			}
		}
		return running != ""
	})
	logs := ta.do("GET", "/v1/container/"+running+"/logs?follow=true", nil)
	if logs.code != 200 || string(logs.body) != "one\ntwo\n" || logs.header.Get("Transfer-Encoding") == "identity" {
		t.Fatalf("followed log: %d %q", logs.code, logs.body)
	}
}

// A blocking query waits for the state to pass its index and answers
// with a higher X-Weft-Index.
func TestBlockingQueryWakesOnAChange(t *testing.T) {
	ta := newTestAPI(t, apiOpts{agents: 1})
	first := ta.do("GET", "/v1/apps", nil)
	first.mustJSON(t, 200, nil)
	index, err := strconv.ParseUint(first.header.Get(HeaderIndex), 10, 64)
	if err != nil || index == 0 {
		t.Fatalf("X-Weft-Index %q", first.header.Get(HeaderIndex))
	}
	done := make(chan answer, 1)
	go func() { done <- ta.do("GET", "/v1/apps?index="+strconv.FormatUint(index, 10)+"&wait=60s", nil) }()
	testutilWait(t, func() bool { return ta.inFlight() == 1 }) // blocked, waiting for a change
	id := ta.submit(1, "true")
	a := <-done
	var apps []rpc.AppInfo
	a.mustJSON(t, 200, &apps)
	after, _ := strconv.ParseUint(a.header.Get(HeaderIndex), 10, 64)
	if after <= index || len(apps) != 1 || apps[0].ID != id {
		t.Fatalf("woke with index %d (was %d) and apps %+v", after, index, apps)
	}
	stale := ta.do("GET", "/v1/apps?stale", nil)
	stale.mustJSON(t, 200, nil)
	if stale.header.Get(HeaderKnownLeader) != "true" {
		t.Fatalf("stale read headers %v", stale.header)
	}
}

func TestTokensWithACLs(t *testing.T) {
	ta := newTestAPI(t, apiOpts{acl: true})
	mgmt := ta.token
	ta.token = ""
	ta.do("GET", "/v1/nodes", nil).errorIs(t, 403, "lacks node:read (over HTTP, send the token in the X-Weft-Token header")
	ta.do("GET", "/v1/health", nil).mustJSON(t, 200, nil) // public
	// A server's metrics name queues and their usage: operator:read.
	ta.do("GET", "/v1/metrics", nil).errorIs(t, 403, "lacks operator:read")
	if m := ta.do("GET", "/v1/metrics", nil, HeaderToken, mgmt); m.code != 200 || string(m.body) != "weft_up 1\n" {
		t.Fatalf("metrics with the token: %d %q", m.code, m.body)
	}
	// Profiles show what a process holds and does: operator:write.
	ta.do("GET", "/debug/pprof/goroutine?debug=1", nil).errorIs(t, 403, "lacks operator:write")
	if p := ta.do("GET", "/debug/pprof/goroutine?debug=1", nil, HeaderToken, mgmt); p.code != 200 || !strings.HasPrefix(string(p.body), "goroutine profile:") {
		t.Fatalf("goroutine profile with the token: %d %.100q", p.code, p.body)
	}
	if p := ta.do("GET", "/debug/pprof/heap", nil, HeaderToken, mgmt); p.code != 200 || len(p.body) < 2 || p.body[0] != 0x1f || p.body[1] != 0x8b {
		t.Fatalf("heap profile with the token: %d, not gzip: %.20q", p.code, p.body)
	}
	ta.do("GET", "/debug/pprof/nothing", nil, HeaderToken, mgmt).errorIs(t, 404, `no profile "nothing"`)
	ta.do("GET", "/debug/pprof/heap?bogus=1", nil, HeaderToken, mgmt).errorIs(t, 400, "unknown query parameter")
	ta.do("GET", "/v1/nodes", nil, HeaderToken, mgmt).mustJSON(t, 200, nil)
	ta.do("GET", "/v1/nodes", nil, "Authorization", "Bearer "+mgmt).mustJSON(t, 200, nil)
	ta.do("GET", "/v1/nodes", nil, HeaderToken, "not-a-token").errorIs(t, 403, "ACL token not found")
	ta.do("GET", "/v1/nodes", nil, HeaderToken, mgmt, "Authorization", "Bearer other").errorIs(t, 400, "different tokens")
	ta.do("GET", "/v1/nodes", nil, "Authorization", "Basic abc").errorIs(t, 400, "Bearer")

	// A token that may read queues but not submit.
	ta.token = mgmt
	var wr rpc.WriteResponse
	if err := ta.srv.Call(t.Context(), "ACL.PolicyApply", &rpc.ACLPolicyApplyRequest{RequestHeader: rpc.RequestHeader{AuthToken: mgmt},
		Policy: rpc.ACLPolicy{Name: "reader", Rules: `queue "root" { policy = "read" }`}}, &wr); err != nil {
		t.Fatal(err)
	}
	var tok rpc.ACLTokenResponse
	if err := ta.srv.Call(t.Context(), "ACL.TokenCreate", &rpc.ACLTokenCreateRequest{RequestHeader: rpc.RequestHeader{AuthToken: mgmt},
		Name: "reader", Type: "client", Policies: []string{"reader"}}, &tok); err != nil {
		t.Fatal(err)
	}
	ta.token = tok.Token.SecretID
	ta.do("GET", "/v1/apps", nil).mustJSON(t, 200, nil)
	ta.do("GET", "/v1/metrics", nil).errorIs(t, 403, "lacks operator:read")
	ta.do("GET", "/debug/pprof/heap", nil).errorIs(t, 403, "lacks operator:write")
	ta.do("POST", "/v1/apps", []byte(`{"dshell": {"command": ["true"]}}`)).errorIs(t, 403, "permission denied")
	ta.do("PUT", "/v1/queues", []byte(`queue "root" {}`)).errorIs(t, 403, "permission denied")
	var self rpc.ACLToken
	ta.do("GET", "/v1/acl/token/self", nil).mustJSON(t, 200, &self)
	if self.Name != "reader" || self.SecretID != "" {
		t.Fatalf("token self %+v", self)
	}
}

func TestErrorShapesAndLimits(t *testing.T) {
	ta := newTestAPI(t, apiOpts{limits: Limits{MaxBodyBytes: 1 << 10, MaxInflight: 2}})
	ta.do("GET", "/v1/apps?queue=root&color=red", nil).errorIs(t, 400, `unknown query parameter "color"`)
	ta.do("GET", "/v1/apps?index=x", nil).errorIs(t, 400, "index:")
	ta.do("GET", "/v1/apps?wait=5s", nil).errorIs(t, 400, "wait: give index")
	ta.do("GET", "/v1/apps?index=1&wait=10m", nil).errorIs(t, 400, "wait: 10m is out of range")
	ta.do("GET", "/v1/apps?stale=maybe", nil).errorIs(t, 400, "stale:")
	ta.do("GET", "/v1/apps?queue=a&queue=b", nil).errorIs(t, 400, "given 2 times")
	ta.do("GET", "/v1/app/app-999", nil).errorIs(t, 404, "app-999")
	ta.do("GET", "/v1/app/app-999/containers", nil).errorIs(t, 404, "app-999")
	ta.do("GET", "/v1/queue/root.nope", nil).errorIs(t, 404, "root.nope")
	ta.do("GET", "/v1/container/c-1-0/logs?stream=both", nil).errorIs(t, 400, "stream:")
	ta.do("GET", "/v1/container/c-1-0/logs?offset=-4", nil).errorIs(t, 400, "offset:")
	ta.do("GET", "/v1/nope", nil).errorIs(t, 404, "no route GET /v1/nope")
	a := ta.do("PATCH", "/v1/apps", nil)
	a.errorIs(t, 405, "/v1/apps takes GET, HEAD or POST, not PATCH")
	if a.header.Get("Allow") != "GET, HEAD, POST" {
		t.Fatalf("Allow %q", a.header.Get("Allow"))
	}
	ta.do("POST", "/v1/apps", []byte(`{"name": "x"`)).errorIs(t, 400, "nothing was submitted")
	ta.do("POST", "/v1/apps", []byte(`{"user": "u", "dshell": {"command": ["true"], "num_containers": -1}}`)).errorIs(t, 400, "num_containers")
	ta.do("PUT", "/v1/queues", []byte(`queue "root" { weight = "heavy" }`)).errorIs(t, 400, "nothing was changed")
	ta.do("POST", "/v1/apps", bytes.Repeat([]byte(" "), 2<<10)).errorIs(t, 413, "larger than 1024 bytes")
	ta.do("DELETE", "/v1/app/app-999", nil).errorIs(t, 404, "app-999")
	ta.do("PUT", "/v1/queues?dry_run=yes", []byte(`queue "root" {}`)).errorIs(t, 400, "dry_run:")
	if r := ta.do("GET", "/", nil); r.code != 200 || !strings.HasPrefix(string(r.body), "ui:") {
		t.Fatalf("/ did not lead to the UI: %d %q", r.code, r.body)
	}

	// Two blocking queries hold both slots: a third request is refused.
	first := ta.do("GET", "/v1/apps", nil)
	index := first.header.Get(HeaderIndex)
	held := make(chan answer, 2)
	for range 2 {
		go func() { held <- ta.do("GET", "/v1/apps?index="+index+"&wait=1m", nil) }()
	}
	testutilWait(t, func() bool { return ta.inFlight() == 2 })
	busy := ta.do("GET", "/v1/health", nil)
	busy.errorIs(t, 429, "requests in flight")
	if busy.header.Get("Retry-After") == "" {
		t.Fatal("429 without Retry-After")
	}
	// Wake both with a change made past the API, whose slots are full.
	var sub rpc.AppSubmitResponse
	if err := ta.srv.Call(t.Context(), "App.Submit", &rpc.AppSubmitRequest{Spec: scheduler.AppSpec{User: "tester",
		DShell: scheduler.DShell{Command: []string{"true"}, NumContainers: 1}}}, &sub); err != nil {
		t.Fatal(err)
	}
	for range 2 {
		(<-held).mustJSON(t, 200, nil)
	}
}

// Applying queues through the API changes them, with the write's index.
func TestQueueApplyTakesHCLAndJSON(t *testing.T) {
	ta := newTestAPI(t, apiOpts{})
	a := ta.do("PUT", "/v1/queues", []byte(`queue "root" {
  queue "prod" { weight = 3 }
  queue "dev" {}
}`))
	var wr rpc.WriteResponse
	a.mustJSON(t, 200, &wr)
	if wr.Index == 0 || a.header.Get(HeaderIndex) != strconv.FormatUint(wr.Index, 10) {
		t.Fatalf("apply answered %+v, index header %q", wr, a.header.Get(HeaderIndex))
	}
	var q rpc.QueueInfo
	ta.do("GET", "/v1/queue/root.prod", nil).mustJSON(t, 200, &q)
	if q.Weight != 3 {
		t.Fatalf("root.prod %+v", q)
	}
	// A dry run answers the plan and changes nothing.
	var plan rpc.QueueApplyResponse
	ta.do("PUT", "/v1/queues?dry_run=true", []byte(`queue "root" {
  queue "prod" { weight = 1 }
}`)).mustJSON(t, 200, &plan)
	if plan.Plan == nil || len(plan.Plan.Queues) == 0 {
		t.Fatalf("dry run answered %+v", plan)
	}
	ta.do("GET", "/v1/queue/root.prod", nil).mustJSON(t, 200, &q)
	if q.Weight != 3 {
		t.Fatalf("a dry run changed root.prod: %+v", q)
	}
	ta.do("GET", "/v1/queue/root.dev", nil).mustJSON(t, 200, nil)

	// A write retried with its request ID is applied once.
	var first, retry rpc.QueueApplyResponse
	body := []byte("queue \"root\" {\n  queue \"retried\" {}\n}\n")
	ta.do("PUT", "/v1/queues", body, HeaderRequestID, "retry-1").mustJSON(t, 200, &first)
	ta.do("PUT", "/v1/queues", body, HeaderRequestID, "retry-1").mustJSON(t, 200, &retry)
	if first.Index == 0 || retry.Index != first.Index {
		t.Fatalf("retried write applied at %d, first at %d", retry.Index, first.Index)
	}
	ta.do("PUT", "/v1/queues", body, HeaderRequestID, "not ok!").errorIs(t, 400, HeaderRequestID)
	ta.do("PUT", "/v1/queues", []byte(`{"queue": {"root": {"queue": {"batch": {"weight": 2}}}}}`)).mustJSON(t, 200, nil)
	ta.do("GET", "/v1/queue/root.batch", nil).mustJSON(t, 200, &q)
	if q.Weight != 2 {
		t.Fatalf("root.batch %+v", q)
	}
}

// A node drains and comes back through the API, as `weft node drain`.
func TestDrainANode(t *testing.T) {
	ta := newTestAPI(t, apiOpts{agents: 1})
	var wr rpc.WriteResponse
	a := ta.do("POST", "/v1/node/n1/drain", []byte(`{"deadline": "30m"}`))
	a.mustJSON(t, 200, &wr)
	if wr.Index == 0 || a.header.Get(HeaderIndex) == "" {
		t.Fatalf("drain answered %+v", wr)
	}
	var nodes []rpc.NodeInfo
	ta.do("GET", "/v1/nodes?state=DRAINING", nil).mustJSON(t, 200, &nodes)
	if len(nodes) != 1 || nodes[0].ID != "n1" || nodes[0].DrainDeadline == 0 {
		t.Fatalf("draining nodes %+v", nodes)
	}
	ta.do("POST", "/v1/node/n1/drain", []byte(`{"disable": true}`)).mustJSON(t, 200, nil)
	ta.do("GET", "/v1/nodes?state=READY", nil).mustJSON(t, 200, &nodes)
	if len(nodes) != 1 || nodes[0].Status != "READY" {
		t.Fatalf("ready nodes after the drain ended %+v", nodes)
	}
	ta.do("POST", "/v1/node/n1/drain", []byte(`{"deadline": "soon"}`)).errorIs(t, 400, `deadline: "soon"`)
	ta.do("POST", "/v1/node/n1/drain", []byte(`{"dedline": "1h"}`)).errorIs(t, 400, "dedline")
	ta.do("GET", "/v1/nodes?state=ASLEEP", nil).errorIs(t, 400, "ASLEEP")
	ta.do("GET", "/v1/node/n1", nil).mustJSON(t, 200, nil)
}
