package e2e

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/weft-sched/weft/internal/tlsutil"
	wrpc "github.com/weft-sched/weft/rpc"
	"github.com/weft-sched/weft/scheduler"
)

// The report's rogue agent, on a secure cluster: with an agent
// certificate and no node secret, a new node name registered and received
// the workload keys (HMAC: whoever verified could sign), minted a container
// token a real agent accepted, and ran code on any node, inside any user's
// app; a node of 1e9 MB / 1e6 vcores drew every AM; and fake opportunistic
// records attached to any app without bound (240,000 in 5 s, in Raft).
// Now a new name needs a join token an operator made; a node's capacity is
// capped; what a registered node gets is public keys and a certificate of
// its own key, which mints nothing but opportunistic containers of the AMs
// it runs; and a record needs the token its AM's node minted for it.
func TestARogueAgentMintsNothing(t *testing.T) {
	w := startWorldOn(t, startQuorum(t), 1, nil)
	alice, _ := tenants(t, w)
	var sub struct {
		AppID string `json:"app_id"`
	}
	if err := cliJSON(t, &sub, "app", "submit", "-token", alice, "-queue", "a", "-address", w.any(), "--", "sleep", "30"); err != nil {
		t.Fatal(err)
	}
	victim := sub.AppID
	waitFor(t, 60*time.Second, "alice's app running", func() error {
		var app appInfo
		if err := cliJSON(t, &app, "app", "status", "-address", w.any(), victim); err != nil || app.State != "RUNNING" {
			return fmt.Errorf("%+v %v", app, err)
		}
		return nil
	})

	// The rogue holds an agent certificate: it passes the TLS handshake
	// as an agent, and nothing more.
	tc, err := tlsutil.New(w.sec.file("weft-agent-ca.pem"), w.sec.file("global-agent-weft.pem"), w.sec.file("global-agent-weft-key.pem"), "global")
	if err != nil {
		t.Fatal(err)
	}
	pool := wrpc.NewTLSPool(nil, tc, wrpc.RoleServer)
	defer pool.Shutdown()
	leader := w.rpcAddr(w.waitForLeader("s1", 30*time.Second, ""))
	call := func(method string, args, reply any) error {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		return pool.Call(ctx, leader, method, args, reply)
	}
	secret := func() string {
		b := make([]byte, 32)
		rand.Read(b)
		return hex.EncodeToString(b)
	}
	small := scheduler.Resources{MemoryMB: 4096, Vcores: 4}

	// No join token: no node, no keys.
	var reg wrpc.NodeRegisterResponse
	err = call("Node.Register", &wrpc.NodeRegisterRequest{ID: "rogue", Address: "127.0.0.99:1", Capacity: small, Secret: secret()}, &reg)
	if wrpc.ErrorCode(err) != wrpc.CodePermissionDenied || !strings.Contains(err.Error(), "join token") || len(reg.WorkloadKeys) > 0 {
		t.Fatalf("registering a new node with an agent certificate alone: %v, %d keys", err, len(reg.WorkloadKeys))
	}

	// With a join token (an operator introduced it, and it went rogue): a
	// black-hole capacity is refused; a real one registers, and gets only
	// public keys.
	join, stderr, code := cli(t, "node", "join-token", "create", "-address", w.any())
	if code != 0 {
		t.Fatalf("join-token create: %s", stderr)
	}
	join = strings.TrimSpace(join)
	rogueSecret := secret()
	for _, huge := range []scheduler.Resources{{MemoryMB: 1e9, Vcores: 4}, {MemoryMB: 4096, Vcores: 1e6}} {
		err := call("Node.Register", &wrpc.NodeRegisterRequest{ID: "rogue", Address: "127.0.0.99:1", Capacity: huge, Secret: rogueSecret, JoinToken: join}, &reg)
		if wrpc.ErrorCode(err) != wrpc.CodeBadRequest || !strings.Contains(err.Error(), "max_node_resources") {
			t.Fatalf("registering %s: %v; want a bad request naming max_node_resources", huge, err)
		}
	}
	if err := call("Node.Register", &wrpc.NodeRegisterRequest{ID: "rogue", Address: "127.0.0.99:1", Capacity: small, Secret: rogueSecret, JoinToken: join}, &reg); err != nil {
		t.Fatal(err)
	}
	for _, k := range reg.WorkloadKeys {
		if len(k.PublicKey) != 32 {
			t.Fatalf("key %d is not an Ed25519 public key (%d bytes)", k.ID, len(k.PublicKey))
		}
	}

	// Fake opportunistic records for alice's app, 10,000 a heartbeat for
	// 25 heartbeats: none is recorded, the live ones are to be killed.
	const perBeat, beats = 10000, 25
	for b := 1; b <= beats; b++ {
		reports := make([]wrpc.ContainerReport, perBeat)
		for i := range reports {
			reports[i] = wrpc.ContainerReport{ID: fmt.Sprintf("o-rogue-%d-%d-%d", reg.Epoch, b, i), AppID: victim, Attempt: 1,
				Resources: scheduler.Resources{MemoryMB: 1, Vcores: 1}, ExecutionType: "OPPORTUNISTIC", State: "RUNNING", AllocatedAt: 1, StartedAt: 1, At: 1,
				Token: "forged"}
			if i%2 == 0 {
				reports[i].Token = ""
			}
		}
		var hb wrpc.HeartbeatResponse
		err := call("Node.Heartbeat", &wrpc.HeartbeatRequest{NodeID: "rogue", Epoch: reg.Epoch, Secret: rogueSecret, Seq: uint64(b), Containers: reports}, &hb)
		if err != nil {
			t.Fatalf("heartbeat %d: %v", b, err)
		}
		if len(hb.Kill) != perBeat || len(hb.Recorded) != 0 {
			t.Fatalf("heartbeat %d: %d of %d fake containers to be killed, %d recorded", b, len(hb.Kill), perBeat, len(hb.Recorded))
		}
	}
	for _, c := range w.containers(victim) {
		if strings.HasPrefix(c.ID, "o-rogue-") {
			t.Fatalf("alice's app holds the rogue's container %s", c.ID)
		}
	}
	if rss := procStatus(w.procs[w.waitForLeader("s1", 30*time.Second, "")].cmd.Process.Pid, "VmHWM"); rss > maxServerRSS {
		t.Fatalf("the leader's peak RSS is %d MB", rss>>20)
	}
	var app appInfo
	if err := cliJSON(t, &app, "app", "status", "-address", w.any(), victim); err != nil || app.State != "RUNNING" {
		t.Fatalf("alice's app after the attack: %+v %v", app, err)
	}
}
