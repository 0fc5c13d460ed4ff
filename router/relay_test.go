package router

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"maps"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/weft-sched/weft/internal/config"
	"github.com/weft-sched/weft/internal/testutil"
	wrpc "github.com/weft-sched/weft/rpc"
	"github.com/weft-sched/weft/scheduler"
	"github.com/weft-sched/weft/scheduler/federation"
	"github.com/weft-sched/weft/server"
)

// registerNode registers one more node of vcores in a sub-cluster.
func (c *routers) registerNode(srv *server.Server, id string, vcores int64) {
	c.t.Helper()
	sum := sha256.Sum256([]byte("node " + id + " of " + srv.RPCAddr()))
	var reg wrpc.NodeRegisterResponse
	if err := c.call2(srv.RPCAddr(), "Node.Register", &wrpc.NodeRegisterRequest{ID: id, Address: "127.0.0.1:1",
		Capacity: scheduler.Resources{MemoryMB: vcores * 1024, Vcores: vcores}, Secret: hex.EncodeToString(sum[:])}, &reg); err != nil {
		c.t.Fatal(err)
	}
}

// TestClientAPIThroughTheRouters: the rest of the client API answered by a
// router as by a server. A queue configuration applied through a router
// reaches every sub-cluster, a bad one none; queue list and status merge
// the sub-clusters, naming each; containers come named SUBCLUSTER.ID
// under the routers' app IDs, from the home for one app; a node is found
// by its own ID when one sub-cluster has it, refused as ambiguous when
// several do, and found as SUBCLUSTER.NODE always; status totals the
// sub-clusters; the routers' own members, Raft and peers answer.
func TestClientAPIThroughTheRouters(t *testing.T) {
	c := newRouters(t)
	r := c.start("r1", 1)
	c.leader()
	sc1 := subcluster(t, c, "sc1", r, 8, "")
	sc2 := subcluster(t, c, "sc2", r, 4, "")
	c.registerNode(sc1, "shared", 2)
	c.registerNode(sc2, "shared", 2)

	qc, err := config.ParseQueueConfig("queues.hcl", []byte(`queue "root" {
  queue "default" {}
  queue "batch" { weight = 2 }
}`))
	if err != nil {
		t.Fatal(err)
	}
	var applied wrpc.QueueApplyResponse
	if err := c.call(r, "Queue.Apply", &wrpc.QueueApplyRequest{Config: qc}, &applied); err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(applied.Subclusters, []string{"sc1", "sc2"}) {
		t.Fatalf("applied to %v, want both sub-clusters", applied.Subclusters)
	}
	bad, err := config.ParseQueueConfig("bad.hcl", []byte(`queue "root" {
  queue "default" {}
}`))
	if err != nil {
		t.Fatal(err)
	}
	bad.Root.Children[0].Weight = -1
	if err := c.call(r, "Queue.Apply", &wrpc.QueueApplyRequest{Config: bad}, &applied); wrpc.ErrorCode(err) != wrpc.CodeBadRequest || !strings.Contains(err.Error(), "weight") {
		t.Fatalf("a bad configuration through the router: %v, want bad request naming the weight", err)
	}
	for _, srv := range []*server.Server{sc1, sc2} {
		var ql wrpc.QueueListResponse
		if err := c.call2(srv.RPCAddr(), "Queue.List", &wrpc.QueueListRequest{}, &ql); err != nil {
			t.Fatal(err)
		}
		names := make([]string, len(ql.Queues))
		for i, q := range ql.Queues {
			names[i] = q.Name
		}
		if !slices.Contains(names, "root.batch") {
			t.Fatalf("%s has queues %v: the router's apply did not reach it, or the bad one replaced it", srv.RPCAddr(), names)
		}
	}
	var ql wrpc.QueueListResponse
	if err := c.call(r, "Queue.List", &wrpc.QueueListRequest{}, &ql); err != nil {
		t.Fatal(err)
	}
	per := map[string]int{}
	for _, q := range ql.Queues {
		per[q.Subcluster]++
	}
	if per["sc1"] != 3 || per["sc2"] != 3 || len(per) != 2 {
		t.Fatalf("merged queue list by sub-cluster: %v, want root, default and batch of each", per)
	}

	// An app through the router; its containers named SUBCLUSTER.ID
	// under app-fN, from its home.
	var sub wrpc.AppSubmitResponse
	if err := c.call(r, "App.Submit", &wrpc.AppSubmitRequest{Spec: dshell("root.batch")}, &sub); err != nil {
		t.Fatal(err)
	}
	home := r.State().AppHome(sub.AppID).Home
	var ctrs wrpc.ContainerListResponse
	testutil.WaitForNoError(t, 10*time.Second, "the app's AM container listed through the router", func() error {
		if err := c.call(r, "Container.List", &wrpc.ContainerListRequest{AppID: sub.AppID}, &ctrs); err != nil {
			return err
		}
		if len(ctrs.Containers) == 0 {
			return fmt.Errorf("no containers yet")
		}
		return nil
	})
	am := ctrs.Containers[0]
	if !strings.HasPrefix(am.ID, home+".c-") || am.AppID != sub.AppID || !am.IsAM {
		t.Fatalf("the AM container through the router: %+v, want %s.c-… of %s", am, home, sub.AppID)
	}
	var st wrpc.AppStatusResponse
	if err := c.call(r, "App.Status", &wrpc.AppRequest{AppID: sub.AppID}, &st); err != nil || len(st.App.Attempts) != 1 || st.App.Attempts[0].ContainerID != am.ID {
		t.Fatalf("the app's AM attempt through the router: %+v, %v; want its container named %s", st.App.Attempts, err, am.ID)
	}
	var all wrpc.ContainerListResponse
	if err := c.call(r, "Container.List", &wrpc.ContainerListRequest{}, &all); err != nil || len(all.Containers) != len(ctrs.Containers) || all.Containers[0].ID != am.ID {
		t.Fatalf("every container through the router: %+v, %v", all.Containers, err)
	}
	var logs wrpc.ContainerLogsResponse
	local := strings.TrimPrefix(am.ID, home+".")
	if err := c.call(r, "Container.Logs", &wrpc.ContainerLogsRequest{ID: local, Stream: "stdout"}, &logs); wrpc.ErrorCode(err) != wrpc.CodeNotFound || !strings.Contains(err.Error(), "SUBCLUSTER.ID") {
		t.Fatalf("logs of an unscoped container ID: %v, want not found saying how to name it", err)
	}

	var qs wrpc.QueueStatusResponse
	testutil.WaitForNoError(t, 10*time.Second, "root.batch totalled over the sub-clusters", func() error {
		if err := c.call(r, "Queue.Status", &wrpc.QueueStatusRequest{Name: "root.batch"}, &qs); err != nil {
			return err
		}
		if len(qs.Subclusters) != 2 || qs.Queue.RunningApps != 1 || qs.Queue.Used.IsZero() {
			return fmt.Errorf("%d sub-clusters, %d apps, used %s", len(qs.Subclusters), qs.Queue.RunningApps, qs.Queue.Used)
		}
		return nil
	})
	if err := c.call(r, "Queue.Status", &wrpc.QueueStatusRequest{Name: "root.nowhere"}, &qs); wrpc.ErrorCode(err) != wrpc.CodeNotFound {
		t.Fatalf("status of a queue no sub-cluster has: %v", err)
	}

	// Nodes: by their own ID when unique, SUBCLUSTER.NODE always.
	var ns wrpc.NodeStatusResponse
	if err := c.call(r, "Node.Status", &wrpc.NodeStatusRequest{ID: "sc2-n1"}, &ns); err != nil || ns.Node.ID != "sc2-n1" || ns.Node.Subcluster != "sc2" {
		t.Fatalf("a node by its own ID: %+v, %v", ns.Node, err)
	}
	if err := c.call(r, "Node.Status", &wrpc.NodeStatusRequest{ID: "shared"}, &ns); wrpc.ErrorCode(err) != wrpc.CodeConflict || !strings.Contains(err.Error(), "sc1.shared, sc2.shared") {
		t.Fatalf("a node ID two sub-clusters have: %v, want a conflict naming both", err)
	}
	if err := c.call(r, "Node.Status", &wrpc.NodeStatusRequest{ID: "sc2.shared"}, &ns); err != nil || ns.Node.Subcluster != "sc2" {
		t.Fatalf("SUBCLUSTER.NODE: %+v, %v", ns.Node, err)
	}
	var drained wrpc.WriteResponse
	if err := c.call(r, "Node.Drain", &wrpc.NodeDrainRequest{ID: "sc1.shared", Deadline: time.Hour}, &drained); err != nil {
		t.Fatal(err)
	}
	var direct wrpc.NodeStatusResponse
	if err := c.call2(sc1.RPCAddr(), "Node.Status", &wrpc.NodeStatusRequest{ID: "shared"}, &direct); err != nil || direct.Node.Status != string(scheduler.NodeDraining) {
		t.Fatalf("sc1's shared node after a drain through the router: %+v, %v", direct.Node, err)
	}
	if err := c.call2(sc2.RPCAddr(), "Node.Status", &wrpc.NodeStatusRequest{ID: "shared"}, &direct); err != nil || direct.Node.Status == string(scheduler.NodeDraining) {
		t.Fatalf("sc2's shared node must be untouched: %+v, %v", direct.Node, err)
	}

	var cs wrpc.ClusterStatus
	if err := c.call(r, "Status.Cluster", &wrpc.RequestHeader{}, &cs); err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(cs.Subclusters, []string{"sc1", "sc2"}) || cs.Nodes.Ready+cs.Nodes.Draining != 4 || cs.Capacity.Vcores != 8+4+2+2 ||
		cs.Apps["RUNNING"]+cs.Apps["ACCEPTED"] != 1 || cs.Leader != r.RPCAddr() || len(cs.Servers) != 1 {
		t.Fatalf("status through the router: %+v", cs)
	}
	var members wrpc.MembersResponse
	if err := c.call(r, "Status.Members", &wrpc.RequestHeader{}, &members); err != nil || len(members.Members) != 1 || members.Members[0].Role != "router" {
		t.Fatalf("the routers' members: %+v, %v", members.Members, err)
	}
	var peers wrpc.RaftConfigurationResponse
	if err := c.call(r, "Operator.RaftGetConfiguration", &wrpc.RequestHeader{}, &peers); err != nil || len(peers.Servers) != 1 || peers.Servers[0].ID != "r1" {
		t.Fatalf("the routers' Raft peers: %+v, %v", peers.Servers, err)
	}
}

