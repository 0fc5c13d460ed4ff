package server

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/weft-sched/weft/internal/identity"
	"github.com/weft-sched/weft/internal/testutil"
	wrpc "github.com/weft-sched/weft/rpc"
	"github.com/weft-sched/weft/scheduler"
)

// What an agent certificate alone can no longer do: register a node the
// servers do not know (with ACLs on, that needs a node-join token an
// operator made), declare a capacity past max_node_resources, or take a
// name whose secret an operator reset without a token. A join token works
// for any name until it expires, or for the one name it was made for.
func TestNewNodesNeedAJoinToken(t *testing.T) {
	c := newTestCluster(t)
	c.acl = true
	l := c.start("s1", 1)
	c.waitForLeader()
	var boot wrpc.ACLTokenResponse
	testutil.WaitForNoError(t, 10*time.Second, "ACL bootstrap", func() error {
		return c.call(l, "ACL.Bootstrap", &wrpc.ACLBootstrapRequest{}, &boot)
	})
	mgmt := aclClient{c: c, secret: boot.Token.SecretID}
	anon := aclClient{c: c}
	join := func(node string, ttl time.Duration) string {
		t.Helper()
		var resp wrpc.JoinTokenCreateResponse
		if err := mgmt.call(l, "Node.JoinTokenCreate", &wrpc.JoinTokenCreateRequest{Node: node, TTL: ttl}, &resp); err != nil {
			t.Fatal(err)
		}
		return resp.Token
	}
	register := func(id, token string, capacity scheduler.Resources) error {
		var reg wrpc.NodeRegisterResponse
		return c.call(l, "Node.Register", &wrpc.NodeRegisterRequest{ID: id, Address: "127.0.0.1:1", Capacity: capacity,
			Secret: nodeSecret(id), JoinToken: token}, &reg)
	}
	small := scheduler.Resources{MemoryMB: 4096, Vcores: 4}

	// Making a join token needs node:write.
	if err := anon.call(l, "Node.JoinTokenCreate", &wrpc.JoinTokenCreateRequest{}, &wrpc.JoinTokenCreateResponse{}); !errors.Is(err, wrpc.ErrPermissionDenied) {
		t.Fatalf("join token without a token: %v", err)
	}
	for _, ttl := range []time.Duration{time.Second, 25 * time.Hour} {
		err := mgmt.call(l, "Node.JoinTokenCreate", &wrpc.JoinTokenCreateRequest{TTL: ttl}, &wrpc.JoinTokenCreateResponse{})
		if !errors.Is(err, wrpc.ErrBadRequest) || !strings.Contains(err.Error(), "ttl") {
			t.Fatalf("ttl %s: %v", ttl, err)
		}
	}

	any := join("", time.Hour)
	onlyB := join("b", time.Hour)
	ring := keyringOf(l.State())
	expired, _ := ring.Sign(identity.Claims{Kind: identity.KindJoin, Expiry: time.Now().Add(-time.Second).UnixNano()})
	amLike, _ := ring.Sign(identity.Claims{Kind: identity.KindAM, AppID: "app-1", Attempt: 1, ExecutionType: scheduler.Guaranteed,
		Expiry: time.Now().Add(time.Hour).UnixNano()})
	forger, _ := identity.NewKeyring([]identity.Key{{ID: ring.ActiveID(), Secret: make([]byte, identity.KeySize)}}, ring.ActiveID())
	forged, _ := forger.Sign(identity.Claims{Kind: identity.KindJoin, Expiry: time.Now().Add(time.Hour).UnixNano()})
	for _, tc := range []struct {
		name, id, token, want string
	}{
		{"no join token", "a", "", "needs a join token"},
		{"another node's token", "a", onlyB, "for node b only"},
		{"an expired token", "a", expired, "expired"},
		{"a forged token", "a", forged, "does not verify"},
		{"an AM token", "a", amLike, "not a join token"},
	} {
		err := register(tc.id, tc.token, small)
		if !errors.Is(err, wrpc.ErrPermissionDenied) || !strings.Contains(err.Error(), tc.want) {
			t.Fatalf("%s: %v; want permission denied saying %q", tc.name, err, tc.want)
		}
		if _, ok := l.State().Node(tc.id); ok {
			t.Fatalf("%s: node %s registered", tc.name, tc.id)
		}
	}
	// Capacity past max_node_resources is refused, naming it.
	for _, huge := range []scheduler.Resources{{MemoryMB: 1e9, Vcores: 4}, {MemoryMB: 4096, Vcores: 1e6}, small.With("gpu", 1e6)} {
		if err := register("a", any, huge); !errors.Is(err, wrpc.ErrBadRequest) || !strings.Contains(err.Error(), "max_node_resources") {
			t.Fatalf("capacity %s: %v; want a bad request naming max_node_resources", huge, err)
		}
	}
	if err := register("a", any, small); err != nil {
		t.Fatalf("with a join token: %v", err)
	}
	if err := register("c", any, small); err != nil {
		t.Fatalf("the same join token for another node: %v", err)
	}
	if err := register("b", onlyB, small); err != nil {
		t.Fatalf("with b's own token: %v", err)
	}
	// A known node re-registers with its secret alone.
	if err := register("a", "", small); err != nil {
		t.Fatalf("re-registration of a known node: %v", err)
	}
	// A node whose secret an operator reset needs a join token again:
	// otherwise anyone with an agent certificate could take its name.
	var wr wrpc.WriteResponse
	a, _ := l.State().Node("a")
	if err := c.call(l, "Node.Deregister", &wrpc.NodeDeregisterRequest{ID: "a", Epoch: a.Epoch, Secret: nodeSecret("a")}, &wr); err != nil {
		t.Fatal(err)
	}
	if err := mgmt.call(l, "Node.ResetSecret", &wrpc.NodeResetSecretRequest{ID: "a"}, &wr); err != nil {
		t.Fatal(err)
	}
	if err := register("a", "", small); !errors.Is(err, wrpc.ErrPermissionDenied) {
		t.Fatalf("taking a reset node's name without a join token: %v", err)
	}
	if err := register("a", any, small); err != nil {
		t.Fatalf("taking a reset node's name with a join token: %v", err)
	}
}

