package agent

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/weft-sched/weft/internal/testutil"
	"github.com/weft-sched/weft/router"
	"github.com/weft-sched/weft/rpc"
	"github.com/weft-sched/weft/scheduler"
	"github.com/weft-sched/weft/scheduler/federation"
	"github.com/weft-sched/weft/server"
)

// fedWorld is an in-process federation: one router and sub-clusters sc1…
// of one server and n agents each (real Raft on disk, real TCP, real
// gossip), whose AM containers run a stand-in that writes down its AM
// token and sleeps: the test speaks the AM protocol in its place through
// the AMRMProxy of its node, as in amWorld.
type fedWorld struct {
	t      testing.TB
	router *router.Router
	rc     *rpc.Client // to the router
	subs   map[string]*fedSubcluster
	tokens string
}

type fedSubcluster struct {
	srv    *server.Server
	agents []*Agent
	c      *rpc.Client
}

func startFedWorld(t testing.TB, subclusters, agentsEach int, vcores int64) *fedWorld {
	t.Helper()
	w := &testLog{t: t, done: make(chan struct{})}
	t.Cleanup(func() { close(w.done) })
	level := hclog.Info
	if _, bench := t.(*testing.B); bench {
		level = hclog.Error
	}
	logger := hclog.New(&hclog.LoggerOptions{Output: w, Level: level})
	dir := t.TempDir()
	standIn := writeStandInAM(t, dir)
	r, err := router.New(&router.Config{NodeID: "r1", DataDir: t.TempDir(), RPCPort: -1, SerfPort: -1, BootstrapExpect: 1,
		SerfFastGossip: true, SubclusterTimeout: 3 * time.Second, GPGInterval: time.Hour, Logger: logger.Named("r1")})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { r.Shutdown() })
	fw := &fedWorld{t: t, router: r, rc: rpc.NewClient([]string{r.RPCAddr()}, nil), subs: map[string]*fedSubcluster{}, tokens: dir}
	t.Cleanup(fw.rc.Close)
	for i := 1; i <= subclusters; i++ {
		id := fmt.Sprint("sc", i)
		srv, err := server.New(&server.Config{NodeID: id + "-s1", DataDir: t.TempDir(), RPCPort: -1, SerfPort: -1, BootstrapExpect: 1,
			SerfFastGossip: true, SubclusterID: id, Routers: []string{r.RPCAddr()}, SubclusterHeartbeat: 200 * time.Millisecond,
			Logger: logger.Named(id)})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { srv.Shutdown() })
		sc := &fedSubcluster{srv: srv, c: rpc.NewClient([]string{srv.RPCAddr()}, nil)}
		t.Cleanup(sc.c.Close)
		for j := 1; j <= agentsEach; j++ {
			nid := fmt.Sprintf("%s-n%d", id, j)
			a, err := New(&Config{NodeID: nid, DataDir: t.TempDir(), RPCPort: -1, SerfPort: -1, Join: []string{srv.SerfAddr()},
				Resources: scheduler.Resources{MemoryMB: vcores * 1024, Vcores: vcores}, OpportunisticQueueLength: -1,
				SerfFastGossip: true, Executable: standIn, KillGrace: time.Second, AllowRoot: true, Logger: logger.Named(nid)})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { a.Shutdown() })
			sc.agents = append(sc.agents, a)
		}
		fw.subs[id] = sc
	}
	testutil.WaitForNoError(t, 30*time.Second, "every sub-cluster RUNNING at the router", func() error {
		var resp rpc.FederationSubclustersResponse
		if err := fw.rc.Call(context.Background(), "Federation.Subclusters", &rpc.FederationSubclustersRequest{}, &resp); err != nil {
			return err
		}
		running := 0
		for _, sc := range resp.Subclusters {
			if sc.State == federation.StateRunning && sc.NodesReady == agentsEach {
				running++
			}
		}
		if running != subclusters {
			return fmt.Errorf("%+v", resp.Subclusters)
		}
		return nil
	})
	return fw
}

// policy sets queue's federation policy: every app's home sc1, and amrm
// splitting its asks with weights.
func (fw *fedWorld) policy(queue string, amrm federation.AMRMPolicyType, weights map[string]uint32) {
	fw.t.Helper()
	home := map[string]uint32{}
	for id := range fw.subs {
		home[id] = 0
	}
	home["sc1"] = 1
	p := federation.Policy{Queue: queue, Router: federation.Weighted, AMRMProxy: amrm, Weights: weights}
	if weights == nil {
		p.Weights = home
	}
	if err := fw.rc.Call(context.Background(), "Federation.PolicyApply",
		&rpc.FederationPolicyApplyRequest{Policies: []federation.Policy{p}}, &rpc.FederationPolicyApplyResponse{}); err != nil {
		fw.t.Fatal(err)
	}
}