// TestRoutersCheckTokens: with ACLs on, an ACL bootstrapped through a
// router exists, with the same secret, in every sub-cluster; the routers'
// own methods refuse a call without a token and take the management
// token, checked against a sub-cluster; a submission without a token is
// refused before the routers write a mapping; a policy written through a
// router reaches both sub-clusters.
func TestRoutersCheckTokens(t *testing.T) {
	c := newRouters(t)
	c.acl = true
	r := c.start("r1", 1)
	c.leader()
	withACL := func(cfg *server.Config) { cfg.ACLEnabled = true }
	sc1 := subcluster(t, c, "sc1", r, 8, "", withACL)
	sc2 := subcluster(t, c, "sc2", r, 4, "", withACL)

	var pl wrpc.FederationPolicyListResponse
	if err := c.call(r, "Federation.PolicyList", &wrpc.FederationPolicyListRequest{}, &pl); wrpc.ErrorCode(err) != wrpc.CodePermissionDenied {
		t.Fatalf("the routers' own method without a token: %v, want permission denied", err)
	}
	var boot wrpc.ACLTokenResponse
	if err := c.call(r, "ACL.Bootstrap", &wrpc.ACLBootstrapRequest{}, &boot); err != nil {
		t.Fatal(err)
	}
	secret := boot.Token.SecretID
	if secret == "" {
		t.Fatal("bootstrap through the router showed no secret")
	}
	for _, srv := range []*server.Server{sc1, sc2} {
		var self wrpc.ACLTokenResponse
		if err := c.call2(srv.RPCAddr(), "ACL.TokenSelf", &wrpc.RequestHeader{AuthToken: secret}, &self); err != nil || self.Token.AccessorID != boot.Token.AccessorID {
			t.Fatalf("the bootstrap token at %s: %+v, %v", srv.RPCAddr(), self.Token, err)
		}
	}
	if err := c.call(r, "Federation.PolicyList", &wrpc.FederationPolicyListRequest{RequestHeader: wrpc.RequestHeader{AuthToken: secret}}, &pl); err != nil {
		t.Fatalf("the routers' own method with the management token: %v", err)
	}

	// What a submission would write is an app's home; the index also moves
	// with the sub-clusters' heartbeats, which the routers record meanwhile.
	homes := len(r.State().AppHomes())
	var sub wrpc.AppSubmitResponse
	if err := c.call(r, "App.Submit", &wrpc.AppSubmitRequest{Spec: dshell("root.default")}, &sub); wrpc.ErrorCode(err) != wrpc.CodePermissionDenied {
		t.Fatalf("a submission without a token: %v, want permission denied", err)
	}
	if got := len(r.State().AppHomes()); got != homes {
		t.Fatalf("a refused submission recorded an app's home (%d homes, were %d)", got, homes)
	}
	spec := dshell("root.default")
	spec.User = "" // with ACLs on, the token's name
	if err := c.call(r, "App.Submit", &wrpc.AppSubmitRequest{RequestHeader: wrpc.RequestHeader{AuthToken: secret}, Spec: spec}, &sub); err != nil {
		t.Fatalf("a submission with the management token: %v", err)
	}

	var wr wrpc.WriteResponse
	policy := wrpc.ACLPolicy{Name: "readers", Rules: `queue "root" { policy = "read" }`}
	if err := c.call(r, "ACL.PolicyApply", &wrpc.ACLPolicyApplyRequest{RequestHeader: wrpc.RequestHeader{AuthToken: secret}, Policy: policy}, &wr); err != nil {
		t.Fatal(err)
	}
	for _, srv := range []*server.Server{sc1, sc2} {
		var p wrpc.ACLPolicyResponse
		if err := c.call2(srv.RPCAddr(), "ACL.PolicyInfo", &wrpc.ACLPolicyRequest{RequestHeader: wrpc.RequestHeader{AuthToken: secret}, Name: "readers"}, &p); err != nil {
			t.Fatalf("the policy at %s: %v", srv.RPCAddr(), err)
		}
	}
	var tl wrpc.ACLTokenListResponse
	if err := c.call(r, "ACL.TokenList", &wrpc.RequestHeader{AuthToken: secret}, &tl); err != nil || len(tl.Tokens) != 1 {
		t.Fatalf("tokens through the router: %+v, %v", tl.Tokens, err)
	}
}

