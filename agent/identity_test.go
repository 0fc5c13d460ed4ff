package agent

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/weft-sched/weft/internal/identity"
	"github.com/weft-sched/weft/internal/testutil"
	"github.com/weft-sched/weft/rpc"
	"github.com/weft-sched/weft/scheduler"
	"github.com/weft-sched/weft/server"
)

// guaranteedContainer asks the leader for one guaranteed container and
// returns it as the AM receives it, with its container token.
func (w *amWorld) guaranteedContainer() rpc.ContainerInfo {
	w.t.Helper()
	ask := scheduler.Ask{AskID: 1, Count: 1, Resources: oneCore, ExecutionType: scheduler.Guaranteed}
	var got rpc.ContainerInfo
	testutil.WaitFor(w.t, 15*time.Second, func() bool {
		r := w.allocate(rpc.AMAllocateRequest{Asks: []scheduler.Ask{ask}})
		if len(r.Allocated) == 0 {
			return false
		}
		got = r.Allocated[0]
		return true
	})
	return got
}

// Container.Start runs a command only with a valid container token for
// exactly that container on that node. A missing, forged, expired,
// other-node or AM token, a container ID or size the caller chose: all
// refused, and no process runs. A token starts its container once.
func TestContainerStartNeedsItsContainerToken(t *testing.T) {
	w := startAMWorld(t, 2, nil)
	ci := w.guaranteedContainer()
	node := w.agent(ci.NodeID)
	var other *Agent
	for _, a := range w.agents {
		if a != node {
			other = a
		}
	}
	marker := filepath.Join(t.TempDir(), "ran")
	launch := rpc.LaunchSpec{Command: []string{"sh", "-c", "echo ran >> " + marker}}
	pool := rpc.NewPool(nil)
	defer pool.Shutdown()
	start := func(a *Agent, c rpc.ContainerInfo, token string) (*rpc.ContainerStartResponse, error) {
		var resp rpc.ContainerStartResponse
		err := pool.Call(context.Background(), a.RPCAddr(), "Container.Start", &rpc.ContainerStartRequest{Token: token, Container: c, Launch: launch}, &resp)
		return &resp, err
	}

	ring := serverKeyring(t, w.srv)
	claims := identity.Claims{Kind: identity.KindContainer, AppID: ci.AppID, Attempt: ci.Attempt, ContainerID: ci.ID, NodeID: ci.NodeID,
		Resources: ci.Resources, ExecutionType: scheduler.Guaranteed, Expiry: time.Now().Add(time.Minute).UnixNano()}
	expired := claims
	expired.Expiry = time.Now().Add(-time.Second).UnixNano()
	expiredTok, err := ring.Sign(expired)
	if err != nil {
		t.Fatal(err)
	}
	forger, _ := identity.NewKeyring([]identity.Key{{ID: ring.ActiveID(), Secret: make([]byte, identity.KeySize)}}, ring.ActiveID())
	forgedTok, _ := forger.Sign(claims)
	chosenID, bigger, elsewhere := ci, ci, ci
	chosenID.ID = "c-1-999"
	bigger.Resources = scheduler.Resources{MemoryMB: 2048, Vcores: 4}
	elsewhere.NodeID = other.NodeID()

	for _, tc := range []struct {
		name  string
		at    *Agent
		c     rpc.ContainerInfo
		token string
		want  string
	}{
		{"no token", node, ci, "", "malformed token"},
		{"the container ID as token", node, ci, ci.ID, "malformed token"},
		{"forged", node, ci, forgedTok, "does not verify"},
		{"expired", node, ci, expiredTok, "expired"},
		{"the AM's token", node, ci, w.am.Token, "not a container token"},
		{"a container ID the caller chose", node, chosenID, ci.Token, "is for container " + ci.ID},
		{"resources the caller chose", node, bigger, ci.Token, "are not the"},
		{"on another node", other, elsewhere, ci.Token, "is for node " + ci.NodeID},
	} {
		_, err := start(tc.at, tc.c, tc.token)
		if !errors.Is(err, rpc.ErrPermissionDenied) || !strings.Contains(err.Error(), tc.want) {
			t.Fatalf("%s: %v; want permission denied saying %q", tc.name, err, tc.want)
		}
		for _, a := range w.agents {
			for _, r := range a.mgr.reports() {
				if r.ID == tc.c.ID {
					t.Fatalf("%s: node %s holds container %s", tc.name, a.NodeID(), r.ID)
				}
			}
		}
	}
	if _, err := os.Stat(marker); !os.IsNotExist(err) {
		t.Fatalf("a refused start ran its command (%v)", err)
	}

	// The real token starts it, once.
	if r, err := start(node, ci, ci.Token); err != nil || r.State != "RUNNING" {
		t.Fatalf("start with its token: %+v, %v", r, err)
	}
	testutil.WaitFor(t, 15*time.Second, func() bool {
		c, ok := w.container(ci.ID)
		return ok && c.State == "COMPLETED" && node.mgr.report(ci.ID).ID == "" // ended, recorded and forgotten
	})
	if _, err := start(node, ci, ci.Token); !errors.Is(err, rpc.ErrPermissionDenied) || !strings.Contains(err.Error(), "started on node") {
		t.Fatalf("a second start with the same token: %v", err)
	}
	if b, _ := os.ReadFile(marker); string(b) != "ran\n" {
		t.Fatalf("the command ran %q, want once", b)
	}
}

