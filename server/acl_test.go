package server

import (
	"errors"
	"time"

	"github.com/weft-sched/weft/internal/testutil"
	"reflect"
	"sort"
	"strings"
	"testing"

	"github.com/weft-sched/weft/fsm"
	wrpc "github.com/weft-sched/weft/rpc"
	"github.com/weft-sched/weft/scheduler"
)

// wantCapabilities is the capability of every method a server serves
// (SPEC §15). A method added without an entry here fails this test: decide
// who may call it, then add it.
var wantCapabilities = map[string]wrpc.Capability{
	"Status.Ping":                   wrpc.CapPublic,
	"Status.Leader":                 wrpc.CapPublic,
	"Status.Peers":                  wrpc.CapPublic,
	"Status.Members":                wrpc.CapOperatorRead,
	"Status.Cluster":                wrpc.CapOperatorRead,
	"Status.Raft":                   wrpc.CapOperatorRead,
	"Status.Self":                   wrpc.CapServer,
	"Status.AppliedIndex":           wrpc.CapServer,
	"Operator.RaftGetConfiguration": wrpc.CapOperatorRead,
	"Operator.RaftRemovePeer":       wrpc.CapOperatorWrite,
	"Operator.Debug":                wrpc.CapOperatorWrite,
	"Operator.WorkloadKeyRotate":    wrpc.CapOperatorWrite,
	"Operator.KeyringList":          wrpc.CapOperatorWrite,
	"Operator.KeyringInstall":       wrpc.CapOperatorWrite,
	"Operator.KeyringUse":           wrpc.CapOperatorWrite,
	"Operator.KeyringRemove":        wrpc.CapOperatorWrite,
	"Gossip.Keyring":                wrpc.CapServer,
	"Queue.Apply":                   wrpc.CapOperatorWrite,
	"Queue.List":                    wrpc.CapQueueRead,
	"Queue.Status":                  wrpc.CapQueueRead,
	"Node.Register":                 wrpc.CapAgent,
	"Node.Heartbeat":                wrpc.CapAgent,
	"Node.HeartbeatBatch":           wrpc.CapServer,
	"Node.Deregister":               wrpc.CapAgent,
	"Node.ResetSecret":              wrpc.CapNodeWrite,
	"Node.JoinTokenCreate":          wrpc.CapNodeWrite,
	"Node.Drain":                    wrpc.CapNodeWrite,
	"Node.List":                     wrpc.CapNodeRead,
	"Node.Which":                    wrpc.CapFederation,
	"Node.Status":                   wrpc.CapNodeRead,
	"App.Submit":                    wrpc.CapQueueSubmit,
	"App.List":                      wrpc.CapQueueRead,
	"App.Status":                    wrpc.CapQueueRead,
	"App.Kill":                      wrpc.CapQueueSubmit,
	"App.SubmitUnmanaged":           wrpc.CapFederation,
	"Container.List":                wrpc.CapQueueRead,
	"Container.Logs":                wrpc.CapQueueRead,
	"AM.Register":                   wrpc.CapWorkload,
	"AM.Allocate":                   wrpc.CapWorkload,
	"AM.Finish":                     wrpc.CapWorkload,
	"AM.Verify":                     wrpc.CapFederation,
	"ACL.Bootstrap":                 wrpc.CapPublic,
	"ACL.TokenCreate":               wrpc.CapACLWrite,
	"ACL.TokenList":                 wrpc.CapACLRead,
	"ACL.TokenInfo":                 wrpc.CapACLRead,
	"ACL.TokenSelf":                 wrpc.CapToken,
	"ACL.Authorize":                 wrpc.CapPublic,
	"ACL.TokenDelete":               wrpc.CapACLWrite,
	"ACL.PolicyApply":               wrpc.CapACLWrite,
	"ACL.PolicyList":                wrpc.CapACLRead,
	"ACL.PolicyInfo":                wrpc.CapACLRead,
	"ACL.PolicyDelete":              wrpc.CapACLWrite,
}