// TestEveryRouterMethodRefusesNoToken: with ACLs on, every method a router
// serves that asks an ACL capability refuses a caller with no token —
// whether the router answers it itself (checked against a sub-cluster) or
// relays it (checked by the sub-cluster) — and the refusal changes
// nothing.
func TestEveryRouterMethodRefusesNoToken(t *testing.T) {
	c := newRouters(t)
	c.acl = true
	r := c.start("r1", 1)
	c.leader()
	subcluster(t, c, "sc1", r, 8, "", func(cfg *server.Config) { cfg.ACLEnabled = true })
	before := r.State().Index()
	for method, capability := range r.Capabilities() {
		switch capability {
		case wrpc.CapPublic, wrpc.CapFederation, wrpc.CapAgent, wrpc.CapServer, wrpc.CapWorkload:
			continue // certificates and workload tokens: not ACLs
		}
		args := reflect.New(r.rpcServer.RequestType(method)).Interface()
		var reply any
		err := c.call(r, method, args, &reply)
		switch capability {
		case wrpc.CapQueueRead, wrpc.CapQueueSubmit:
			// Per queue, at the sub-cluster, as on a server: a list shows
			// the queues the caller may read (none), an empty name is not
			// found, an empty spec invalid.
			switch wrpc.ErrorCode(err) {
			case wrpc.CodePermissionDenied, wrpc.CodeNotFound, wrpc.CodeBadRequest:
			default:
				if err != nil || !emptyList(reply) {
					t.Errorf("%s (%s) with no token: %v, %v; want a refusal or an empty list", method, capability, reply, err)
				}
			}
		default:
			if wrpc.ErrorCode(err) != wrpc.CodePermissionDenied {
				t.Errorf("%s (%s) with no token: %v, want permission denied", method, capability, err)
			}
		}
	}
	if after := r.State().Index(); after != before {
		t.Fatalf("refused calls changed the routers' state (index %d -> %d)", before, after)
	}
}