// The AMRMProxy and the container endpoints serve an app only with its own
// AM token: another app's AM can neither finish it nor stop, list or read
// its containers, and nothing changes.
func TestAnotherAppsAMTokenIsRefused(t *testing.T) {
	w := startAMWorld(t, 2, nil)
	appB, _, homeB, amB := w.submitStandIn()
	ci := w.guaranteedContainer()
	if r := w.start(ci); r.State != "RUNNING" {
		t.Fatalf("start: %+v", r)
	}
	pool := rpc.NewPool(nil)
	defer pool.Shutdown()
	call := func(addr, method string, args, reply any) error {
		return pool.Call(context.Background(), addr, method, args, reply)
	}

	// B's AM finishing A, through A's proxy and its own.
	for _, proxy := range []*Agent{w.home, homeB} {
		var wr rpc.WriteResponse
		err := call(proxy.RPCAddr(), "AM.Finish", &rpc.AMFinishRequest{AppID: w.app, Attempt: 1, Token: amB.Token, FinalState: "FAILED"}, &wr)
		if !errors.Is(err, rpc.ErrPermissionDenied) {
			t.Fatalf("AM.Finish of %s with %s's token at %s: %v", w.app, appB, proxy.NodeID(), err)
		}
		var ar rpc.AMAllocateResponse
		err = call(proxy.RPCAddr(), "AM.Allocate", &rpc.AMAllocateRequest{AppID: w.app, Attempt: 1, Token: amB.Token, Releases: []string{ci.ID}}, &ar)
		if !errors.Is(err, rpc.ErrPermissionDenied) {
			t.Fatalf("AM.Allocate releasing %s's container with %s's token: %v", w.app, appB, err)
		}
	}
	// B's AM (or no AM) stopping, listing and reading A's container.
	for _, tok := range []string{amB.Token, ""} {
		if err := call(ci.NodeAddress, "Container.Stop", &rpc.ContainerIDRequest{ID: ci.ID, Token: tok}, &struct{}{}); !errors.Is(err, rpc.ErrPermissionDenied) {
			t.Fatalf("Container.Stop of %s's container with token %.10q: %v", w.app, tok, err)
		}
		var logs rpc.ContainerLogsResponse
		if err := call(ci.NodeAddress, "Container.Logs", &rpc.ContainerLogsRequest{ID: ci.ID, Token: tok}, &logs); !errors.Is(err, rpc.ErrPermissionDenied) {
			t.Fatalf("Container.Logs of %s's container with token %.10q: %v", w.app, tok, err)
		}
	}
	var st rpc.ContainerStatusResponse
	if err := call(ci.NodeAddress, "Container.Status", &rpc.ContainerStatusRequest{Token: amB.Token}, &st); err != nil {
		t.Fatal(err)
	}
	for _, r := range st.Containers {
		if r.AppID != appB {
			t.Fatalf("%s's AM was shown container %s of %s", appB, r.ID, r.AppID)
		}
	}
	var app rpc.AppStatusResponse
	if err := w.c.Call(context.Background(), "App.Status", &rpc.AppRequest{AppID: w.app}, &app); err != nil || app.App.State != "RUNNING" {
		t.Fatalf("app %s after the refused calls: %s (%v)", w.app, app.App.State, err)
	}
	if r := w.agent(ci.NodeID).mgr.report(ci.ID); r.State != scheduler.ContainerRunning {
		t.Fatalf("container %s after the refused calls: %+v", ci.ID, r)
	}

	// A's own AM may: read, list, stop.
	if _, err := w.am.ContainerLogs(context.Background(), ci, rpc.ContainerLogsRequest{}); err != nil {
		t.Fatal(err)
	}
	if err := call(ci.NodeAddress, "Container.Status", &rpc.ContainerStatusRequest{Token: w.am.Token, IDs: []string{ci.ID}}, &st); err != nil || len(st.Containers) != 1 {
		t.Fatalf("status of its own container: %+v, %v", st.Containers, err)
	}
	if err := w.am.StopContainer(context.Background(), ci); err != nil {
		t.Fatal(err)
	}
	testutil.WaitFor(t, 10*time.Second, func() bool {
		r := w.agent(ci.NodeID).mgr.report(ci.ID)
		return r.ID == "" || r.State == scheduler.ContainerCompleted
	})
}

