package server

import (
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/weft-sched/weft/internal/clock"
	"github.com/weft-sched/weft/internal/testutil"
	wrpc "github.com/weft-sched/weft/rpc"
	"github.com/weft-sched/weft/scheduler"
)

// startSubcluster starts one server of sub-cluster sc2 on a fake clock,
// reporting to a router nobody runs.
func startSubcluster(t *testing.T) (*testCluster, *Server, *clock.Fake) {
	c := newTestCluster(t)
	fake := clock.NewFake(time.Unix(2_000_000_000, 0))
	c.clock = fake
	c.tune = func(cfg *Config) { cfg.SubclusterID, cfg.Routers = "sc2", []string{"127.0.0.1:1"} }
	l := c.start("solo", 1)
	c.waitForLeader()
	return c, l, fake
}

// spanReq asks for app-fN's unmanaged AM at attempt in sc2, from sc1.
func spanReq(app string, attempt int) *wrpc.AppSubmitUnmanagedRequest {
	return &wrpc.AppSubmitUnmanagedRequest{AppID: app, Home: "sc1", Subcluster: "sc2", Attempt: attempt,
		Queue: "default", User: "alice", Priority: 2, Name: "spanning"}
}

func submitSpan(t *testing.T, c *testCluster, s *Server, req *wrpc.AppSubmitUnmanagedRequest) *wrpc.AppSubmitUnmanagedResponse {
	t.Helper()
	var resp wrpc.AppSubmitUnmanagedResponse
	if err := c.call(s, "App.SubmitUnmanaged", req, &resp); err != nil {
		t.Fatalf("App.SubmitUnmanaged %s attempt %d: %v", req.AppID, req.Attempt, err)
	}
	if resp.AppID != req.AppID || resp.Attempt != req.Attempt || resp.AMToken == "" || resp.Index == 0 {
		t.Fatalf("answer %+v", resp)
	}
	return &resp
}

func mustCode(t *testing.T, what string, err error, code wrpc.Code, names string) {
	t.Helper()
	if wrpc.ErrorCode(err) != code || !strings.Contains(err.Error(), names) {
		t.Fatalf("%s: %v; want %s naming %q", what, err, code, names)
	}
}

