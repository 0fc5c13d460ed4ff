package sim

import (
	"strings"
	"testing"
	"time"

	"github.com/weft-sched/weft/internal/identity"
	wrpc "github.com/weft-sched/weft/rpc"
	"github.com/weft-sched/weft/scheduler"
)

// The proxy allocates opportunistic asks from the list the node's last
// heartbeat answer brought, never past its room, and forwards guaranteed
// asks; with no node able to take opportunistic work it forwards the
// guaranteed twin, and once that is no longer needed withdraws it.
// Releasing a container it allocated stops it on its node.
func TestProxyAllocatesOpportunisticAsksFromTheList(t *testing.T) {
	res := scheduler.Resources{MemoryMB: 1024, Vcores: 1}
	home, err := NewNode(NodeConfig{ID: "n1", Capacity: scheduler.Resources{MemoryMB: 4096, Vcores: 4}, Heartbeat: time.Second, QueueLength: 2, AMRMProxy: true})
	if err != nil {
		t.Fatal(err)
	}
	home.epoch = 3
	certify(t, home)
	p := home.Proxy()
	if p == nil {
		t.Fatal("a node with AMRMProxy has no proxy")
	}
	list := []scheduler.LeastLoadedNode{{NodeID: "n1", Capacity: home.cfg.Capacity, Free: scheduler.Resources{MemoryMB: 2048, Vcores: 2}, QueueSpace: 2}}
	p.update(&wrpc.HeartbeatResponse{LeastLoaded: list, LeastLoadedAt: 7}, 0, time.Now())
	if at := p.listAt(); at != 7 {
		t.Fatalf("list at %d after an answer with list 7", at)
	}
	req := &wrpc.AMAllocateRequest{AppID: "app-1", Attempt: 1, Asks: []scheduler.Ask{
		{AskID: 1, Count: 6, Resources: res, ExecutionType: scheduler.Opportunistic},
		{AskID: 2, Count: 2, Resources: res, ExecutionType: scheduler.Guaranteed},
	}}
	s := p.Split(req)
	if len(s.Local) != 4 || !s.Unmet {
		t.Fatalf("allocated %d of 6 (unmet %v) on 2 free places and 2 queue places, want 4 and the rest unmet", len(s.Local), s.Unmet)
	}
	for _, c := range s.Local {
		if !strings.HasPrefix(c.ID, scheduler.AgentContainerIDPrefix+"n1-3-") || c.NodeID != "n1" || c.ExecutionType != string(scheduler.Opportunistic) {
			t.Errorf("container %+v: want an agent's ID of node n1 at epoch 3, opportunistic", c)
		}
	}
	if len(s.Forward.Asks) != 1 || s.Forward.Asks[0].AskID != 2 || !s.NeedServers {
		t.Fatalf("forwarded %+v, want the guaranteed ask only", s.Forward.Asks)
	}
	// Started on its node, then released: the proxy stops it there.
	c := s.Local[0]
	if got := home.Start(c, time.Hour, nil); got != scheduler.ContainerRunning {
		t.Fatalf("%s %s on a node with room, want RUNNING", c.ID, got)
	}
	p.Started(c.AppID, c.Attempt, c.ID, home)
	s = p.Split(&wrpc.AMAllocateRequest{AppID: "app-1", Attempt: 1, Releases: []string{c.ID, "g-9"}})
	if r := home.state(t, c.ID); r.State != scheduler.ContainerCompleted || r.Reason != scheduler.ReasonKilled {
		t.Errorf("released %s is %s %s on its node, want COMPLETED killed", c.ID, r.State, r.Reason)
	}
	if len(s.Forward.Releases) != 1 || s.Forward.Releases[0] != "g-9" {
		t.Errorf("forwarded releases %v, want only the servers' g-9", s.Forward.Releases)
	}
	// An empty list: no node takes opportunistic work, so its twin asks
	// for it as guaranteed; once nothing is wanted the twin is withdrawn.
	p.update(&wrpc.HeartbeatResponse{LeastLoadedAt: 8, LeastLoaded: []scheduler.LeastLoadedNode{}}, 7, time.Now())
	s = p.Split(&wrpc.AMAllocateRequest{AppID: "app-1", Attempt: 1, Asks: req.Asks[:1]})
	if len(s.Local) != 0 || len(s.Forward.Asks) != 1 || s.Forward.Asks[0].ExecutionType != scheduler.Guaranteed || s.Forward.Asks[0].Count != 6 {
		t.Fatalf("on an empty list: %d local, forwarded %+v; want the guaranteed twin of 6", len(s.Local), s.Forward.Asks)
	}
	none := req.Asks[0]
	none.Count = 0
	s = p.Split(&wrpc.AMAllocateRequest{AppID: "app-1", Attempt: 1, Asks: []scheduler.Ask{none}})
	if len(s.Forward.Asks) != 1 || s.Forward.Asks[0].Count != 0 || s.Forward.Asks[0].ExecutionType != scheduler.Guaranteed {
		t.Fatalf("forwarded %+v, want the twin withdrawn (count 0)", s.Forward.Asks)
	}
	// The leader says opportunistic asks are central: all go to it.
	p.update(&wrpc.HeartbeatResponse{LeastLoadedAt: 9, LeastLoaded: list, Centralized: true}, 8, time.Now())
	if s = p.Split(req); len(s.Local) != 0 || len(s.Forward.Asks) != 2 {
		t.Fatalf("centralized: %d local, %d forwarded asks; want none local, both forwarded", len(s.Local), len(s.Forward.Asks))
	}
}

// certify plays the servers' part of a node's registration: their public
// keys, and a certificate of the node's key, as a Node.Register answer
// brings them.
func certify(t testing.TB, n *Node) {
	t.Helper()
	secret := make([]byte, identity.KeySize)
	secret[0] = 1
	ring, err := identity.NewKeyring([]identity.Key{{ID: 1, Secret: secret}}, 1)
	if err != nil {
		t.Fatal(err)
	}
	pub, _ := identity.NodePublicKey(n.nodeKey)
	cert, err := ring.CertifyNode(n.cfg.ID, pub, time.Now().Add(time.Hour).UnixNano())
	if err != nil {
		t.Fatal(err)
	}
	var keys []wrpc.WorkloadKey
	for _, k := range ring.PublicKeys() {
		keys = append(keys, wrpc.WorkloadKey{ID: k.ID, PublicKey: k.Key})
	}
	n.mu.Lock()
	n.setKeysLocked(keys, cert)
	n.mu.Unlock()
	if n.minter() == nil {
		t.Fatal("the node took no certificate")
	}
}
