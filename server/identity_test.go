package server

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/weft-sched/weft/internal/identity"
	"github.com/weft-sched/weft/internal/testutil"
	wrpc "github.com/weft-sched/weft/rpc"
	"github.com/weft-sched/weft/scheduler"
)

// nodeSecret is a fixed, well-formed node secret for a test node.
func nodeSecret(seed string) string {
	sum := sha256.Sum256([]byte("node secret of " + seed))
	return hex.EncodeToString(sum[:])
}

// fakeNode is an agent played by the test over RPC.
type fakeNode struct {
	c      *testCluster
	id     string
	secret string
	epoch  uint64
	// signer mints opportunistic container tokens as the node's AMRMProxy
	// would, with its own certified key.
	signer *identity.NodeSigner
}

func registerFake(t testing.TB, c *testCluster, s *Server, id string, capacity scheduler.Resources) *fakeNode {
	t.Helper()
	n := &fakeNode{c: c, id: id, secret: nodeSecret(id)}
	key, err := identity.NewNodeKey()
	if err != nil {
		t.Fatal(err)
	}
	pub, _ := identity.NodePublicKey(key)
	var reg wrpc.NodeRegisterResponse
	if err := c.call(s, "Node.Register", &wrpc.NodeRegisterRequest{ID: id, Address: "127.0.0.1:1", Capacity: capacity, Secret: n.secret, MintKey: pub}, &reg); err != nil {
		t.Fatal(err)
	}
	if len(reg.WorkloadKeys) == 0 {
		t.Fatalf("registration of %s brought no workload keys", id)
	}
	n.epoch = reg.Epoch
	pubs := make([]identity.PublicKey, len(reg.WorkloadKeys))
	for i, k := range reg.WorkloadKeys {
		pubs[i] = identity.PublicKey{ID: k.ID, Key: k.PublicKey}
	}
	v, err := identity.NewVerifier(pubs)
	if err != nil {
		t.Fatal(err)
	}
	if n.signer, err = identity.NewNodeSigner(id, key, reg.MintCert, v); err != nil {
		t.Fatalf("registration of %s: certificate: %v", id, err)
	}
	return n
}

// mint signs, as n's AMRMProxy, the tokens of opportunistic containers of
// app attempt 1 on node on, one per report; it fills them in.
func (n *fakeNode) mint(t testing.TB, on string, reports []wrpc.ContainerReport) {
	t.Helper()
	claims := make([]identity.Claims, len(reports))
	for i, r := range reports {
		claims[i] = identity.Claims{Kind: identity.KindContainer, AppID: r.AppID, Attempt: r.Attempt, ContainerID: r.ID, NodeID: on,
			Resources: r.Resources, ExecutionType: scheduler.Opportunistic, Expiry: time.Now().Add(time.Minute).UnixNano()}
	}
	toks, err := n.signer.SignBatch(claims, time.Now().UnixNano())
	if err != nil {
		t.Fatal(err)
	}
	for i := range reports {
		reports[i].Token = toks[i]
	}
}

func (n *fakeNode) heartbeat(t testing.TB, s *Server, req wrpc.HeartbeatRequest) *wrpc.HeartbeatResponse {
	t.Helper()
	req.NodeID, req.Epoch, req.Secret = n.id, n.epoch, n.secret
	var hb wrpc.HeartbeatResponse
	if err := n.c.call(s, "Node.Heartbeat", &req, &hb); err != nil || hb.ReRegister {
		t.Fatalf("heartbeat of %s: %v, re-register %v", n.id, err, hb.ReRegister)
	}
	return &hb
}

// amToken waits for the leader to ask n to launch app's AM and returns
// the AM token it gives.
func (n *fakeNode) amToken(t *testing.T, s *Server, app string) (string, wrpc.ContainerInfo) {
	t.Helper()
	var launch wrpc.AMLaunch
	testutil.WaitFor(t, 10*time.Second, func() bool {
		for _, l := range n.heartbeat(t, s, wrpc.HeartbeatRequest{}).LaunchAMs {
			if l.Container.AppID == app {
				launch = l
				return true
			}
		}
		return false
	})
	return launch.Token, launch.Container
}