// An unmanaged AM, created as the routers do, asks with the token it was
// given and gets containers whose IDs carry the sub-cluster; ended KILLED
// by its AMRMProxy, its containers stop. Agents learn the federation.
func TestUnmanagedAMGetsContainersAndEndsKilled(t *testing.T) {
	c, l, fake := startSubcluster(t)
	x := &fakeAgent{registerFake(t, c, l, "x", fourCores), map[string]wrpc.ContainerReport{}}
	hb := x.beat(t, l)
	if f := hb.Federation; f == nil || f.Subcluster != "sc2" || !slices.Equal(f.Routers, []string{"127.0.0.1:1"}) {
		t.Fatalf("heartbeat answer's federation %+v", hb.Federation)
	}

	// Refused: another sub-cluster's span, a local app ID, a parent queue.
	for _, tc := range []struct {
		change func(*wrpc.AppSubmitUnmanagedRequest)
		names  string
	}{
		{func(r *wrpc.AppSubmitUnmanagedRequest) { r.Subcluster = "sc3" }, "subcluster"},
		{func(r *wrpc.AppSubmitUnmanagedRequest) { r.AppID = "app-4" }, "app_id"},
		{func(r *wrpc.AppSubmitUnmanagedRequest) { r.Queue = "root" }, "root"},
		{func(r *wrpc.AppSubmitUnmanagedRequest) { r.User = "" }, "user"},
	} {
		req := spanReq("app-f1", 1)
		tc.change(req)
		var resp wrpc.AppSubmitUnmanagedResponse
		mustCode(t, "a bad span", c.call(l, "App.SubmitUnmanaged", req, &resp), wrpc.CodeBadRequest, tc.names)
	}
	if len(l.State().Apps()) != 0 {
		t.Fatalf("a refused span made an app")
	}

	req := spanReq("app-f1", 1)
	req.RequestID = "span-app-f1-1"
	span := submitSpan(t, c, l, req)
	again := submitSpan(t, c, l, req) // a router's retry
	if again.Index != span.Index {
		t.Fatalf("a retry was applied again: index %d, first %d", again.Index, span.Index)
	}

	// AM.Register is harmless: the app runs already, nothing is written.
	before := l.State().Index()
	var reg wrpc.AMRegisterResponse
	if err := c.call(l, "AM.Register", &wrpc.AMRegisterRequest{AppID: "app-f1", Attempt: 1, Token: span.AMToken}, &reg); err != nil {
		t.Fatalf("AM.Register of an unmanaged AM: %v", err)
	}
	if reg.Queue != "root.default" || l.State().Index() != before {
		t.Fatalf("register answered queue %q, wrote %d entries", reg.Queue, l.State().Index()-before)
	}

	ask := []scheduler.Ask{{AskID: 1, Count: 2, Resources: scheduler.Resources{MemoryMB: 512, Vcores: 1}, ExecutionType: scheduler.Guaranteed}}
	var alloc wrpc.AMAllocateResponse
	testutil.WaitFor(t, 10*time.Second, func() bool {
		alloc = wrpc.AMAllocateResponse{}
		if err := c.call(l, "AM.Allocate", &wrpc.AMAllocateRequest{AppID: "app-f1", Attempt: 1, Token: span.AMToken, Asks: ask}, &alloc); err != nil {
			t.Fatalf("AM.Allocate: %v", err)
		}
		return len(alloc.Allocated) == 2
	})
	for _, ci := range alloc.Allocated {
		if !strings.HasPrefix(ci.ID, "sc2.c-") || ci.AppID != "app-f1" || ci.Token == "" || ci.User != "alice" {
			t.Fatalf("allocated %+v; want an ID sc2.c-…, a token, user alice", ci)
		}
	}
	started, unstarted := alloc.Allocated[0].ID, alloc.Allocated[1].ID
	x.run(alloc.Allocated[0], fake.Now())
	x.beat(t, l)

	var wr wrpc.WriteResponse
	err := c.call(l, "AM.Finish", &wrpc.AMFinishRequest{AppID: "app-f1", Attempt: 1, Token: span.AMToken, FinalState: "LOST"}, &wr)
	mustCode(t, "final_state LOST", err, wrpc.CodeBadRequest, "final_state")
	if err := c.call(l, "AM.Finish", &wrpc.AMFinishRequest{AppID: "app-f1", Attempt: 1, Token: span.AMToken,
		FinalState: string(scheduler.AppKilled), Diagnostics: "the app was killed in sc1"}, &wr); err != nil {
		t.Fatalf("AM.Finish KILLED: %v", err)
	}
	if a, _ := l.State().App("app-f1"); a.State != scheduler.AppKilled {
		t.Fatalf("app %s after AM.Finish KILLED", a.State)
	}
	if ctr, _ := l.State().Container(unstarted); ctr.State != scheduler.ContainerCompleted || ctr.Reason != scheduler.ReasonKilled {
		t.Fatalf("unstarted container %+v", ctr)
	}
	hb = x.beat(t, l)
	if !slices.ContainsFunc(hb.Kill, func(k wrpc.KillOrder) bool { return k.ID == started && k.Reason == scheduler.ReasonKilled }) {
		t.Fatalf("kill orders %+v, want %s killed", hb.Kill, started)
	}
	// Ended, it is not created again.
	var resp wrpc.AppSubmitUnmanagedResponse
	mustCode(t, "a span of an ended app", c.call(l, "App.SubmitUnmanaged", spanReq("app-f1", 2), &resp), wrpc.CodeStale, "has ended")
}

// A token naming no container speaks only for an unmanaged AM: one
// signed with the cluster's own key for a managed app's attempt is
// refused, as is an unmanaged AM's token at AM.Verify.
func TestTokenWithoutAContainerIsOnlyAnUnmanagedAMs(t *testing.T) {
	c, l, fake := startSubcluster(t)
	x := registerFake(t, c, l, "x", fourCores)
	app := submit(t, c, l, "managed")
	x.amToken(t, l, app)
	forged, err := unmanagedAMToken(keyringOf(l.State()), app, 1, "alice", 0, fake.Now())
	if err != nil {
		t.Fatal(err)
	}
	var alloc wrpc.AMAllocateResponse
	err = c.call(l, "AM.Allocate", &wrpc.AMAllocateRequest{AppID: app, Attempt: 1, Token: forged}, &alloc)
	mustDeny(t, "a containerless token for a managed app", err, "container")

	span := submitSpan(t, c, l, spanReq("app-f1", 1))
	var v wrpc.AMVerifyResponse
	err = c.call(l, "AM.Verify", &wrpc.AMVerifyRequest{AppID: "app-f1", Attempt: 1, Token: span.AMToken}, &v)
	mustDeny(t, "AM.Verify of an unmanaged AM", err, "ask its home")
}

