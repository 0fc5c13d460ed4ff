package router

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/weft-sched/weft/internal/config"
	"github.com/weft-sched/weft/internal/identity"
	"github.com/weft-sched/weft/internal/testutil"
	"github.com/weft-sched/weft/router/fedstate"
	wrpc "github.com/weft-sched/weft/rpc"
	"github.com/weft-sched/weft/scheduler"
	"github.com/weft-sched/weft/scheduler/federation"
	"github.com/weft-sched/weft/server"
)

// subcluster starts a one-server sub-cluster reporting to router r, with
// one registered node of vcores, and the queue file queues if given.
func subcluster(t testing.TB, c *routers, id string, r *Router, vcores int64, queues string, opts ...func(*server.Config)) *server.Server {
	t.Helper()
	logger, _ := testutil.Logger(t, hclog.Warn)
	cfg := &server.Config{NodeID: id + "-s1", DataDir: t.TempDir(), RPCPort: -1, SerfPort: -1, BootstrapExpect: 1,
		SerfFastGossip: true, RaftConfig: fastRaft(), Logger: logger.Named(id), NodeTTL: time.Hour,
		SubclusterID: id, Routers: []string{r.RPCAddr()}, SubclusterHeartbeat: 100 * time.Millisecond}
	for _, o := range opts {
		o(cfg)
	}
	srv, err := server.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { srv.Shutdown() })
	testutil.WaitFor(t, 10*time.Second, func() bool { return srv.IsLeader() })
	sum := sha256.Sum256([]byte("node of " + id))
	var reg wrpc.NodeRegisterResponse
	testutil.WaitForNoError(t, 10*time.Second, "registering a node", func() error {
		return c.call2(srv.RPCAddr(), "Node.Register", &wrpc.NodeRegisterRequest{ID: id + "-n1", Address: "127.0.0.1:1",
			Capacity: scheduler.Resources{MemoryMB: vcores * 1024, Vcores: vcores}, Secret: hex.EncodeToString(sum[:]),
			JoinToken: joinToken(srv)}, &reg)
	})
	if queues != "" {
		qc, err := config.ParseQueueConfig("queues.hcl", []byte(queues))
		if err != nil {
			t.Fatal(err)
		}
		var resp wrpc.QueueApplyResponse
		if err := c.call2(srv.RPCAddr(), "Queue.Apply", &wrpc.QueueApplyRequest{Config: qc}, &resp); err != nil {
			t.Fatal(err)
		}
	}
	testutil.WaitFor(t, 10*time.Second, func() bool {
		sc := r.State().Subcluster(id)
		return sc != nil && sc.State == federation.StateRunning && sc.Capacity.Vcores == vcores
	})
	return srv
}

func (c *routers) call2(addr, method string, args, reply any) error {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	return c.pool.Call(ctx, addr, method, args, reply)
}

func dshell(queue string) scheduler.AppSpec {
	return scheduler.AppSpec{Name: "hello", Queue: queue, User: "alice", AMType: "dshell",
		DShell: scheduler.DShell{NumContainers: 2, Resources: scheduler.Resources{MemoryMB: 128, Vcores: 1}, Command: []string{"true"}}}
}