// Agents are given only the public halves of the servers' keys, and a
// certificate of their own key; what a node mints says so.
func TestAgentsGetPublicKeysAndACertificate(t *testing.T) {
	c := newTestCluster(t)
	l := c.start("s1", 1)
	c.waitForLeader()
	n := registerFake(t, c, l, "n1", fourCores)
	var reg wrpc.NodeRegisterResponse
	if err := c.call(l, "Node.Register", &wrpc.NodeRegisterRequest{ID: "n2", Address: "127.0.0.1:1", Capacity: fourCores,
		Secret: nodeSecret("n2")}, &reg); err != nil {
		t.Fatal(err)
	}
	if reg.MintCert != "" {
		t.Fatal("a node that registered no key was given a certificate")
	}
	for _, k := range reg.WorkloadKeys {
		for _, sk := range l.State().WorkloadKeys() {
			if string(k.PublicKey) == string(sk.Secret) {
				t.Fatalf("an agent was given the secret of key %d", k.ID)
			}
		}
	}
	// The heartbeat renews a certificate past half its life, and only then.
	hb := n.heartbeat(t, l, wrpc.HeartbeatRequest{WorkloadKeyID: newestKeyID(l.State()), MintCertExpiry: n.signer.Expiry()})
	if hb.MintCert != "" {
		t.Fatal("a fresh certificate was renewed")
	}
	hb = n.heartbeat(t, l, wrpc.HeartbeatRequest{WorkloadKeyID: newestKeyID(l.State()),
		MintCertExpiry: time.Now().Add(identity.NodeCertLifetime / 4).UnixNano()})
	if hb.MintCert == "" {
		t.Fatal("a certificate past half its life was not renewed")
	}
}