// AM.Verify, through a follower: the AM token of a running app's current
// attempt holds and gets the app's particulars; a forged token, another
// app's, another attempt's, do not; an app that has ended is stale.
func TestAMVerifyChecksTheAMToken(t *testing.T) {
	c := startThree(t)
	l, f := c.leader(), c.follower()
	x := registerFake(t, c, l, "x", fourCores)
	spec := testSpec("verified")
	spec.Priority, spec.Queue = 7, "default"
	var sub wrpc.AppSubmitResponse
	if err := c.call(l, "App.Submit", &wrpc.AppSubmitRequest{Spec: spec}, &sub); err != nil {
		t.Fatal(err)
	}
	app, other := sub.AppID, submit(t, c, l, "other")
	tok, _ := x.amToken(t, l, app)
	otherTok, _ := x.amToken(t, l, other)
	var reg wrpc.AMRegisterResponse
	if err := c.call(l, "AM.Register", &wrpc.AMRegisterRequest{AppID: app, Attempt: 1, Token: tok}, &reg); err != nil {
		t.Fatal(err)
	}

	verify := func(appID string, attempt int, token string) (*wrpc.AMVerifyResponse, error) {
		var v wrpc.AMVerifyResponse
		err := c.call(f, "AM.Verify", &wrpc.AMVerifyRequest{AppID: appID, Attempt: attempt, Token: token}, &v)
		return &v, err
	}
	v, err := verify(app, 1, tok)
	if err != nil {
		t.Fatalf("AM.Verify of the app's own AM token: %v", err)
	}
	if *v != (wrpc.AMVerifyResponse{Queue: "root.default", User: "alice", Priority: 7, Name: "verified", State: "RUNNING"}) {
		t.Fatalf("answer %+v", v)
	}
	_, err = verify(app, 1, "forged.token")
	mustDeny(t, "a forged token", err, "AM token")
	_, err = verify(app, 1, otherTok)
	mustDeny(t, "another app's token", err, other)
	_, err = verify(app, 2, tok)
	mustDeny(t, "another attempt", err, "attempt 2")

	var wr wrpc.WriteResponse
	if err := c.call(l, "AM.Finish", &wrpc.AMFinishRequest{AppID: app, Attempt: 1, Token: tok, FinalState: "FINISHED"}, &wr); err != nil {
		t.Fatal(err)
	}
	_, err = verify(app, 1, tok)
	if !errors.Is(err, wrpc.ErrStale) || !strings.Contains(err.Error(), "has ended") {
		t.Fatalf("a finished app: %v, want stale", err)
	}
}

// The leader kills an unmanaged AM it has not heard from for
// unmanaged_am_timeout, on its own clock; one whose AMRMProxy calls
// stays. The report to the routers counts the ones left.
func TestSilentUnmanagedAMIsKilled(t *testing.T) {
	c, l, fake := startSubcluster(t)
	submitSpan(t, c, l, spanReq("app-f1", 1))
	busy := submitSpan(t, c, l, spanReq("app-f2", 1))
	if rep := l.subclusterReport(l.State(), 1); rep.UnmanagedAMs != 2 || rep.AppsRunning != 0 {
		t.Fatalf("report counts %d unmanaged AMs, %d apps; want 2, 0", rep.UnmanagedAMs, rep.AppsRunning)
	}

	fake.Advance(time.Minute)
	var alloc wrpc.AMAllocateResponse
	if err := c.call(l, "AM.Allocate", &wrpc.AMAllocateRequest{AppID: "app-f2", Attempt: 1, Token: busy.AMToken}, &alloc); err != nil {
		t.Fatal(err)
	}
	fake.Advance(time.Minute + time.Second)
	state := func(id string) *scheduler.App { a, _ := l.State().App(id); return a }
	testutil.WaitFor(t, 10*time.Second, func() bool { return state("app-f1").State == scheduler.AppKilled })
	if d := state("app-f1").Diagnostics; d != "its AMRMProxy in sub-cluster sc1 has not been heard from for 2m0s" {
		t.Fatalf("killed for %q", d)
	}
	// The tick that killed app-f1 looked at app-f2, heard 61 s before.
	if s := state("app-f2").State; s != scheduler.AppRunning {
		t.Fatalf("an unmanaged AM heard from a minute ago is %s", s)
	}
	if rep := l.subclusterReport(l.State(), 2); rep.UnmanagedAMs != 1 {
		t.Fatalf("report counts %d unmanaged AMs, want 1", rep.UnmanagedAMs)
	}
}