func TestEveryMethodDeclaresItsCapability(t *testing.T) {
	s := &Server{rpcServer: wrpc.NewServer(nil)}
	s.registerEndpoints()
	got := s.rpcServer.Capabilities()
	for name, c := range got {
		want, ok := wantCapabilities[name]
		if !ok {
			t.Errorf("method %s (capability %s) is not in wantCapabilities: decide who may call it and add it", name, c)
		} else if c != want {
			t.Errorf("method %s has capability %s, want %s", name, c, want)
		}
	}
	for name := range wantCapabilities {
		if _, ok := got[name]; !ok {
			t.Errorf("method %s is expected but not registered", name)
		}
	}
}

// aclClient calls servers of a test cluster with one token.
type aclClient struct {
	c      *testCluster
	secret string
}

func (a aclClient) call(s *Server, method string, args any, reply any) error {
	if h, ok := args.(interface{ Header() *wrpc.RequestHeader }); ok {
		h.Header().AuthToken = a.secret
	}
	return a.c.call(s, method, args, reply)
}

func mustBeDenied(t *testing.T, err error, want string) {
	t.Helper()
	if !errors.Is(err, wrpc.ErrPermissionDenied) || !strings.Contains(err.Error(), want) {
		t.Fatalf("got %v, want permission denied mentioning %q", err, want)
	}
}