// TestSubmitThroughTheRouters: an app submitted to a router lands in the
// sub-cluster its queue's policy ranks first (here the one with most
// headroom), recorded before it is submitted there, under the routers'
// ID; a retry of the same request gets the same app and submits nothing
// more; an app whose queue the first-ranked sub-cluster lacks is refused
// there and lands in the next; App.Status through a router answers from
// the home, under the routers' ID, naming the home; kill goes to the home;
// the app and node lists merge both sub-clusters; and once a sub-cluster
// is LOST its apps are reported unreachable, not lost, and lists name it.
func TestSubmitThroughTheRouters(t *testing.T) {
	c := newRouters(t)
	r := c.start("r1", 1)
	c.leader()
	sc1 := subcluster(t, c, "sc1", r, 8, "")
	sc2 := subcluster(t, c, "sc2", r, 4, `queue "root" {
  queue "default" {}
  queue "special" {}
}`)

	req := &wrpc.AppSubmitRequest{RequestHeader: wrpc.RequestHeader{RequestID: "req-1"}, Spec: dshell("root.default")}
	var sub wrpc.AppSubmitResponse
	if err := c.call(r, "App.Submit", req, &sub); err != nil {
		t.Fatal(err)
	}
	h := r.State().AppHome(sub.AppID)
	if sub.AppID != "app-f1" || h == nil || h.Home != "sc1" || h.State != fedstate.HomeSubmitted || h.LocalID == "" {
		t.Fatalf("submitted %+v, mapping %+v: want app-f1 SUBMITTED at sc1 (most headroom) with its local ID", sub, h)
	}
	// The same request again: the same app, nothing new at the home.
	var again wrpc.AppSubmitResponse
	if err := c.call(r, "App.Submit", req, &again); err != nil || again.AppID != sub.AppID {
		t.Fatalf("a retried submit: %+v, %v", again, err)
	}
	var list wrpc.AppListResponse
	if err := c.call2(sc1.RPCAddr(), "App.List", &wrpc.AppListRequest{}, &list); err != nil || len(list.Apps) != 1 || list.Apps[0].ID != h.LocalID {
		t.Fatalf("sc1 holds %+v (%v), want the one app %s", list.Apps, err, h.LocalID)
	}

	var st wrpc.AppStatusResponse
	if err := c.call(r, "App.Status", &wrpc.AppRequest{AppID: sub.AppID}, &st); err != nil {
		t.Fatal(err)
	}
	if st.App.ID != "app-f1" || st.App.Home != "sc1" || st.App.Queue != "root.default" || st.App.User != "alice" {
		t.Fatalf("status through the router: %+v", st.App)
	}

	// root.special exists only in sc2: sc1 refuses, sc2 takes it.
	var special wrpc.AppSubmitResponse
	if err := c.call(r, "App.Submit", &wrpc.AppSubmitRequest{RequestHeader: wrpc.RequestHeader{RequestID: "req-2"}, Spec: dshell("root.special")}, &special); err != nil {
		t.Fatal(err)
	}
	h2 := r.State().AppHome(special.AppID)
	if h2.Home != "sc2" || len(h2.Tries) != 1 || h2.Tries[0].Subcluster != "sc1" || h2.Tries[0].Outcome != "refused" {
		t.Fatalf("root.special: %+v, want sc2 after sc1 refused", h2)
	}
	if err := c.call2(sc2.RPCAddr(), "App.List", &wrpc.AppListRequest{}, &list); err != nil || len(list.Apps) != 1 || list.Apps[0].Queue != "root.special" {
		t.Fatalf("sc2 holds %+v (%v)", list.Apps, err)
	}

	// An app submitted to sc2 directly, then the merged list through the
	// router: the routers' apps under their IDs, the other as sc2.ID,
	// each with its home; and the other's status through the router.
	var direct wrpc.AppSubmitResponse
	if err := c.call2(sc2.RPCAddr(), "App.Submit", &wrpc.AppSubmitRequest{Spec: dshell("root.default")}, &direct); err != nil {
		t.Fatal(err)
	}
	var merged wrpc.AppListResponse
	if err := c.call(r, "App.List", &wrpc.AppListRequest{}, &merged); err != nil {
		t.Fatal(err)
	}
	got := map[string]string{}
	for _, a := range merged.Apps {
		got[a.ID] = a.Home
	}
	if len(merged.Apps) != 3 || got["app-f1"] != "sc1" || got[special.AppID] != "sc2" || got["sc2."+direct.AppID] != "sc2" || len(merged.Unreachable) != 0 {
		t.Fatalf("merged list %v (unreachable %v)", got, merged.Unreachable)
	}
	// A blocking merged list (an index, as the UI sends) still answers, in
	// full, by its wait.
	var blocked wrpc.AppListResponse
	if err := c.call(r, "App.List", &wrpc.AppListRequest{RequestHeader: wrpc.RequestHeader{MinQueryIndex: merged.Index, MaxWait: 100 * time.Millisecond}}, &blocked); err != nil || len(blocked.Apps) != 3 {
		t.Fatalf("a blocking merged list: %d apps, %v", len(blocked.Apps), err)
	}
	if err := c.call(r, "App.Status", &wrpc.AppRequest{AppID: "sc2." + direct.AppID}, &st); err != nil || st.App.ID != "sc2."+direct.AppID || st.App.Home != "sc2" {
		t.Fatalf("status of a direct app through the router: %+v, %v", st.App, err)
	}

	// Kill through the router, at the home; then a blocking status from
	// the home's index sees it end.
	var killed wrpc.WriteResponse
	if err := c.call(r, "App.Kill", &wrpc.AppRequest{AppID: special.AppID}, &killed); err != nil {
		t.Fatal(err)
	}
	testutil.WaitForNoError(t, 10*time.Second, "the killed app KILLED at its home", func() error {
		var s wrpc.AppStatusResponse
		if err := c.call(r, "App.Status", &wrpc.AppRequest{AppID: special.AppID}, &s); err != nil {
			return err
		}
		if s.App.State != string(scheduler.AppKilled) {
			return fmt.Errorf("state %s", s.App.State)
		}
		return nil
	})

	// Nodes through the router: both sub-clusters' nodes, each naming its
	// sub-cluster.
	var nodes wrpc.NodeListResponse
	if err := c.call(r, "Node.List", &wrpc.NodeListRequest{}, &nodes); err != nil {
		t.Fatal(err)
	}
	if len(nodes.Nodes) != 2 || nodes.Nodes[0].ID != "sc1-n1" || nodes.Nodes[0].Subcluster != "sc1" || nodes.Nodes[1].Subcluster != "sc2" || len(nodes.Unreachable) != 0 {
		t.Fatalf("nodes through the router: %+v (unreachable %v)", nodes.Nodes, nodes.Unreachable)
	}

	// A queue no sub-cluster has: refused everywhere, nothing anywhere.
	err := c.call(r, "App.Submit", &wrpc.AppSubmitRequest{RequestHeader: wrpc.RequestHeader{RequestID: "req-3"}, Spec: dshell("root.nowhere")}, &special)
	if wrpc.ErrorCode(err) != wrpc.CodeBadRequest {
		t.Fatalf("a queue nowhere: %v, want bad request", err)
	}
	if err := c.call(r, "App.Status", &wrpc.AppRequest{AppID: "app-f99"}, &st); wrpc.ErrorCode(err) != wrpc.CodeNotFound {
		t.Fatalf("status of an unknown app: %v", err)
	}

	// sc2 dies: once LOST its apps are reported unreachable, not lost, and
	// the lists name it.
	sc2.Shutdown()
	testutil.WaitFor(t, 20*time.Second, func() bool { return r.State().Subcluster("sc2").State == federation.StateLost })
	if err := c.call(r, "App.Status", &wrpc.AppRequest{AppID: special.AppID}, &st); wrpc.ErrorCode(err) != wrpc.CodeUnreachable || !strings.Contains(err.Error(), "sc2 (LOST)") {
		t.Fatalf("status of an app of a LOST sub-cluster: %v, want unreachable naming sc2 LOST", err)
	}
	if err := c.call(r, "App.List", &wrpc.AppListRequest{}, &merged); err != nil || len(merged.Apps) != 1 || merged.Apps[0].ID != "app-f1" ||
		len(merged.Unreachable) != 1 || merged.Unreachable[0] != "sc2 (LOST)" {
		t.Fatalf("list with sc2 LOST: %+v, unreachable %v, %v", merged.Apps, merged.Unreachable, err)
	}
	if err := c.call(r, "App.Submit", &wrpc.AppSubmitRequest{Spec: scheduler.AppSpec{Queue: "root.default"}}, &special); wrpc.ErrorCode(err) != wrpc.CodeBadRequest {
		t.Fatalf("an invalid spec: %v", err)
	}
}