// submit submits a stand-in app through the router, waits for its AM to
// run, and returns its federation ID, its home's sub-cluster and a
// registered AM client speaking for it through its node's AMRMProxy.
func (fw *fedWorld) submit(queue string) (string, *fedSubcluster, *rpc.AMClient) {
	fw.t.Helper()
	var sub rpc.AppSubmitResponse
	spec := scheduler.AppSpec{User: "test", Queue: queue, DShell: scheduler.DShell{NumContainers: 1, Command: []string{"true"}}}
	if err := fw.rc.Call(context.Background(), "App.Submit", &rpc.AppSubmitRequest{Spec: spec}, &sub); err != nil {
		fw.t.Fatal(err)
	}
	var local string
	var home *fedSubcluster
	var node *Agent
	testutil.WaitForNoError(fw.t, 15*time.Second, "the AM running", func() error {
		var st rpc.AppStatusResponse
		if err := fw.rc.Call(context.Background(), "App.Status", &rpc.AppRequest{AppID: sub.AppID}, &st); err != nil {
			return err
		}
		home = fw.subs[st.App.Home]
		if home == nil || len(st.App.Attempts) == 0 {
			return fmt.Errorf("no AM yet: %+v", st.App)
		}
		at := st.App.Attempts[len(st.App.Attempts)-1]
		local = strings.TrimPrefix(at.ContainerID, st.App.Home+".")
		for _, a := range home.agents {
			if a.NodeID() == at.NodeID {
				node = a
			}
		}
		var list rpc.ContainerListResponse
		if err := home.c.Call(context.Background(), "Container.List", &rpc.ContainerListRequest{NodeID: at.NodeID}, &list); err != nil {
			return err
		}
		for _, c := range list.Containers {
			if c.ID == local && c.State == string(scheduler.ContainerRunning) {
				local = c.AppID
				return nil
			}
		}
		return fmt.Errorf("AM container %s not running yet", at.ContainerID)
	})
	var token []byte
	testutil.WaitFor(fw.t, 15*time.Second, func() bool {
		var err error
		token, err = os.ReadFile(filepath.Join(fw.tokens, "token-"+local))
		return err == nil
	})
	am := rpc.NewAMClient(local, 1, strings.TrimSpace(string(token)), node.RPCAddr())
	fw.t.Cleanup(am.Close)
	if _, err := am.Register(context.Background()); err != nil {
		fw.t.Fatal(err)
	}
	return sub.AppID, home, am
}

var spanCore = scheduler.Resources{MemoryMB: 256, Vcores: 1}

// collect calls AM.Allocate with req, then again with what is still wanted, until
// want containers were allocated (or the AM saw want completions when
// completions is set); it returns what arrived.
func collect(t testing.TB, am *rpc.AMClient, req rpc.AMAllocateRequest, want int, completions bool) (allocated, completed []rpc.ContainerInfo) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) {
		resp, err := am.Allocate(context.Background(), req, time.Second)
		if err != nil {
			t.Fatal(err)
		}
		req.Releases = nil
		for i := range req.Asks { // counts are what is still wanted
			for _, c := range resp.Allocated {
				if c.AskID == req.Asks[i].AskID && req.Asks[i].Count > 0 {
					req.Asks[i].Count--
				}
			}
		}
		allocated, completed = append(allocated, resp.Allocated...), append(completed, resp.Completed...)
		if !completions && len(allocated) >= want || completions && len(completed) >= want {
			return allocated, completed
		}
	}
	t.Fatalf("after 30 s: %d allocated, %d completed, want %d", len(allocated), len(completed), want)
	return nil, nil
}

