package server

import (
	"testing"
	"time"

	"github.com/weft-sched/weft/internal/clock"
	"github.com/weft-sched/weft/internal/testutil"
	wrpc "github.com/weft-sched/weft/rpc"
	"github.com/weft-sched/weft/scheduler"
)

// The leader's duties take their time from the injected clock: a node that
// falls silent is marked DOWN when the fake clock — not the wall clock —
// passes its TTL, while the nodes that heartbeat stay READY.
func TestLeaderDutiesRunOnTheInjectedClock(t *testing.T) {
	c := newTestCluster(t)
	fake := clock.NewFake(time.Unix(2_000_000_000, 0))
	c.clock = fake
	l := c.start("solo", 1)
	c.waitForLeader()
	epochs := map[string]uint64{}
	for _, id := range []string{"n1", "n2", "n3"} {
		var reg wrpc.NodeRegisterResponse
		if err := c.call(l, "Node.Register", &wrpc.NodeRegisterRequest{ID: id, Address: "127.0.0.1:1",
			Capacity: scheduler.Resources{MemoryMB: 1024, Vcores: 1}, Secret: nodeSecret(id)}, &reg); err != nil {
			t.Fatal(err)
		}
		epochs[id] = reg.Epoch
	}
	beat := func(ids ...string) {
		for _, id := range ids {
			var hb wrpc.HeartbeatResponse
			if err := c.call(l, "Node.Heartbeat", &wrpc.HeartbeatRequest{NodeID: id, Epoch: epochs[id], Secret: nodeSecret(id)}, &hb); err != nil || hb.ReRegister {
				t.Fatalf("heartbeat of %s: %v, re-register %v", id, err, hb.ReRegister)
			}
		}
	}
	status := func(id string) scheduler.NodeStatus {
		n, _ := l.State().Node(id)
		return n.Status
	}
	beat("n1", "n2", "n3")
	// The wall clock could run for minutes: nothing happens until the
	// fake one moves. n3 falls silent; n1 and n2 heartbeat every second.
	for i := 0; i < 12; i++ {
		fake.Advance(time.Second)
		beat("n1", "n2")
	}
	testutil.WaitFor(t, 10*time.Second, func() bool { return status("n3") == scheduler.NodeDown })
	n3, _ := l.State().Node("n3")
	if n3.StatusReason != "no heartbeat for 11s while 2 of 3 nodes were heard" && n3.StatusReason != "no heartbeat for 12s while 2 of 3 nodes were heard" {
		t.Fatalf("n3 down for %q", n3.StatusReason)
	}
	if status("n1") != scheduler.NodeReady || status("n2") != scheduler.NodeReady {
		t.Fatalf("a node that heartbeats was marked down: n1 %s, n2 %s", status("n1"), status("n2"))
	}
}
