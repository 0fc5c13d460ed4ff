package server

import (
	"strings"
	"testing"
	"time"

	"github.com/weft-sched/weft/internal/clock"
	"github.com/weft-sched/weft/internal/testutil"
	wrpc "github.com/weft-sched/weft/rpc"
	"github.com/weft-sched/weft/scheduler"
)

// fakeAgent is a fakeNode that keeps the containers it was given and
// reports them in every heartbeat, killing (reporting COMPLETED with the
// order's reason) those the servers order killed, as an agent does.
type fakeAgent struct {
	*fakeNode
	running map[string]wrpc.ContainerReport
}

func (a *fakeAgent) beat(t *testing.T, s *Server) *wrpc.HeartbeatResponse {
	t.Helper()
	var reports []wrpc.ContainerReport
	for _, r := range a.running {
		reports = append(reports, r)
	}
	hb := a.heartbeat(t, s, wrpc.HeartbeatRequest{Containers: reports})
	for _, k := range hb.Kill {
		if r, ok := a.running[k.ID]; ok && r.State.Live() {
			r.State, r.Reason = scheduler.ContainerCompleted, k.Reason
			a.running[k.ID] = r
		}
	}
	for _, id := range hb.Acked {
		delete(a.running, id)
	}
	return hb
}

// run starts a container on the agent, as its AM would.
func (a *fakeAgent) run(c wrpc.ContainerInfo, now time.Time) {
	a.running[c.ID] = wrpc.ContainerReport{ID: c.ID, AppID: c.AppID, Attempt: c.Attempt, AskID: c.AskID, Resources: c.Resources,
		ExecutionType: c.ExecutionType, State: scheduler.ContainerRunning, At: now.UnixNano(), StartedAt: now.UnixNano()}
}

// exit ends a container by itself, with exit code 0.
func (a *fakeAgent) exit(id string) {
	zero := 0
	r := a.running[id]
	r.State, r.Reason, r.ExitCode = scheduler.ContainerCompleted, scheduler.ReasonExited, &zero
	a.running[id] = r
}