// A key rotation reaches agents with their heartbeats and AMs with their
// next Allocate: containers allocated after it (by the leader or by an
// AMRMProxy) carry tokens of the new key and start, even on a node that
// has not heard of the key yet (it waits for its next heartbeat), and the
// AM's old token keeps working until it expires.
func TestKeyRotationReachesAgentsAndAMs(t *testing.T) {
	w := startAMWorld(t, 2, nil)
	w.waitList(2)
	old := w.am.Token
	var rot rpc.WorkloadKeyRotateResponse
	if err := w.c.Call(context.Background(), "Operator.WorkloadKeyRotate", &rpc.RequestHeader{}, &rot); err != nil || rot.KeyID != 2 {
		t.Fatalf("rotation: %+v, %v", rot, err)
	}
	keyOf := func(a *Agent, tok string) uint32 {
		t.Helper()
		ring, _ := a.keys.current()
		c, err := ring.Verify(tok, time.Now().UnixNano())
		if err != nil {
			t.Fatalf("token does not verify on %s: %v", a.NodeID(), err)
		}
		return c.KeyID
	}
	// A container the leader allocates now has a token of key 2; its node
	// starts it whether or not its heartbeat brought key 2 yet.
	ci := w.guaranteedContainer()
	if r := w.start(ci); r.State != "RUNNING" {
		t.Fatalf("start of a container with a new key's token: %+v", r)
	}
	for _, a := range w.agents {
		testutil.WaitFor(t, 10*time.Second, func() bool { return a.keys.newestID() == 2 })
	}
	if k := keyOf(w.agent(ci.NodeID), ci.Token); k != 2 {
		t.Fatalf("container token of key %d after the rotation", k)
	}
	// The AM's next answer renews its token.
	w.allocate(rpc.AMAllocateRequest{})
	if w.am.Token == old || keyOf(w.home, w.am.Token) != 2 {
		t.Fatalf("the AM's token was not renewed with key 2")
	}
	// The proxy signs with key 2 too.
	opp := w.allocate(rpc.AMAllocateRequest{Asks: []scheduler.Ask{oppAsk(7, 1, true)}}).Allocated
	if len(opp) != 1 || keyOf(w.home, opp[0].Token) != 2 {
		t.Fatalf("opportunistic allocation after the rotation: %+v", opp)
	}
	if r := w.start(opp[0]); r.State != "RUNNING" {
		t.Fatalf("start of a proxy-allocated container: %+v", r)
	}
	// The old token still works until it expires.
	stale := rpc.NewAMClient(w.app, 1, old, w.home.RPCAddr())
	defer stale.Close()
	if _, err := stale.Allocate(context.Background(), rpc.AMAllocateRequest{}, 100*time.Millisecond); err != nil {
		t.Fatalf("the AM's token of key 1 after the rotation: %v", err)
	}
}