func submit(t *testing.T, c *testCluster, s *Server, name string) string {
	t.Helper()
	var resp wrpc.AppSubmitResponse
	if err := c.call(s, "App.Submit", &wrpc.AppSubmitRequest{Spec: testSpec(name)}, &resp); err != nil {
		t.Fatal(err)
	}
	return resp.AppID
}

func mustDeny(t *testing.T, what string, err error, names string) {
	t.Helper()
	if !errors.Is(err, wrpc.ErrPermissionDenied) || !strings.Contains(err.Error(), names) {
		t.Fatalf("%s: %v; want permission denied naming %s", what, err, names)
	}
}

var fourCores = scheduler.Resources{MemoryMB: 4096, Vcores: 4}

// Re-registering, heartbeating for or deregistering node X without X's
// secret is refused through any server, and changes nothing: X keeps its
// epoch, its capacity and its containers.
func TestNodeSecretProtectsARegisteredNode(t *testing.T) {
	c := startThree(t)
	l := c.leader()
	x := registerFake(t, c, c.follower(), "x", fourCores)
	app := submit(t, c, l, "on-x")
	_, amc := x.amToken(t, l, app)

	before := l.State()
	nodeBefore, _ := before.Node("x")
	thief := nodeSecret("thief")
	for _, s := range []*Server{l, c.follower()} {
		var reg wrpc.NodeRegisterResponse
		err := c.call(s, "Node.Register", &wrpc.NodeRegisterRequest{ID: "x", Address: "10.0.0.66:8049",
			Capacity: scheduler.Resources{MemoryMB: 1 << 20, Vcores: 512}, Secret: thief}, &reg)
		mustDeny(t, "re-registration with another secret", err, "node x")
		var hb wrpc.HeartbeatResponse
		err = c.call(s, "Node.Heartbeat", &wrpc.HeartbeatRequest{NodeID: "x", Epoch: x.epoch, Secret: thief,
			Containers: []wrpc.ContainerReport{{ID: amc.ID, State: scheduler.ContainerCompleted, Reason: scheduler.ReasonExited}}}, &hb)
		mustDeny(t, "heartbeat with another secret", err, "node x")
		if hb.ReRegister || len(hb.LaunchAMs) > 0 || len(hb.WorkloadKeys) > 0 {
			t.Fatalf("a refused heartbeat was answered: %+v", hb)
		}
		var wr wrpc.WriteResponse
		err = c.call(s, "Node.Deregister", &wrpc.NodeDeregisterRequest{ID: "x", Epoch: x.epoch, Secret: thief}, &wr)
		mustDeny(t, "deregistration with another secret", err, "node x")
	}
	var reg wrpc.NodeRegisterResponse
	if err := c.call(l, "Node.Register", &wrpc.NodeRegisterRequest{ID: "x", Address: "10.0.0.66:8049", Capacity: fourCores}, &reg); !errors.Is(err, wrpc.ErrBadRequest) {
		t.Fatalf("registration without a secret: %v", err)
	}
	after := l.State()
	nodeAfter, _ := after.Node("x")
	if !reflect.DeepEqual(nodeBefore, nodeAfter) {
		t.Fatalf("node x changed: %+v, now %+v", nodeBefore, nodeAfter)
	}
	if ctr, _ := after.Container(amc.ID); !ctr.State.Live() || ctr.NodeID != "x" {
		t.Fatalf("x's AM container changed: %+v", ctr)
	}

	// The right secret is heard, and registers the node again.
	x.heartbeat(t, l, wrpc.HeartbeatRequest{})
	if err := c.call(c.follower(), "Node.Register", &wrpc.NodeRegisterRequest{ID: "x", Address: "127.0.0.1:1", Capacity: fourCores, Secret: x.secret}, &reg); err != nil || reg.Epoch != x.epoch+1 {
		t.Fatalf("re-registration with the node's own secret: epoch %d, %v", reg.Epoch, err)
	}
}