// TestAnAppSpansSubclustersThroughItsProxy drives one AM through its
// AMRMProxy in an in-process federation of three sub-clusters: asks
// naming another sub-cluster's nodes are allocated there (IDs carrying
// the sub-cluster, tokens its agents verify: the AM starts one on a
// foreign agent), a release stops one there, the routers' app status
// shows the span, a lost sub-cluster's containers come back to the AM as
// lost, and the app's end finishes every unmanaged AM.
func TestAnAppSpansSubclustersThroughItsProxy(t *testing.T) {
	fw := startFedWorld(t, 3, 2, 4)
	fw.policy("root.default", federation.AMRMLocality, nil)
	app, home, am := fw.submit("root.default")
	if home != fw.subs["sc1"] {
		t.Fatal("the policy's weights put the app's home in sc1")
	}
	// Only the AM's own token gets an unmanaged AM made, and only for an
	// app the routers know.
	for _, tc := range []struct {
		req  rpc.FederationRegisterSpanRequest
		code rpc.Code
	}{
		{rpc.FederationRegisterSpanRequest{Home: "sc1", AppID: am.AppID, Attempt: 1, Token: "v1.forged", Subcluster: "sc2"}, rpc.CodePermissionDenied},
		{rpc.FederationRegisterSpanRequest{Home: "sc1", AppID: am.AppID, Attempt: 2, Token: am.Token, Subcluster: "sc2"}, rpc.CodePermissionDenied}, // another attempt's token
		{rpc.FederationRegisterSpanRequest{Home: "sc1", AppID: "app-999", Attempt: 1, Token: am.Token, Subcluster: "sc2"}, rpc.CodeNotFound},
		{rpc.FederationRegisterSpanRequest{Home: "sc1", AppID: am.AppID, Attempt: 1, Token: am.Token, Subcluster: "sc1"}, rpc.CodeBadRequest},
	} {
		err := fw.rc.Call(context.Background(), "Federation.RegisterSpan", &tc.req, &rpc.FederationRegisterSpanResponse{})
		if rpc.ErrorCode(err) != tc.code {
			t.Fatalf("RegisterSpan %+v: %v, want %s", tc.req, err, tc.code)
		}
	}
	ask := scheduler.Ask{AskID: 1, Count: 4, Resources: spanCore, ExecutionType: scheduler.Guaranteed,
		Locality: scheduler.Locality{Nodes: []string{"sc2-n1", "sc2-n2", "sc3-n1"}}}
	counters := scheduler.Counters{"maps.data_local": 1, "maps.off_rack": 2}
	got, _ := collect(t, am, rpc.AMAllocateRequest{Asks: []scheduler.Ask{ask}, Counters: counters}, 4, false)
	by := map[string]int{}
	for _, c := range got {
		sc, _, _ := strings.Cut(c.ID, ".")
		by[sc]++
		if !strings.HasPrefix(c.NodeID, sc+"-") || c.Token == "" || c.AppID != app {
			t.Fatalf("container %+v: want an ID carrying its node's sub-cluster, a token, the app's federation ID %s", c, app)
		}
	}
	// sc2's two nodes score 4, sc3's one 2: 4 → 2.67 / 1.33 → 3 / 1.
	if by["sc2"] != 3 || by["sc3"] != 1 {
		t.Fatalf("containers by sub-cluster %v, want 3 in sc2 and 1 in sc3", by)
	}
	var inSC2, inSC3 rpc.ContainerInfo
	for _, c := range got {
		switch {
		case strings.HasPrefix(c.ID, "sc2.") && inSC2.ID == "":
			inSC2 = c
		case strings.HasPrefix(c.ID, "sc3."):
			inSC3 = c
		}
	}
	// The AM starts a container on a foreign agent with the token it got.
	if resp, err := am.StartContainer(context.Background(), inSC3, rpc.LaunchSpec{Command: []string{"sleep", "600"}}); err != nil ||
		resp.State == string(scheduler.ContainerCompleted) {
		t.Fatalf("starting %s on %s: %v %+v", inSC3.ID, inSC3.NodeID, err, resp)
	}
	// The routers show the app across its sub-clusters.
	var st rpc.AppStatusResponse
	if err := fw.rc.Call(context.Background(), "App.Status", &rpc.AppRequest{AppID: app}, &st); err != nil {
		t.Fatal(err)
	}
	if len(st.App.Spans) != 3 || st.App.Spans[0].Subcluster != "sc1" || !st.App.Spans[0].Home {
		t.Fatalf("app status through the router: spans %+v, want sc1 (home), sc2, sc3", st.App.Spans)
	}
	// Its counters are the home's; its parts elsewhere never get any.
	if !st.App.Counters.Equal(counters) {
		t.Fatalf("app status through the router: counters %v, want the home's %v", st.App.Counters, counters)
	}
	// A release goes to the sub-cluster the ID names.
	_, done := collect(t, am, rpc.AMAllocateRequest{Asks: []scheduler.Ask{{AskID: 1, Count: 0, Resources: spanCore,
		ExecutionType: scheduler.Guaranteed}}, Releases: []string{inSC2.ID}}, 1, true)
	if done[0].ID != inSC2.ID || done[0].Reason != string(scheduler.ReasonKilled) {
		t.Fatalf("after releasing %s: completed %+v", inSC2.ID, done)
	}
	// sc3 lost: its running container comes back as lost.
	fw.subs["sc3"].srv.Shutdown()
	for _, a := range fw.subs["sc3"].agents {
		a.Shutdown()
	}
	_, lost := collect(t, am, rpc.AMAllocateRequest{}, 1, true)
	if lost[0].ID != inSC3.ID || lost[0].Reason != string(scheduler.ReasonLost) {
		t.Fatalf("after sc3 was lost: completed %+v, want %s lost", lost, inSC3.ID)
	}
	// The app's end ends its unmanaged AM in sc2, and with it the
	// containers it held there.
	final := scheduler.Counters{"maps.data_local": 1, "maps.off_rack": 3}
	if err := am.FinishWith(context.Background(), rpc.AMFinishRequest{FinalState: string(scheduler.AppFinished), Diagnostics: "done",
		Counters: final}); err != nil {
		t.Fatal(err)
	}
	var part rpc.AppStatusResponse
	if err := fw.subs["sc2"].c.Call(context.Background(), "App.Status", &rpc.AppRequest{AppID: app}, &part); err != nil {
		t.Fatal(err)
	}
	if part.App.State != string(scheduler.AppFinished) || part.App.UnmanagedFor != "sc1" || part.App.Counters != nil {
		t.Fatalf("sc2's part of the finished app: %s (unmanaged for %q) with counters %v, want FINISHED for sc1 with none",
			part.App.State, part.App.UnmanagedFor, part.App.Counters)
	}
	if err := fw.rc.Call(context.Background(), "App.Status", &rpc.AppRequest{AppID: app}, &st); err != nil || !st.App.Counters.Equal(final) {
		t.Fatalf("the finished app through the router: counters %v (%v), want %v", st.App.Counters, err, final)
	}
	testutil.WaitForNoError(t, 10*time.Second, "nothing of the app left live in sc2", func() error {
		var list rpc.ContainerListResponse
		if err := fw.subs["sc2"].c.Call(context.Background(), "Container.List", &rpc.ContainerListRequest{AppID: app}, &list); err != nil {
			return err
		}
		for _, c := range list.Containers {
			if c.State != string(scheduler.ContainerCompleted) {
				return fmt.Errorf("%s is %s", c.ID, c.State)
			}
		}
		return nil
	})
}

