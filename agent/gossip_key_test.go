package agent

import (
	"context"
	"encoding/json"
	"os"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/weft-sched/weft/internal/gossip"
	"github.com/weft-sched/weft/internal/testutil"
	"github.com/weft-sched/weft/rpc"
	"github.com/weft-sched/weft/scheduler"
	"github.com/weft-sched/weft/server"
)

// TestAgentsGossipWithTheKey: agents gossip too, so they take the pool's
// key like servers do. An agent with it joins and registers; one without it
// never joins the pool (its packets and streams are refused before they
// are decoded) and so never becomes a node; a key installed through a
// server reaches the agent and its keyring file.
func TestAgentsGossipWithTheKey(t *testing.T) {
	key, err := gossip.GenerateKey()
	if err != nil {
		t.Fatal(err)
	}
	logger, logs := testutil.Logger(t, hclog.Info)
	srv, err := server.New(&server.Config{NodeID: "s1", DataDir: t.TempDir(), RPCPort: -1, SerfPort: -1,
		BootstrapExpect: 1, SerfFastGossip: true, Encrypt: key, Logger: logger.Named("s1")})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { srv.Shutdown() })
	start := func(id, key string) *Agent {
		a, err := New(&Config{NodeID: id, DataDir: t.TempDir(), RPCPort: -1, SerfPort: -1,
			Join: []string{srv.SerfAddr()}, Resources: scheduler.Resources{MemoryMB: 2048, Vcores: 4},
			OpportunisticQueueLength: -1, SerfFastGossip: true, Executable: weftBin, JoinRetryInterval: 100 * time.Millisecond,
			Encrypt: key, AllowRoot: true, Logger: logger.Named(id)})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { a.Shutdown() })
		return a
	}
	good := start("n1", key)
	testutil.WaitFor(t, 15*time.Second, func() bool { return good.Epoch() > 0 })

	bad := start("n2", "")
	testutil.WaitFor(t, 10*time.Second, func() bool { return logs.Contains("unencrypted gossip stream refused") })
	client := rpc.NewClient([]string{srv.RPCAddr()}, nil)
	t.Cleanup(client.Close)
	var nodes rpc.NodeListResponse
	if err := client.Call(context.Background(), "Node.List", &rpc.RequestHeader{}, &nodes); err != nil {
		t.Fatal(err)
	}
	if len(nodes.Nodes) != 1 || nodes.Nodes[0].ID != "n1" || bad.Epoch() != 0 {
		t.Fatalf("nodes %+v (n2 epoch %d); want only n1", nodes.Nodes, bad.Epoch())
	}
	if n := bad.serf.NumNodes(); n != 1 {
		t.Fatalf("the keyless agent knows %d members; want only itself", n)
	}

	newKey, err := gossip.GenerateKey()
	if err != nil {
		t.Fatal(err)
	}
	var resp rpc.KeyringResponse
	if err := client.Call(context.Background(), "Operator.KeyringInstall", &rpc.KeyringRequest{Key: newKey}, &resp); err != nil {
		t.Fatal(err)
	}
	if !resp.Complete() || resp.Members != 2 {
		t.Fatalf("install answered %+v; want the server and n1", resp)
	}
	raw, err := os.ReadFile(gossip.KeyringFile(good.config.DataDir))
	if err != nil {
		t.Fatal(err)
	}
	var keys []string
	if err := json.Unmarshal(raw, &keys); err != nil {
		t.Fatal(err)
	}
	if len(keys) != 2 || keys[0] != key || keys[1] != newKey {
		t.Fatalf("n1's keyring file holds %d keys; want the primary key then the installed one", len(keys))
	}
}