// An agent that lost its secret gets its node back once an operator resets
// the secret, which is allowed only while the node is DOWN.
func TestNodeSecretReset(t *testing.T) {
	c := startThree(t)
	l := c.leader()
	x := registerFake(t, c, l, "x", fourCores)
	var wr wrpc.WriteResponse
	if err := c.call(l, "Node.ResetSecret", &wrpc.NodeResetSecretRequest{ID: "x"}, &wr); !errors.Is(err, wrpc.ErrConflict) || !strings.Contains(err.Error(), "DOWN") {
		t.Fatalf("reset of a READY node: %v", err)
	}
	if err := c.call(l, "Node.Deregister", &wrpc.NodeDeregisterRequest{ID: "x", Epoch: x.epoch, Secret: x.secret}, &wr); err != nil {
		t.Fatal(err)
	}
	if err := c.call(c.follower(), "Node.ResetSecret", &wrpc.NodeResetSecretRequest{ID: "x"}, &wr); err != nil {
		t.Fatal(err)
	}
	wiped := nodeSecret("the same agent after its data dir was wiped")
	var reg wrpc.NodeRegisterResponse
	if err := c.call(l, "Node.Register", &wrpc.NodeRegisterRequest{ID: "x", Address: "127.0.0.1:1", Capacity: fourCores, Secret: wiped}, &reg); err != nil {
		t.Fatal(err)
	}
	if n, _ := l.State().Node("x"); !identity.NodeSecretMatches(n.SecretHash, wiped) || n.Status != scheduler.NodeReady {
		t.Fatalf("node after reset and registration: %+v", n)
	}
	// The old secret is now the wrong one.
	err := c.call(l, "Node.Register", &wrpc.NodeRegisterRequest{ID: "x", Address: "127.0.0.1:1", Capacity: fourCores, Secret: x.secret}, &reg)
	mustDeny(t, "registration with the old secret", err, "node x")
}