// TestARetriedSubmissionNeverGoesTwice: a mapping an earlier call made
// (through any router, which may have sent the app before it failed) is in
// doubt: while its home refuses connections the retry waits, whatever the
// home's state, rather than go to the next sub-cluster; once an operator
// decommissions the home (the fence) the retry goes on and lands once.
func TestARetriedSubmissionNeverGoesTwice(t *testing.T) {
	c := newRouters(t)
	r := c.start("r1", 1)
	c.leader()
	subcluster(t, c, "sc1", r, 4, "")
	sc2 := subcluster(t, c, "sc2", r, 8, "") // most headroom: ranked first
	// An earlier call mapped req-9 to sc2 and failed before settling.
	res, _, err := r.apply(context.Background(), fedstate.HomePutType, &fedstate.HomePutRequest{RequestID: "req-9", Queue: "root.default",
		User: "alice", Demand: scheduler.Resources{MemoryMB: 512, Vcores: 2}, Seed: fedstate.Seed("req-9"), Now: 1})
	if err != nil {
		t.Fatal(err)
	}
	if h := res.(*fedstate.AppHome); h.Home != "sc2" || h.State != fedstate.HomeRouting {
		t.Fatalf("the earlier mapping: %+v", h)
	}
	sc2.Shutdown() // connections refused from now on; still RUNNING at the routers for a while
	req := &wrpc.AppSubmitRequest{RequestHeader: wrpc.RequestHeader{RequestID: "req-9"}, Spec: dshell("root.default")}
	var sub wrpc.AppSubmitResponse
	err = c.call(r, "App.Submit", req, &sub)
	if code := wrpc.ErrorCode(err); (code != wrpc.CodeUnavailable && code != wrpc.CodeUnreachable) || !strings.Contains(err.Error(), "never twice") {
		t.Fatalf("the retry while sc2 refuses connections: %v, want a retryable refusal to move on", err)
	}
	if h := r.State().AppHomeByRequest("req-9"); h.Home != "sc2" || len(h.Tries) != 0 {
		t.Fatalf("the retry moved the app on: %+v", h)
	}
	var adm wrpc.FederationSubclusterAdminResponse
	if err := c.call(r, "Federation.SubclusterAdmin", &wrpc.FederationSubclusterAdminRequest{ID: "sc2", Action: "decommission"}, &adm); err != nil {
		t.Fatal(err)
	}
	if err := c.call(r, "App.Submit", req, &sub); err != nil {
		t.Fatalf("the retry once sc2 is decommissioned: %v", err)
	}
	h := r.State().AppHomeByRequest("req-9")
	if h.Home != "sc1" || h.State != fedstate.HomeSubmitted || len(h.Tries) != 1 || h.Tries[0].Outcome != fedstate.OutcomeFenced {
		t.Fatalf("after the fence: %+v, want SUBMITTED at sc1 after sc2 was fenced", h)
	}
}

// joinToken is a node-join token of srv's cluster (what an operator makes
// with `weft node join-token create`), signed with its keys; "" before it
// has any.
func joinToken(srv *server.Server) string {
	keys := srv.State().WorkloadKeys()
	if len(keys) == 0 {
		return ""
	}
	ks := make([]identity.Key, len(keys))
	for i, k := range keys {
		ks[i] = identity.Key{ID: k.ID, Secret: k.Secret}
	}
	ring, err := identity.NewKeyring(ks, keys[len(keys)-1].ID)
	if err != nil {
		return ""
	}
	tok, _ := ring.Sign(identity.Claims{Kind: identity.KindJoin, Expiry: time.Now().Add(time.Hour).UnixNano()})
	return tok
}