// emptyList reports whether a decoded answer lists nothing: every list in
// it is empty.
func emptyList(reply any) bool {
	var values []any
	switch m := reply.(type) {
	case map[string]any:
		for _, v := range m {
			values = append(values, v)
		}
	case map[any]any:
		for _, v := range m {
			values = append(values, v)
		}
	default:
		return false
	}
	for _, v := range values {
		if l, ok := v.([]any); ok && len(l) > 0 {
			return false
		}
	}
	return true
}

// TestBroadcastSaysWhereItApplied: a queue configuration one sub-cluster
// takes and the next refuses (its root.default has an active app, and
// must stay a leaf) is an error naming both — never "nothing changed" —
// and the same refusal from the first sub-cluster asked changes nothing.
func TestBroadcastSaysWhereItApplied(t *testing.T) {
	c := newRouters(t)
	r := c.start("r1", 1)
	c.leader()
	sc1 := subcluster(t, c, "sc1", r, 8, "")
	sc2 := subcluster(t, c, "sc2", r, 8, "")
	var sub wrpc.AppSubmitResponse
	if err := c.call2(sc2.RPCAddr(), "App.Submit", &wrpc.AppSubmitRequest{Spec: dshell("root.default")}, &sub); err != nil {
		t.Fatal(err)
	}
	qc, err := config.ParseQueueConfig("q.hcl", []byte(`queue "root" {
  queue "default" {
    queue "x" {}
  }
}`))
	if err != nil {
		t.Fatal(err)
	}
	var applied wrpc.QueueApplyResponse
	err = c.call(r, "Queue.Apply", &wrpc.QueueApplyRequest{Config: qc}, &applied)
	if wrpc.ErrorCode(err) != wrpc.CodeUnavailable || !strings.Contains(err.Error(), "applied in sc1; sub-cluster sc2 refused it") ||
		!strings.Contains(err.Error(), "active apps") {
		t.Fatalf("a configuration sc2 refuses after sc1 took it: %v", err)
	}
	leaves := func(srv *server.Server) []string {
		var ql wrpc.QueueListResponse
		if err := c.call2(srv.RPCAddr(), "Queue.List", &wrpc.QueueListRequest{}, &ql); err != nil {
			t.Fatal(err)
		}
		var out []string
		for _, q := range ql.Queues {
			if q.Leaf {
				out = append(out, q.Name)
			}
		}
		return out
	}
	if got := leaves(sc1); !slices.Contains(got, "root.default.x") {
		t.Fatalf("sc1's leaves %v: it took the configuration", got)
	}
	if got := leaves(sc2); slices.Contains(got, "root.default.x") {
		t.Fatalf("sc2's leaves %v: it refused the configuration", got)
	}

	// The other way round (sc1 refuses first): the refusal, nothing else.
	if err := c.call2(sc1.RPCAddr(), "App.Submit", &wrpc.AppSubmitRequest{Spec: dshell("root.default.x")}, &sub); err != nil {
		t.Fatal(err)
	}
	back, err := config.ParseQueueConfig("q.hcl", []byte(`queue "root" {
  queue "default" {
    queue "x" {
      queue "y" {}
    }
  }
}`))
	if err != nil {
		t.Fatal(err)
	}
	err = c.call(r, "Queue.Apply", &wrpc.QueueApplyRequest{Config: back}, &applied)
	if wrpc.ErrorCode(err) != wrpc.CodeConflict || strings.Contains(err.Error(), "applied in") {
		t.Fatalf("a configuration the first sub-cluster refuses: %v, want its conflict alone", err)
	}
	if got := leaves(sc2); slices.Contains(got, "root.default.x.y") {
		t.Fatalf("sc2 took a configuration after sc1 refused it: %v", got)
	}
}