// AM calls are authenticated by the attempt's AM token: another app's
// token, a forged one, or none is refused and changes nothing; container
// tokens in Allocate answers say exactly what was allocated.
func TestAMTokensAuthenticateTheAMProtocol(t *testing.T) {
	c := startThree(t)
	l := c.leader()
	x := registerFake(t, c, l, "x", fourCores)
	appA, appB := submit(t, c, l, "a"), submit(t, c, l, "b")
	tokA, amA := x.amToken(t, l, appA)
	tokB, _ := x.amToken(t, l, appB)

	claims, err := keyringOf(l.State()).Verify(tokA, time.Now().UnixNano())
	if err != nil || claims.Kind != identity.KindAM || claims.AppID != appA || claims.Attempt != 1 || claims.ContainerID != amA.ID || claims.NodeID != "x" {
		t.Fatalf("AM token of %s: %+v, %v", appA, claims, err)
	}
	forgedRing, _ := identity.NewKeyring([]identity.Key{{ID: claims.KeyID, Secret: make([]byte, identity.KeySize)}}, claims.KeyID)
	forged, _ := forgedRing.Sign(*claims)

	var reg wrpc.AMRegisterResponse
	for name, tok := range map[string]string{"none": "", "another app's": tokB, "forged": forged, "garbage": "not-a-token"} {
		err := c.call(l, "AM.Register", &wrpc.AMRegisterRequest{AppID: appA, Attempt: 1, Token: tok}, &reg)
		mustDeny(t, name+" token on AM.Register", err, "app "+appA)
		var wr wrpc.WriteResponse
		err = c.call(c.follower(), "AM.Finish", &wrpc.AMFinishRequest{AppID: appA, Attempt: 1, Token: tok, FinalState: "FAILED"}, &wr)
		mustDeny(t, name+" token on AM.Finish", err, "app "+appA)
		var ar wrpc.AMAllocateResponse
		err = c.call(l, "AM.Allocate", &wrpc.AMAllocateRequest{AppID: appA, Attempt: 1, Token: tok,
			Asks: []scheduler.Ask{{AskID: 1, Count: 1, Resources: scheduler.Resources{MemoryMB: 256, Vcores: 1}}}}, &ar)
		mustDeny(t, name+" token on AM.Allocate", err, "app "+appA)
	}
	if a, _ := l.State().App(appA); a.State != scheduler.AppAccepted || !a.Pending().IsZero() {
		t.Fatalf("refused AM calls changed app %s: %s, pending %s", appA, a.State, a.Pending())
	}

	// Its own token works; the containers it is given carry tokens for
	// exactly them.
	if err := c.call(l, "AM.Register", &wrpc.AMRegisterRequest{AppID: appA, Attempt: 1, Token: tokA}, &reg); err != nil {
		t.Fatal(err)
	}
	ask := scheduler.Ask{AskID: 1, Count: 1, Resources: scheduler.Resources{MemoryMB: 256, Vcores: 1}}
	var got wrpc.ContainerInfo
	testutil.WaitFor(t, 10*time.Second, func() bool {
		var ar wrpc.AMAllocateResponse
		req := &wrpc.AMAllocateRequest{AppID: appA, Attempt: 1, Token: tokA, Asks: []scheduler.Ask{ask}}
		req.MaxWait = 200 * time.Millisecond
		if err := c.call(l, "AM.Allocate", req, &ar); err != nil {
			t.Fatal(err)
		}
		if len(ar.Allocated) > 0 {
			got = ar.Allocated[0]
			return true
		}
		return false
	})
	cc, err := keyringOf(l.State()).Verify(got.Token, time.Now().UnixNano())
	if err != nil || cc.Kind != identity.KindContainer || cc.ContainerID != got.ID || cc.AppID != appA || cc.NodeID != "x" ||
		!identity.SameResources(cc.Resources, ask.Resources) || cc.ExecutionType != scheduler.Guaranteed {
		t.Fatalf("container token of %+v: %+v, %v", got, cc, err)
	}
	// Listings never carry tokens.
	var list wrpc.ContainerListResponse
	if err := c.call(l, "Container.List", &wrpc.ContainerListRequest{AppID: appA}, &list); err != nil {
		t.Fatal(err)
	}
	for _, ci := range list.Containers {
		if ci.Token != "" {
			t.Fatalf("Container.List carries the token of %s", ci.ID)
		}
	}
	var wr wrpc.WriteResponse
	if err := c.call(l, "AM.Finish", &wrpc.AMFinishRequest{AppID: appA, Attempt: 1, Token: tokA, FinalState: "FINISHED"}, &wr); err != nil {
		t.Fatal(err)
	}
	if a, _ := l.State().App(appB); a.State.Terminal() {
		t.Fatalf("app %s ended with %s", appB, appA)
	}
}

