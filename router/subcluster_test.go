package router

import (
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/weft-sched/weft/internal/testutil"
	"github.com/weft-sched/weft/scheduler/federation"
	"github.com/weft-sched/weft/server"
)

// TestServerReportsItsSubclusterToTheRouters: a weft server started with
// a sub-cluster ID and a router's address reports to it while it leads;
// the routers hold its ID, servers, leader and queues (NEW: it has no
// READY node, and says so); when the server stops, the sub-cluster is LOST
// after subcluster_timeout (5 s here: fifty reports' worth, so that a busy
// machine's pauses do not make it LOST before).
func TestServerReportsItsSubclusterToTheRouters(t *testing.T) {
	c := newRouters(t)
	r := c.start("r1", 1)
	c.leader()

	logger, _ := testutil.Logger(t, hclog.Info)
	srv, err := server.New(&server.Config{NodeID: "s1", DataDir: t.TempDir(), RPCPort: -1, SerfPort: -1, BootstrapExpect: 1,
		SerfFastGossip: true, RaftConfig: fastRaft(), Logger: logger.Named("s1"),
		SubclusterID: "sc1", Routers: []string{r.RPCAddr()}, SubclusterHeartbeat: 100 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	stopped := false
	t.Cleanup(func() {
		if !stopped {
			srv.Shutdown()
		}
	})
	testutil.WaitFor(t, 10*time.Second, func() bool {
		sc := r.State().Subcluster("sc1")
		return sc != nil && sc.Seq >= 2
	})
	sc := r.State().Subcluster("sc1")
	if sc.State != federation.StateNew || sc.Reason != "no READY node" || sc.Leader != "s1" || len(sc.Servers) != 1 ||
		sc.Servers[0] != srv.RPCAddr() || sc.Queues["root.default"].FairShare.Vcores != 0 || len(sc.Queues) < 2 {
		t.Fatalf("sub-cluster as the router holds it: %+v", sc)
	}
	srv.Shutdown()
	stopped = true
	testutil.WaitFor(t, 20*time.Second, func() bool {
		sc := r.State().Subcluster("sc1")
		return sc.State == federation.StateLost
	})
}