// Opportunistic container records an agent reports are recorded only with
// the container token the AMRMProxy of the app attempt's AM node minted
// for that very container on the reporting node: made-up records, records
// for another app's AM, tokens of another container or node, and forged
// certificates are refused (live ones are killed) and counted; a heartbeat
// adds at most maxNewRecordsPerHeartbeat, and the rest are recorded from
// later heartbeats.
func TestReportedRecordsNeedTheirAMNodesToken(t *testing.T) {
	c := newTestCluster(t)
	l := c.start("s1", 1)
	c.waitForLeader()
	am := registerFake(t, c, l, "am", scheduler.Resources{MemoryMB: 1024, Vcores: 1}) // only the AM fits here
	app := submit(t, c, l, "victim")
	waitAMPlaced(t, l, app)
	if n := amNode(t, l, app, []*fakeNode{am}); n != am {
		t.Fatal("the AM is not on node am")
	}
	rogue := registerFake(t, c, l, "rogue", fourCores)
	res := scheduler.Resources{MemoryMB: 64, Vcores: 1}
	report := func(id string) wrpc.ContainerReport {
		return wrpc.ContainerReport{ID: id, AppID: app, Attempt: 1, AskID: 1, Resources: res,
			ExecutionType: string(scheduler.Opportunistic), State: scheduler.ContainerRunning, AllocatedAt: 1, StartedAt: 1, At: 1}
	}
	beat := func(n *fakeNode, reports []wrpc.ContainerReport) *wrpc.HeartbeatResponse {
		t.Helper()
		return n.heartbeat(t, l, wrpc.HeartbeatRequest{Containers: reports})
	}
	killed := func(hb *wrpc.HeartbeatResponse, id string) bool {
		for _, k := range hb.Kill {
			if k.ID == id {
				return true
			}
		}
		return false
	}

	noToken := report("o-rogue-1-1")
	selfMinted := []wrpc.ContainerReport{report("o-rogue-1-2")}
	rogue.mint(t, "rogue", selfMinted) // the rogue node does not run the app's AM
	otherNode := []wrpc.ContainerReport{report("o-am-1-3")}
	am.mint(t, "am", otherNode) // minted for node am, reported by rogue
	stolen := []wrpc.ContainerReport{report("o-am-1-4")}
	am.mint(t, "rogue", stolen)
	stolen[0].ID = "o-am-1-5" // another container's token
	wrongPrefix := []wrpc.ContainerReport{report("o-rogue-1-6")}
	am.mint(t, "rogue", wrongPrefix) // the ID names a node that did not mint it
	// A certificate the rogue made itself, with keys that are not the servers'.
	fakeRing, _ := identity.NewKeyring([]identity.Key{{ID: 1, Secret: make([]byte, identity.KeySize)}}, 1)
	key, _ := identity.NewNodeKey()
	pub, _ := identity.NodePublicKey(key)
	cert, _ := fakeRing.CertifyNode("am", pub, time.Now().Add(time.Hour).UnixNano())
	forger, err := identity.NewNodeSigner("am", key, cert, fakeRing.Verifier)
	if err != nil {
		t.Fatal(err)
	}
	forged := []wrpc.ContainerReport{report("o-am-1-7")}
	forgedClaims := []identity.Claims{{Kind: identity.KindContainer, AppID: app, Attempt: 1, ContainerID: forged[0].ID, NodeID: "rogue",
		Resources: res, ExecutionType: scheduler.Opportunistic, Expiry: time.Now().Add(time.Minute).UnixNano()}}
	toks, _ := forger.SignBatch(forgedClaims, time.Now().UnixNano())
	forged[0].Token = toks[0]

	bad := []wrpc.ContainerReport{noToken, selfMinted[0], otherNode[0], stolen[0], wrongPrefix[0], forged[0]}
	hb := beat(rogue, bad)
	for _, r := range bad {
		if _, ok := l.State().Container(r.ID); ok {
			t.Fatalf("container %s recorded from the rogue node", r.ID)
		}
		if !killed(hb, r.ID) {
			t.Fatalf("container %s not in the rogue node's kill orders %+v", r.ID, hb.Kill)
		}
	}

	// What the AM node's proxy minted for the rogue node is recorded, and
	// acknowledged so the agent stops sending its token; a flood of them
	// is recorded a heartbeat's share at a time.
	const flood = maxNewRecordsPerHeartbeat + 44
	honest := make([]wrpc.ContainerReport, flood)
	for i := range honest {
		honest[i] = report(fmt.Sprintf("o-am-1-%d", 100+i))
		honest[i].State, honest[i].StartedAt = scheduler.ContainerQueued, 0
	}
	am.mint(t, "rogue", honest)
	hb = beat(rogue, honest)
	if len(hb.Recorded) != maxNewRecordsPerHeartbeat || len(hb.Kill) != 0 {
		t.Fatalf("first heartbeat of %d: %d recorded, %d killed; want %d, 0", flood, len(hb.Recorded), len(hb.Kill), maxNewRecordsPerHeartbeat)
	}
	hb = beat(rogue, honest)
	if len(hb.Recorded) != flood {
		t.Fatalf("second heartbeat: %d acknowledged, want all %d", len(hb.Recorded), flood)
	}
	for _, r := range honest {
		if got, ok := l.State().Container(r.ID); !ok || got.NodeID != "rogue" {
			t.Fatalf("container %s: %+v, %v", r.ID, got, ok)
		}
	}
}