// The leader creates one signing key; a rotation adds one that agents
// learn from their next heartbeat, keeps the old one verifying, and AMs
// get renewed tokens from their next Allocate.
func TestWorkloadKeyRotation(t *testing.T) {
	c := startThree(t)
	l := c.leader()
	if keys := l.State().WorkloadKeys(); len(keys) != 1 || keys[0].ID != 1 {
		t.Fatalf("a new cluster has keys %+v", keys)
	}
	x := registerFake(t, c, l, "x", fourCores)
	if hb := x.heartbeat(t, l, wrpc.HeartbeatRequest{WorkloadKeyID: 1}); len(hb.WorkloadKeys) != 0 {
		t.Fatalf("keys sent to a node that has them")
	}
	app := submit(t, c, l, "long")
	tok, _ := x.amToken(t, l, app)
	var reg wrpc.AMRegisterResponse
	if err := c.call(l, "AM.Register", &wrpc.AMRegisterRequest{AppID: app, Attempt: 1, Token: tok}, &reg); err != nil {
		t.Fatal(err)
	}
	var ar wrpc.AMAllocateResponse
	if err := c.call(l, "AM.Allocate", &wrpc.AMAllocateRequest{AppID: app, Attempt: 1, Token: tok}, &ar); err != nil || ar.AMToken != "" {
		t.Fatalf("a fresh token was renewed (%v)", err)
	}

	var rot wrpc.WorkloadKeyRotateResponse
	if err := c.call(c.follower(), "Operator.WorkloadKeyRotate", &wrpc.RequestHeader{}, &rot); err != nil || rot.KeyID != 2 || rot.NumKeys != 2 {
		t.Fatalf("rotation: %+v, %v", rot, err)
	}
	for _, s := range c.servers {
		testutil.WaitFor(t, 5*time.Second, func() bool { return newestKeyID(s.State()) == 2 })
	}
	hb := x.heartbeat(t, l, wrpc.HeartbeatRequest{WorkloadKeyID: 1})
	if len(hb.WorkloadKeys) != 2 || hb.WorkloadKeys[0].ID != 1 || hb.WorkloadKeys[1].ID != 2 {
		t.Fatalf("a node holding key 1 was sent %+v", hb.WorkloadKeys)
	}
	// The old token still works; the answer renews it with the new key.
	if err := c.call(l, "AM.Allocate", &wrpc.AMAllocateRequest{AppID: app, Attempt: 1, Token: tok}, &ar); err != nil || ar.AMToken == "" {
		t.Fatalf("allocate with the old key's token: renewed %q, %v", ar.AMToken, err)
	}
	renewed, err := keyringOf(l.State()).Verify(ar.AMToken, time.Now().UnixNano())
	if err != nil || renewed.KeyID != 2 || renewed.AppID != app || renewed.Kind != identity.KindAM {
		t.Fatalf("renewed token: %+v, %v", renewed, err)
	}
	if err := c.call(l, "AM.Allocate", &wrpc.AMAllocateRequest{AppID: app, Attempt: 1, Token: ar.AMToken}, &ar); err != nil || ar.AMToken != "" {
		t.Fatalf("allocate with the renewed token: renewed again %q, %v", ar.AMToken, err)
	}
}

// A node is told to stop what it runs that the servers do not hold live
// there: a guaranteed container nobody allocated, and one the servers
// completed.
func TestHeartbeatStopsContainersTheServersDoNotHold(t *testing.T) {
	c := startThree(t)
	l := c.leader()
	x := registerFake(t, c, l, "x", fourCores)
	app := submit(t, c, l, "killed")
	_, amc := x.amToken(t, l, app)
	var wr wrpc.WriteResponse
	if err := c.call(l, "App.Kill", &wrpc.AppRequest{AppID: app}, &wr); err != nil {
		t.Fatal(err)
	}
	hb := x.heartbeat(t, l, wrpc.HeartbeatRequest{Containers: []wrpc.ContainerReport{
		{ID: "c-999-0", AppID: app, Attempt: 1, Resources: fourCores, ExecutionType: "GUARANTEED", State: scheduler.ContainerRunning},
		{ID: amc.ID, AppID: app, Attempt: 1, Resources: amc.Resources, ExecutionType: "GUARANTEED", State: scheduler.ContainerRunning},
	}})
	kill := map[string]bool{}
	for _, k := range hb.Kill {
		kill[k.ID] = true
	}
	if !kill["c-999-0"] || !kill[amc.ID] {
		t.Fatalf("kill orders %+v; want c-999-0 (never allocated) and %s (killed before it started)", hb.Kill, amc.ID)
	}
	if _, known := l.State().Container("c-999-0"); known {
		t.Fatalf("a container nobody allocated was recorded")
	}
}