// A node drained with containers running takes no new ones; at its
// deadline (on the leader's clock) what still runs there is killed with
// reason drained; the app asks again, gets containers elsewhere and
// finishes; nothing fails. A second drained node that empties by itself
// before its deadline has nothing killed. -disable makes it READY again.
func TestDrainedNodeEmptiesByItsDeadline(t *testing.T) {
	c := newTestCluster(t)
	fake := clock.NewFake(time.Unix(2_000_000_000, 0))
	c.clock = fake
	l := c.start("solo", 1)
	c.waitForLeader()
	agents := map[string]*fakeAgent{}
	for _, id := range []string{"x", "y"} {
		agents[id] = &fakeAgent{registerFake(t, c, l, id, fourCores), map[string]wrpc.ContainerReport{}}
	}
	beatAll := func() {
		for _, a := range agents {
			a.beat(t, l)
		}
	}
	app := submit(t, c, l, "drained")

	// The AM is launched on one node; its tasks are asked for on the other.
	var amNode, other *fakeAgent
	var launch wrpc.AMLaunch
	testutil.WaitFor(t, 10*time.Second, func() bool {
		for _, a := range agents {
			for _, la := range a.beat(t, l).LaunchAMs {
				amNode, launch = a, la
			}
		}
		return amNode != nil
	})
	for _, a := range agents {
		if a != amNode {
			other = a
		}
	}
	amNode.run(launch.Container, fake.Now())
	var reg wrpc.AMRegisterResponse
	if err := c.call(l, "AM.Register", &wrpc.AMRegisterRequest{AppID: app, Attempt: 1, Token: launch.Token}, &reg); err != nil {
		t.Fatal(err)
	}
	task := scheduler.Resources{MemoryMB: 512, Vcores: 1}
	asks := []scheduler.Ask{{AskID: 1, Count: 2, Resources: task, Locality: scheduler.Locality{Nodes: []string{other.id}}}}
	seen := map[string]bool{}
	allocate := func(want int) []wrpc.ContainerInfo { // the next want new containers
		t.Helper()
		var got []wrpc.ContainerInfo
		testutil.WaitFor(t, 10*time.Second, func() bool {
			var ar wrpc.AMAllocateResponse
			if err := c.call(l, "AM.Allocate", &wrpc.AMAllocateRequest{AppID: app, Attempt: 1, Token: launch.Token, Asks: asks}, &ar); err != nil {
				t.Fatal(err)
			}
			for _, ci := range ar.Allocated {
				if !seen[ci.ID] {
					seen[ci.ID] = true
					got = append(got, ci)
				}
			}
			return len(got) >= want
		})
		return got
	}
	first := allocate(2)
	for _, ci := range first {
		if ci.NodeID != other.id {
			t.Fatalf("task %s placed on %s, asked for %s", ci.ID, ci.NodeID, other.id)
		}
		other.run(ci, fake.Now())
	}
	beatAll()

	// Drain the node the tasks run on, for 30 s.
	var wr wrpc.WriteResponse
	if err := c.call(l, "Node.Drain", &wrpc.NodeDrainRequest{ID: other.id, Deadline: 30 * time.Second}, &wr); err != nil {
		t.Fatal(err)
	}
	deadline := fake.Now().Add(30 * time.Second)
	var list wrpc.NodeListResponse
	if err := c.call(l, "Node.List", &wrpc.NodeListRequest{State: "draining"}, &list); err != nil {
		t.Fatal(err)
	}
	if len(list.Nodes) != 1 || list.Nodes[0].ID != other.id || list.Nodes[0].Status != "DRAINING" ||
		list.Nodes[0].DrainDeadline != deadline.UnixNano() {
		t.Fatalf("draining nodes: %+v, want %s until %d", list.Nodes, other.id, deadline.UnixNano())
	}
	// The least-loaded list AMRMProxies place opportunistic containers
	// from is rebuilt without it at once.
	hb := amNode.beat(t, l)
	if len(hb.LeastLoaded) == 0 {
		t.Fatal("no new least-loaded list after the drain")
	}
	for _, n := range hb.LeastLoaded {
		if n.NodeID == other.id {
			t.Fatalf("the draining node %s is in the least-loaded list %+v", other.id, hb.LeastLoaded)
		}
	}
	// Its containers run on until the deadline; the agents heartbeat
	// every 5 s of the leader's clock.
	for fake.Now().Before(deadline.Add(-5 * time.Second)) {
		fake.Advance(5 * time.Second)
		beatAll()
	}
	for _, ci := range first {
		if cc, _ := l.State().Container(ci.ID); !cc.State.Live() || cc.KillRequested {
			t.Fatalf("%s was stopped before the deadline: %+v", ci.ID, cc)
		}
	}
	// A third node joins; the deadline passes: the tasks are killed, with
	// reason drained, and the AM sees them complete.
	agents["z"] = &fakeAgent{registerFake(t, c, l, "z", fourCores), map[string]wrpc.ContainerReport{}}
	fake.Advance(10 * time.Second)
	testutil.WaitFor(t, 10*time.Second, func() bool {
		beatAll()
		for _, ci := range first {
			if cc, _ := l.State().Container(ci.ID); cc.State.Live() || cc.Reason != scheduler.ReasonDrained {
				return false
			}
		}
		return true
	})
	var ar wrpc.AMAllocateResponse
	if err := c.call(l, "AM.Allocate", &wrpc.AMAllocateRequest{AppID: app, Attempt: 1, Token: launch.Token}, &ar); err != nil {
		t.Fatal(err)
	}
	drained := 0
	for _, ci := range ar.Completed {
		if ci.Reason == string(scheduler.ReasonDrained) {
			drained++
		}
	}
	if drained != 2 {
		t.Fatalf("the AM saw %d containers completed as drained, want 2: %+v", drained, ar.Completed)
	}

	// The AM asks again (anywhere): nothing lands on the draining node.
	asks = append(asks, scheduler.Ask{AskID: 2, Count: 2, Resources: task})
	second := allocate(2)
	for _, ci := range second {
		if ci.NodeID == other.id {
			t.Fatalf("task %s placed on the draining node %s", ci.ID, ci.NodeID)
		}
		a := agents[ci.NodeID]
		a.run(ci, fake.Now())
		a.exit(ci.ID)
	}
	beatAll()
	if err := c.call(l, "AM.Finish", &wrpc.AMFinishRequest{AppID: app, Attempt: 1, Token: launch.Token, FinalState: "FINISHED"}, &wr); err != nil {
		t.Fatal(err)
	}
	if a, _ := l.State().App(app); a.State != scheduler.AppFinished || len(a.Attempts) != 1 {
		t.Fatalf("app %s ended %s after %d attempts", app, a.State, len(a.Attempts))
	}
	for _, ci := range second {
		if cc, _ := l.State().Container(ci.ID); cc.Reason != scheduler.ReasonExited {
			t.Fatalf("task %s: %s", ci.ID, cc.Reason)
		}
	}

	// The node the AM ran on is drained next; its AM exits by itself
	// before the deadline, and nothing is killed there.
	if err := c.call(l, "Node.Drain", &wrpc.NodeDrainRequest{ID: amNode.id, Deadline: 20 * time.Second}, &wr); err != nil {
		t.Fatal(err)
	}
	amNode.exit(launch.Container.ID)
	beatAll()
	if n := len(l.State().NodeLiveContainers(amNode.id)); n != 0 {
		t.Fatalf("%d containers still live on %s", n, amNode.id)
	}
	for i := 0; i < 6; i++ {
		fake.Advance(5 * time.Second)
		beatAll()
	}
	if cc, _ := l.State().Container(launch.Container.ID); cc.Reason != scheduler.ReasonExited {
		t.Fatalf("the AM container on %s ended %s", amNode.id, cc.Reason)
	}
	if n, _ := l.State().Node(amNode.id); n.Status != scheduler.NodeDraining {
		t.Fatalf("%s is %s after its deadline, want DRAINING until the drain is disabled", amNode.id, n.Status)
	}
	if err := c.call(l, "Node.Drain", &wrpc.NodeDrainRequest{ID: amNode.id, Disable: true}, &wr); err != nil {
		t.Fatal(err)
	}
	if n, _ := l.State().Node(amNode.id); n.Status != scheduler.NodeReady || n.DrainDeadline != 0 {
		t.Fatalf("after -disable %s is %s (deadline %d)", amNode.id, n.Status, n.DrainDeadline)
	}
	// Bad requests name the field and change nothing.
	err := c.call(l, "Node.Drain", &wrpc.NodeDrainRequest{ID: "x", Deadline: -time.Second}, &wr)
	if err == nil || !containsAll(err.Error(), "deadline") {
		t.Fatalf("negative deadline: %v", err)
	}
	if err := c.call(l, "Node.Drain", &wrpc.NodeDrainRequest{ID: "nope"}, &wr); err == nil || !containsAll(err.Error(), "nope", "not registered") {
		t.Fatalf("unknown node: %v", err)
	}
}

func containsAll(s string, parts ...string) bool {
	for _, p := range parts {
		if !strings.Contains(s, p) {
			return false
		}
	}
	return true
}
