package server

import (
	"fmt"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/weft-sched/weft/internal/clock"
	"github.com/weft-sched/weft/internal/testutil"
	wrpc "github.com/weft-sched/weft/rpc"
	"github.com/weft-sched/weft/scheduler"
)

// tables summarizes what a server's state holds: app, container and node
// IDs and the count of finished apps.
func tables(s *Server) string {
	st := s.State()
	var apps, cs, nodes []string
	for _, a := range st.Apps() {
		apps = append(apps, a.ID)
	}
	for _, c := range st.Containers() {
		cs = append(cs, c.ID)
	}
	for _, n := range st.Nodes() {
		nodes = append(nodes, n.ID)
	}
	return fmt.Sprintf("apps [%s] containers [%s] nodes [%s] finished %d",
		strings.Join(apps, " "), strings.Join(cs, " "), strings.Join(nodes, " "), st.NumFinishedApps())
}

// sameEverywhere waits until every server's tables read the same and
// returns them.
func (c *testCluster) sameEverywhere() string {
	c.t.Helper()
	var got []string
	testutil.WaitFor(c.t, 10*time.Second, func() bool {
		got = got[:0]
		for _, id := range sortedCopy(c.ids()) {
			got = append(got, tables(c.servers[id]))
		}
		for _, g := range got[1:] {
			if g != got[0] {
				return false
			}
		}
		return true
	})
	return got[0]
}

// Garbage collection on three servers: finished apps past
// max_completed_apps go first, oldest first, with their containers; then
// every finished app past app_gc_threshold and the node DOWN past
// node_gc_threshold. Each step leaves every server's state the same.
func TestGCRemovesTheSameRecordsOnEveryServer(t *testing.T) {
	c := newTestCluster(t)
	fake := clock.NewFake(time.Unix(2_000_000_000, 0))
	c.clock = fake
	c.tune = func(cfg *Config) {
		cfg.MaxCompletedApps, cfg.AppGCThreshold, cfg.NodeGCThreshold = 3, time.Minute, 30*time.Second
	}
	s1 := c.start("s1", 3)
	c.start("s2", 3, s1.SerfAddr())
	c.start("s3", 3, s1.SerfAddr())
	l := c.waitForLeader()
	c.waitForVoters("s1", "s2", "s3")
	big := scheduler.Resources{MemoryMB: 16384, Vcores: 16} // room for six AMs within max_am_share
	n1 := registerFake(t, c, l, "n1", big)
	registerFake(t, c, l, "n2", big)

	// Six apps, each killed a second after the one before (their AMs
	// never started: they end at once).
	var apps []string
	for i := 0; i < 6; i++ {
		apps = append(apps, submit(t, c, l, fmt.Sprintf("gc-%d", i)))
	}
	testutil.WaitFor(t, 10*time.Second, func() bool {
		for _, id := range apps {
			if a, _ := l.State().App(id); len(a.Attempts) == 0 {
				return false
			}
		}
		return true
	})
	var wr wrpc.WriteResponse
	for _, id := range apps {
		if err := c.call(c.follower(), "App.Kill", &wrpc.AppRequest{AppID: id}, &wr); err != nil {
			t.Fatal(err)
		}
		n1.heartbeat(t, l, wrpc.HeartbeatRequest{})
		fake.Advance(time.Second)
	}
	// The next tick removes the three that finished first.
	testutil.WaitFor(t, 10*time.Second, func() bool { return l.State().NumFinishedApps() == 3 })
	got := c.sameEverywhere()
	kept := append([]string(nil), apps[3:]...)
	sort.Strings(kept)
	if !strings.HasPrefix(got, "apps ["+strings.Join(kept, " ")+"]") || !strings.Contains(got, "nodes [n1 n2]") {
		t.Fatalf("after max_completed_apps: %s; want apps %v", got, kept)
	}
	for _, id := range apps[:3] {
		if len(l.State().AppContainers(id)) != 0 {
			t.Fatalf("containers of %s survived it", id)
		}
	}

	// n2 falls silent and goes DOWN; 30 s later it is removed; a minute
	// after they finished, the other apps are too. n1 heartbeats.
	for i := 0; i < 16; i++ {
		n1.heartbeat(t, l, wrpc.HeartbeatRequest{})
		fake.Advance(5 * time.Second)
	}
	testutil.WaitFor(t, 10*time.Second, func() bool {
		_, n2 := l.State().Node("n2")
		return l.State().NumFinishedApps() == 0 && !n2
	})
	if got := c.sameEverywhere(); got != "apps [] containers [] nodes [n1] finished 0" {
		t.Fatalf("after the thresholds: %s", got)
	}
	if n, _ := l.State().Node("n1"); n.Status != scheduler.NodeReady {
		t.Fatalf("n1 is %s", n.Status)
	}
}