// TestSplitView: an AMRMProxy asking the routers how a queue's spanning
// apps split gets the queue's AMRMProxy policy (home when none) and every
// sub-cluster with its weight, headroom figures, racks and servers — what
// federation.Split takes.
func TestSplitView(t *testing.T) {
	c := newRouters(t)
	r := c.start("r1", 1)
	c.leader()
	sc1 := subcluster(t, c, "sc1", r, 8, "")
	subcluster(t, c, "sc2", r, 4, "")
	var view wrpc.FederationSplitViewResponse
	if err := c.call(r, "Federation.SplitView", &wrpc.FederationSplitViewRequest{Queue: "root.default"}, &view); err != nil {
		t.Fatal(err)
	}
	if view.Policy != federation.AMRMHome || len(view.Candidates) != 2 {
		t.Fatalf("no policy: %+v, want home and both sub-clusters", view)
	}
	var applied wrpc.FederationPolicyApplyResponse
	if err := c.call(r, "Federation.PolicyApply", &wrpc.FederationPolicyApplyRequest{Policies: []federation.Policy{
		{Queue: "root.default", Router: federation.Weighted, AMRMProxy: federation.AMRMLocality, Weights: map[string]uint32{"sc1": 3, "sc2": 1}},
	}}, &applied); err != nil {
		t.Fatal(err)
	}
	if err := c.call(r, "Federation.SplitView", &wrpc.FederationSplitViewRequest{Queue: "default"}, &view); err != nil {
		t.Fatal(err)
	}
	if view.Policy != federation.AMRMLocality || len(view.Candidates) != 2 {
		t.Fatalf("with a locality policy: %+v", view)
	}
	one := view.Candidates[0]
	if one.ID != "sc1" || one.Weight != 3 || one.Capacity.Vcores != 8 || one.State != federation.StateRunning ||
		len(one.Servers) != 1 || one.Servers[0] != sc1.RPCAddr() || view.Candidates[1].Weight != 1 {
		t.Fatalf("candidates %+v", view.Candidates)
	}
	cands := make([]federation.Candidate, len(view.Candidates))
	for i, v := range view.Candidates {
		cands[i] = federation.Candidate{ID: v.ID, State: v.State, Weight: v.Weight, Capacity: v.Capacity, Used: v.Used, Pending: v.Pending}
	}
	split := federation.Split(view.Policy, "sc1", []scheduler.Ask{{AskID: 1, Count: 8, ExecutionType: scheduler.Guaranteed,
		Resources: scheduler.Resources{MemoryMB: 1024, Vcores: 1}}}, cands)
	if len(split["sc1"]) != 1 || len(split["sc2"]) != 1 || split["sc1"][0].Count+split["sc2"][0].Count != 8 {
		t.Fatalf("the view split 8 containers as %+v", split)
	}
	if err := c.call(r, "Federation.SplitView", &wrpc.FederationSplitViewRequest{}, &view); wrpc.ErrorCode(err) != wrpc.CodeBadRequest {
		t.Fatalf("no queue: %v", err)
	}
}