// An agent keeps its node secret across restarts; one whose data dir was
// wiped cannot register under its old name until an operator resets the
// DOWN node's secret, and then registers with its new one.
func TestNodeSecretSurvivesRestartsAndAWipedDirNeedsAReset(t *testing.T) {
	srv, agents, c := cluster(t, 1)
	first := agents[0]
	cfg := *first.config
	secretFile := filepath.Join(cfg.DataDir, nodeSecretFile)
	fi, err := os.Stat(secretFile)
	if err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("node secret file: %v, mode %v", err, fi.Mode())
	}
	kept, _ := os.ReadFile(secretFile)

	// A restart on the same data dir registers at once, with the same
	// secret. It restarts on the same ports, as an agent does: one name
	// gossiping from a new address while the old is still alive is a name
	// conflict, which serf (v0.10.2) answers reading the member outside
	// its lock, a data race of serf's that -race reports.
	rpcPort, err := strconv.Atoi(first.RPCAddr()[strings.LastIndex(first.RPCAddr(), ":")+1:])
	if err != nil {
		t.Fatal(err)
	}
	serfPort := int(first.serf.LocalMember().Port)
	first.Shutdown()
	cfg.RPCPort, cfg.SerfPort = rpcPort, serfPort
	restarted, err := New(&cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { restarted.Shutdown() })
	testutil.WaitFor(t, 15*time.Second, func() bool { return restarted.Epoch() == 2 })
	if again, _ := os.ReadFile(secretFile); string(again) != string(kept) {
		t.Fatalf("the restart changed the node secret")
	}

	// It leaves (DOWN at once); the same node comes back on a wiped disk.
	if err := restarted.Leave(); err != nil {
		t.Fatal(err)
	}
	wiped := cfg
	wiped.DataDir = t.TempDir()
	wiped.RPCPort, wiped.SerfPort = -1, -1 // the left agent still runs; a left name may move
	back, err := New(&wiped)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { back.Shutdown() })
	var reg rpc.NodeRegisterResponse
	err = c.Call(context.Background(), "Node.Register", &rpc.NodeRegisterRequest{ID: cfg.NodeID, Address: back.RPCAddr(),
		Capacity: cfg.Resources, Secret: back.secret}, &reg)
	if !errors.Is(err, rpc.ErrPermissionDenied) || !strings.Contains(err.Error(), "reset-secret "+cfg.NodeID) {
		t.Fatalf("registration with the wiped agent's secret: %v", err)
	}
	if n, _ := srv.State().Node(cfg.NodeID); n.Epoch != 2 || n.Status != scheduler.NodeDown {
		t.Fatalf("node after the refused registrations: epoch %d, %s", n.Epoch, n.Status)
	}
	var wr rpc.WriteResponse
	if err := c.Call(context.Background(), "Node.ResetSecret", &rpc.NodeResetSecretRequest{ID: cfg.NodeID}, &wr); err != nil {
		t.Fatal(err)
	}
	testutil.WaitFor(t, 15*time.Second, func() bool { return back.Epoch() == 3 })
	if n, _ := srv.State().Node(cfg.NodeID); !identity.NodeSecretMatches(n.SecretHash, back.secret) || n.Status != scheduler.NodeReady {
		t.Fatalf("node after the reset: %+v", n)
	}
}

// serverKeyring is the servers' signing keyring (agents hold only public
// keys): what a test signs with to play the servers.
func serverKeyring(t testing.TB, srv *server.Server) *identity.Keyring {
	t.Helper()
	keys := srv.State().WorkloadKeys()
	ks := make([]identity.Key, len(keys))
	for i, k := range keys {
		ks[i] = identity.Key{ID: k.ID, Secret: k.Secret}
	}
	r, err := identity.NewKeyring(ks, keys[len(keys)-1].ID)
	if err != nil {
		t.Fatal(err)
	}
	return r
}