func TestACLsOnAThreeServerCluster(t *testing.T) {
	c := newTestCluster(t)
	c.acl = true
	s1 := c.start("s1", 3)
	c.start("s2", 3, s1.SerfAddr())
	c.start("s3", 3, s1.SerfAddr())
	c.waitForLeader()
	c.waitForVoters("s1", "s2", "s3")
	l := c.leader()
	var followers []*Server
	for _, s := range c.servers {
		if s != l {
			followers = append(followers, s)
		}
	}
	anon := aclClient{c: c}

	// Without a token nothing but the public methods answers.
	cfg := twoQueueConfig(1)
	mustBeDenied(t, anon.call(l, "Queue.Apply", &wrpc.QueueApplyRequest{Config: cfg}, &wrpc.WriteResponse{}), "Queue.Apply: permission denied: the anonymous caller")
	if got := l.State().TableIndex(fsm.TableQueues); got != 0 {
		t.Fatalf("a refused queue apply changed the queues (index %d)", got)
	}
	mustBeDenied(t, anon.call(l, "Node.List", &wrpc.RequestHeader{}, &wrpc.NodeListResponse{}), "lacks node:read")
	mustBeDenied(t, anon.call(l, "App.Submit", &wrpc.AppSubmitRequest{Spec: testSpec("x")}, &wrpc.AppSubmitResponse{}), "lacks submit on any queue")
	if err := anon.call(l, "Status.Ping", &wrpc.RequestHeader{}, &struct{}{}); err != nil {
		t.Fatalf("ping is public: %v", err)
	}

	// Bootstrap once, through a follower.
	var boot wrpc.ACLTokenResponse
	breq := &wrpc.ACLBootstrapRequest{}
	breq.AccessorID, breq.SecretID = wrpc.NewACLIDs()
	if err := anon.call(followers[0], "ACL.Bootstrap", breq, &boot); err != nil {
		t.Fatal(err)
	}
	if boot.Token.SecretID != breq.SecretID || boot.Token.Type != "management" {
		t.Fatalf("bootstrap answered %+v", boot.Token)
	}
	if err := anon.call(l, "ACL.Bootstrap", &wrpc.ACLBootstrapRequest{}, &wrpc.ACLTokenResponse{}); !errors.Is(err, wrpc.ErrConflict) {
		t.Fatalf("second bootstrap: %v", err)
	}
	mgmt := aclClient{c: c, secret: boot.Token.SecretID}
	if err := mgmt.call(l, "Queue.Apply", &wrpc.QueueApplyRequest{Config: cfg}, &wrpc.WriteResponse{}); err != nil {
		t.Fatal(err)
	}
	if err := mgmt.call(l, "ACL.PolicyApply", &wrpc.ACLPolicyApplyRequest{Policy: wrpc.ACLPolicy{Name: "dev", Rules: `queue "root.default" { policy = "submit" }`}}, &wrpc.WriteResponse{}); err != nil {
		t.Fatal(err)
	}
	var bad wrpc.WriteResponse
	if err := mgmt.call(l, "ACL.PolicyApply", &wrpc.ACLPolicyApplyRequest{Policy: wrpc.ACLPolicy{Name: "x", Rules: "queue \"a\" {\n  policy = \"rw\"\n}\n"}}, &bad); !errors.Is(err, wrpc.ErrBadRequest) || !strings.Contains(err.Error(), "x.hcl:2,12") {
		t.Fatalf("bad policy answered %v", err)
	}

	// A token made through one follower works at once through the other.
	var alice wrpc.ACLTokenResponse
	treq := &wrpc.ACLTokenCreateRequest{Name: "alice", Policies: []string{"dev"}}
	treq.AccessorID, treq.SecretID = wrpc.NewACLIDs()
	if err := mgmt.call(followers[0], "ACL.TokenCreate", treq, &alice); err != nil {
		t.Fatal(err)
	}
	as := aclClient{c: c, secret: alice.Token.SecretID}
	var self wrpc.ACLTokenResponse
	if err := as.call(followers[1], "ACL.TokenSelf", &wrpc.RequestHeader{}, &self); err != nil || self.Token.Name != "alice" || self.Token.AccessorID != treq.AccessorID {
		t.Fatalf("token self: %+v %v", self.Token, err)
	}

	// alice submits to root.default as herself; not as anyone else, not
	// to root.prod.
	var mine wrpc.AppSubmitResponse
	if err := as.call(followers[1], "App.Submit", &wrpc.AppSubmitRequest{Spec: scheduler.AppSpec{Name: "a", DShell: testSpec("").DShell}}, &mine); err != nil {
		t.Fatal(err)
	}
	if a, _ := l.State().App(mine.AppID); a.Spec.User != "alice" {
		t.Fatalf("app user = %q, want the token's name", a.Spec.User)
	}
	impersonate := &wrpc.AppSubmitRequest{Spec: testSpec("b")}
	impersonate.Spec.User = "root"
	if err := as.call(l, "App.Submit", impersonate, &wrpc.AppSubmitResponse{}); !errors.Is(err, wrpc.ErrBadRequest) || !strings.Contains(err.Error(), "token's name (alice)") {
		t.Fatalf("submit as another user: %v", err)
	}
	prod := &wrpc.AppSubmitRequest{Spec: scheduler.AppSpec{Name: "p", Queue: "prod", DShell: testSpec("").DShell}}
	if err := as.call(l, "App.Submit", prod, &wrpc.AppSubmitResponse{}); !errors.Is(err, wrpc.ErrBadRequest) || !strings.Contains(err.Error(), `queue root.prod not found among the queues token "alice" may read`) {
		t.Fatalf("alice submits to root.prod: %v", err)
	}
	mustBeDenied(t, as.call(l, "Queue.Apply", &wrpc.QueueApplyRequest{Config: cfg}, &wrpc.WriteResponse{}), "lacks operator:write")
	mustBeDenied(t, as.call(l, "ACL.TokenList", &wrpc.RequestHeader{}, &wrpc.ACLTokenListResponse{}), "lacks acl:read")

	// Lists show only what alice may read; she kills her own app, not
	// another user's in the same queue.
	var theirs, prodApp wrpc.AppSubmitResponse
	if err := mgmt.call(l, "App.Submit", &wrpc.AppSubmitRequest{Spec: scheduler.AppSpec{Name: "m", DShell: testSpec("").DShell}}, &theirs); err != nil {
		t.Fatal(err)
	}
	prod.AuthToken, prod.RequestID = "", ""
	if err := mgmt.call(l, "App.Submit", prod, &prodApp); err != nil {
		t.Fatal(err)
	}
	var list wrpc.AppListResponse
	if err := as.call(l, "App.List", &wrpc.AppListRequest{}, &list); err != nil {
		t.Fatal(err)
	}
	var ids []string
	for _, a := range list.Apps {
		ids = append(ids, a.ID)
	}
	sort.Strings(ids)
	want := []string{mine.AppID, theirs.AppID}
	sort.Strings(want)
	if !reflect.DeepEqual(ids, want) {
		t.Fatalf("alice lists %v, want only the root.default apps %s, %s", ids, mine.AppID, theirs.AppID)
	}
	if err := as.call(l, "App.Status", &wrpc.AppRequest{AppID: prodApp.AppID}, &wrpc.AppStatusResponse{}); !errors.Is(err, wrpc.ErrNotFound) {
		t.Fatalf("alice asks about an app of root.prod: %v", err)
	}
	mustBeDenied(t, as.call(l, "App.Kill", &wrpc.AppRequest{AppID: theirs.AppID}, &wrpc.WriteResponse{}), "admin on queue root.default (or submit there, for its own apps")
	if a, _ := l.State().App(theirs.AppID); a.State.Terminal() {
		t.Fatal("a refused kill killed the app")
	}
	if err := as.call(l, "App.Kill", &wrpc.AppRequest{AppID: mine.AppID}, &wrpc.WriteResponse{}); err != nil {
		t.Fatalf("alice kills her own app: %v", err)
	}

	// The anonymous policy opens what it says, and no more.
	if err := mgmt.call(l, "ACL.PolicyApply", &wrpc.ACLPolicyApplyRequest{Policy: wrpc.ACLPolicy{Name: "anonymous", Rules: `queue "root.prod" { policy = "read" }`}}, &wrpc.WriteResponse{}); err != nil {
		t.Fatal(err)
	}
	list = wrpc.AppListResponse{}
	if err := anon.call(l, "App.List", &wrpc.AppListRequest{}, &list); err != nil || len(list.Apps) != 1 || list.Apps[0].ID != prodApp.AppID {
		t.Fatalf("anonymous list: %+v %v", list.Apps, err)
	}

	// Expired and deleted tokens are refused.
	short := &wrpc.ACLTokenCreateRequest{Name: "brief", Policies: []string{"dev"}, TTL: 1}
	var brief wrpc.ACLTokenResponse
	if err := mgmt.call(l, "ACL.TokenCreate", short, &brief); err != nil {
		t.Fatal(err)
	}
	mustBeDenied(t, aclClient{c: c, secret: brief.Token.SecretID}.call(l, "App.List", &wrpc.AppListRequest{}, &wrpc.AppListResponse{}), `ACL token "brief" expired`)
	if err := mgmt.call(l, "ACL.TokenDelete", &wrpc.ACLTokenRequest{AccessorID: alice.Token.AccessorID}, &wrpc.WriteResponse{}); err != nil {
		t.Fatal(err)
	}
	mustBeDenied(t, as.call(l, "App.List", &wrpc.AppListRequest{}, &wrpc.AppListResponse{}), "ACL token not found")
	mustBeDenied(t, aclClient{c: c, secret: "not-a-token"}.call(followers[0], "App.List", &wrpc.AppListRequest{}, &wrpc.AppListResponse{}), "ACL token not found")

	var tokens wrpc.ACLTokenListResponse
	if err := mgmt.call(followers[1], "ACL.TokenList", &wrpc.RequestHeader{}, &tokens); err != nil || len(tokens.Tokens) != 2 {
		t.Fatalf("token list: %+v %v", tokens.Tokens, err)
	}
	for _, tok := range tokens.Tokens {
		if tok.SecretID != "" {
			t.Fatal("a token list shows a secret")
		}
	}

	// A server that cannot check a token it does not know (no leader to
	// ask) says so, retryably, rather than call the token unknown.
	last := followers[1]
	for id, srv := range c.servers {
		if srv != last {
			c.stop(id)
		}
	}
	testutil.WaitFor(t, 15*time.Second, func() bool {
		err := aclClient{c: c, secret: "not-a-token"}.call(last, "App.List", &wrpc.AppListRequest{}, &wrpc.AppListResponse{})
		return wrpc.IsRetryable(err) && !errors.Is(err, wrpc.ErrPermissionDenied)
	})
	if err := mgmt.call(last, "ACL.TokenList", &wrpc.RequestHeader{AllowStale: true}, &tokens); err != nil {
		t.Fatalf("a token the server knows still works for a stale read without a leader: %v", err)
	}
}