// TestResolveNodes: an AMRMProxy learns which sub-cluster holds each node
// it names; a node of no sub-cluster is left out, one two hold goes to the
// first by ID, and too many names are refused.
func TestResolveNodes(t *testing.T) {
	c := newRouters(t)
	r := c.start("r1", 1)
	c.leader()
	sc1 := subcluster(t, c, "sc1", r, 8, "")
	sc2 := subcluster(t, c, "sc2", r, 4, "")
	c.registerNode(sc1, "twin", 2)
	c.registerNode(sc2, "twin", 2)
	var res wrpc.FederationResolveNodesResponse
	if err := c.call(r, "Federation.ResolveNodes", &wrpc.FederationResolveNodesRequest{Nodes: []string{"sc1-n1", "sc2-n1", "twin", "nowhere"}}, &res); err != nil {
		t.Fatal(err)
	}
	want := map[string]string{"sc1-n1": "sc1", "sc2-n1": "sc2", "twin": "sc1"}
	if !maps.Equal(res.Owners, want) || len(res.Unreachable) != 0 {
		t.Fatalf("owners %v (unreachable %v), want %v", res.Owners, res.Unreachable, want)
	}
	many := make([]string, wrpc.MaxResolveNodes+1)
	if err := c.call(r, "Federation.ResolveNodes", &wrpc.FederationResolveNodesRequest{Nodes: many}, &res); wrpc.ErrorCode(err) != wrpc.CodeBadRequest {
		t.Fatalf("%d nodes: %v, want bad request", len(many), err)
	}
}