// TestKillingASpanningAppEndsItEverywhere kills a spanning app through the
// router: its part in the other sub-cluster ends KILLED and no container
// of it is left running there.
func TestKillingASpanningAppEndsItEverywhere(t *testing.T) {
	fw := startFedWorld(t, 2, 1, 4)
	fw.policy("root.default", federation.AMRMLocality, nil)
	app, _, am := fw.submit("root.default")
	got, _ := collect(t, am, rpc.AMAllocateRequest{Asks: []scheduler.Ask{{AskID: 1, Count: 2, Resources: spanCore,
		ExecutionType: scheduler.Guaranteed, Locality: scheduler.Locality{Nodes: []string{"sc2-n1"}}}}}, 2, false)
	for _, c := range got {
		if _, err := am.StartContainer(context.Background(), c, rpc.LaunchSpec{Command: []string{"sleep", "600"}}); err != nil {
			t.Fatalf("start %s: %v", c.ID, err)
		}
	}
	if err := fw.rc.Call(context.Background(), "App.Kill", &rpc.AppRequest{AppID: app}, &rpc.WriteResponse{}); err != nil {
		t.Fatal(err)
	}
	testutil.WaitForNoError(t, 15*time.Second, "the app's part in sc2 KILLED with nothing running", func() error {
		var st rpc.AppStatusResponse
		if err := fw.subs["sc2"].c.Call(context.Background(), "App.Status", &rpc.AppRequest{AppID: app}, &st); err != nil {
			return err
		}
		if st.App.State != string(scheduler.AppKilled) || st.App.Containers.Running+st.App.Containers.Allocated > 0 {
			return fmt.Errorf("%s with %+v", st.App.State, st.App.Containers)
		}
		return nil
	})
}