// The watch's rule, alone: a clock per unmanaged AM, restarted by what
// is heard and by a new term; ended apps forgotten.
func TestUnmanagedWatch(t *testing.T) {
	t0 := time.Unix(1000, 0)
	span := func(id, home string, st scheduler.AppState) *scheduler.App {
		return &scheduler.App{ID: id, State: st, Unmanaged: &scheduler.Unmanaged{Home: home, Subcluster: "sc2"}}
	}
	apps := fakeApps{"app-f1": span("app-f1", "sc1", scheduler.AppRunning), "app-f2": span("app-f2", "sc3", scheduler.AppRunning),
		"app-f3": span("app-f3", "sc1", scheduler.AppKilled), "app-4": {ID: "app-4", State: scheduler.AppRunning}}
	w := newUnmanagedWatch(2 * time.Minute)
	w.Reset(t0, []*scheduler.App{apps["app-f1"], apps["app-f2"], apps["app-f3"], apps["app-4"]})
	if len(w.heard) != 2 {
		t.Fatalf("reset remembers %v, want the two live unmanaged AMs", w.heard)
	}
	w.Heard("app-f2", t0.Add(time.Minute))
	w.Heard("app-f2", t0) // an older call answered late changes nothing
	if gone := w.Tick(t0.Add(2*time.Minute-time.Nanosecond), apps); len(gone) != 0 {
		t.Fatalf("gone before the timeout: %v", gone)
	}
	gone := w.Tick(t0.Add(2*time.Minute), apps)
	if len(gone) != 1 || gone[0] != (unmanagedGone{AppID: "app-f1", Home: "sc1"}) {
		t.Fatalf("gone %v, want app-f1 from sc1", gone)
	}
	apps["app-f1"] = span("app-f1", "sc1", scheduler.AppKilled)
	gone = w.Tick(t0.Add(3*time.Minute), apps)
	if len(gone) != 1 || gone[0].AppID != "app-f2" {
		t.Fatalf("gone %v, want app-f2", gone)
	}
	if _, kept := w.heard["app-f1"]; kept {
		t.Fatalf("an ended app's clock is kept")
	}
	// A new term: every clock starts again.
	w.Reset(t0.Add(3*time.Minute), []*scheduler.App{apps["app-f2"]})
	if gone := w.Tick(t0.Add(4*time.Minute), apps); len(gone) != 0 {
		t.Fatalf("gone right after a new term: %v", gone)
	}
}

type fakeApps map[string]*scheduler.App

func (f fakeApps) App(id string) (*scheduler.App, bool) { a, ok := f[id]; return a, ok }

// Agents learn their sub-cluster and its routers from every registration
// and heartbeat answer, through a follower (whose forwarded batches hold
// the federation once) as from the leader.
func TestAgentsLearnTheFederation(t *testing.T) {
	c := newTestCluster(t)
	c.tune = func(cfg *Config) { cfg.SubclusterID, cfg.Routers = "sc2", []string{"127.0.0.1:1", "127.0.0.1:2"} }
	s1 := c.start("s1", 3)
	c.start("s2", 3, s1.SerfAddr())
	c.start("s3", 3, s1.SerfAddr())
	c.waitForLeader()
	c.waitForVoters("s1", "s2", "s3")
	want := wrpc.AgentFederation{Subcluster: "sc2", Routers: []string{"127.0.0.1:1", "127.0.0.1:2"}}
	var reg wrpc.NodeRegisterResponse
	if err := c.call(c.follower(), "Node.Register", &wrpc.NodeRegisterRequest{ID: "x", Address: "127.0.0.1:1", Capacity: fourCores, Secret: nodeSecret("x")}, &reg); err != nil {
		t.Fatal(err)
	}
	if reg.Federation == nil || reg.Federation.Subcluster != want.Subcluster || !slices.Equal(reg.Federation.Routers, want.Routers) {
		t.Fatalf("registration answer's federation %+v, want %+v", reg.Federation, want)
	}
	x := &fakeNode{c: c, id: "x", secret: nodeSecret("x"), epoch: reg.Epoch}
	for _, s := range []*Server{c.follower(), c.leader()} {
		hb := x.heartbeat(t, s, wrpc.HeartbeatRequest{})
		if hb.Federation == nil || hb.Federation.Subcluster != want.Subcluster || !slices.Equal(hb.Federation.Routers, want.Routers) {
			t.Fatalf("heartbeat answer through %s: federation %+v, want %+v", s.NodeID(), hb.Federation, want)
		}
	}
}
