package server

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/weft-sched/weft/fsm"
	"github.com/weft-sched/weft/internal/testutil"
	wrpc "github.com/weft-sched/weft/rpc"
	"github.com/weft-sched/weft/scheduler"
)

func testSpec(name string) scheduler.AppSpec {
	return scheduler.AppSpec{Name: name, User: "alice", DShell: scheduler.DShell{NumContainers: 1, Command: []string{"true"}}}
}

// A submit retried after a broken connection, through another server,
// with the same request ID, creates one app and gets its ID (SPEC §4).
func TestRetriedSubmitCreatesOneApp(t *testing.T) {
	c := startThree(t)
	req := &wrpc.AppSubmitRequest{Spec: testSpec("once")}
	req.RequestID = "retry-me-1"
	var first, second wrpc.AppSubmitResponse
	if err := c.call(c.follower(), "App.Submit", req, &first); err != nil {
		t.Fatal(err)
	}
	if err := c.call(c.leader(), "App.Submit", req, &second); err != nil {
		t.Fatal(err)
	}
	if first.AppID == "" || second.AppID != first.AppID || second.Index != first.Index {
		t.Fatalf("first %+v, retry %+v: want the first answer again", first, second)
	}
	var list wrpc.AppListResponse
	if err := c.call(c.leader(), "App.List", &wrpc.AppListRequest{}, &list); err != nil || len(list.Apps) != 1 {
		t.Fatalf("%d apps after a retried submit (%v), want 1", len(list.Apps), err)
	}
	bad := &wrpc.AppSubmitRequest{Spec: testSpec("x")}
	bad.RequestID = "not valid!"
	if err := c.call(c.leader(), "App.Submit", bad, &first); !errors.Is(err, wrpc.ErrBadRequest) || !strings.Contains(err.Error(), "request_id") {
		t.Fatalf("bad request ID answered %v", err)
	}
}

func TestSubmitRefusesAnAppNoNodeCanHold(t *testing.T) {
	c := startThree(t)
	l := c.leader()
	var reg wrpc.NodeRegisterResponse
	for _, n := range []struct {
		id  string
		mem int64
	}{{"small", 2048}, {"big", 4096}} {
		if err := c.call(l, "Node.Register", &wrpc.NodeRegisterRequest{ID: n.id, Address: "127.0.0.1:1",
			Capacity: scheduler.Resources{MemoryMB: n.mem, Vcores: 4}, Secret: nodeSecret(n.id)}, &reg); err != nil {
			t.Fatal(err)
		}
	}
	spec := testSpec("huge")
	spec.DShell.Resources = scheduler.Resources{MemoryMB: 8192, Vcores: 1}
	var resp wrpc.AppSubmitResponse
	err := c.call(l, "App.Submit", &wrpc.AppSubmitRequest{Spec: spec}, &resp)
	if !errors.Is(err, wrpc.ErrBadRequest) || !strings.Contains(err.Error(), "larger than every node; the largest is big (memory_mb=4096,vcores=4)") {
		t.Fatalf("submit answered %v", err)
	}
	spec = testSpec("big-am")
	spec.AMResources = scheduler.Resources{MemoryMB: 256, Vcores: 8}
	if err := c.call(l, "App.Submit", &wrpc.AppSubmitRequest{Spec: spec}, &resp); !errors.Is(err, wrpc.ErrBadRequest) || !strings.Contains(err.Error(), "am_resources") {
		t.Fatalf("submit of an AM larger than every node answered %v", err)
	}
	job := scheduler.AppSpec{Name: "job", User: "test", AMType: scheduler.AMTypeMapReduce, MapReduce: &scheduler.MapReduce{
		Splits: []scheduler.Split{{Path: "/in/0"}}, Map: []string{"cat"}, Reduce: []string{"cat"}, Reducers: 1, Output: "/out",
		ReduceResources: scheduler.Resources{MemoryMB: 6144, Vcores: 1}}}
	if err := c.call(l, "App.Submit", &wrpc.AppSubmitRequest{Spec: job}, &resp); !errors.Is(err, wrpc.ErrBadRequest) ||
		!strings.Contains(err.Error(), "mapreduce.reduce_resources memory_mb=6144,vcores=1 of each container are larger than every node") {
		t.Fatalf("submit of a job whose reduces no node can hold answered %v", err)
	}
	spec = testSpec("nobody")
	spec.User = ""
	if err := c.call(l, "App.Submit", &wrpc.AppSubmitRequest{Spec: spec}, &resp); !errors.Is(err, wrpc.ErrBadRequest) || !strings.Contains(err.Error(), "user") {
		t.Fatalf("submit without a user answered %v", err)
	}
	var list wrpc.AppListResponse
	if err := c.call(l, "App.List", &wrpc.AppListRequest{}, &list); err != nil || len(list.Apps) != 0 {
		t.Fatalf("refused submits left %d apps (%v)", len(list.Apps), err)
	}
	if err := c.call(l, "App.List", &wrpc.AppListRequest{State: "BOGUS"}, &list); !errors.Is(err, wrpc.ErrBadRequest) || !strings.Contains(err.Error(), "RUNNING") {
		t.Fatalf("list by an unknown state answered %v", err)
	}
}

// Killing an app that has ended answers the same whatever its end was.
func TestKillOfAnEndedAppSaysItEnded(t *testing.T) {
	c := startThree(t)
	l := c.leader()
	ctx := context.Background()
	var reg wrpc.NodeRegisterResponse
	if err := c.call(l, "Node.Register", &wrpc.NodeRegisterRequest{ID: "n1", Address: "127.0.0.1:1",
		Capacity: scheduler.Resources{MemoryMB: 4096, Vcores: 4}, Secret: nodeSecret("n1")}, &reg); err != nil {
		t.Fatal(err)
	}
	submit := func(name string) string {
		var resp wrpc.AppSubmitResponse
		if err := c.call(l, "App.Submit", &wrpc.AppSubmitRequest{Spec: testSpec(name)}, &resp); err != nil {
			t.Fatal(err)
		}
		return resp.AppID
	}
	killed, finished := submit("killed"), submit("finished")
	// finished runs its AM and finishes (the leader's own writes stand in
	// for an agent and an AM).
	waitAMPlaced(t, l, finished)
	if _, _, err := l.raftApply(ctx, fsm.AppRegisterType, &fsm.AppRegisterRequest{AppID: finished, Attempt: 1}); err != nil {
		t.Fatal(err)
	}
	if _, _, err := l.raftApply(ctx, fsm.AppFinishType, &fsm.AppFinishRequest{AppID: finished, Attempt: 1, State: scheduler.AppFinished}); err != nil {
		t.Fatal(err)
	}
	var wr wrpc.WriteResponse
	if err := c.call(l, "App.Kill", &wrpc.AppRequest{AppID: killed}, &wr); err != nil || len(wr.Warnings) != 0 {
		t.Fatalf("first kill: %v %v", err, wr.Warnings)
	}
	for id, state := range map[string]string{killed: "KILLED", finished: "FINISHED"} {
		var again wrpc.WriteResponse
		if err := c.call(c.follower(), "App.Kill", &wrpc.AppRequest{AppID: id}, &again); err != nil {
			t.Fatalf("kill of a %s app: %v", state, err)
		}
		if want := "app " + id + " had already ended (" + state + "); nothing to kill"; len(again.Warnings) != 1 || again.Warnings[0] != want {
			t.Fatalf("kill of a %s app said %q, want %q", state, again.Warnings, want)
		}
	}
	if err := c.call(l, "App.Kill", &wrpc.AppRequest{AppID: "app-999999"}, &wr); !wrpc.IsNotFound(err) {
		t.Fatalf("kill of an unknown app: %v", err)
	}
}

// waitAMPlaced waits for the leader to place an app's AM.
func waitAMPlaced(t *testing.T, l *Server, id string) {
	t.Helper()
	testutil.WaitFor(t, 10*time.Second, func() bool { a, ok := l.State().App(id); return ok && !a.AMPending })
}

// A deregistered node is DOWN at once; a leaving one DRAINING until then.
func TestDeregisteredNodeIsDownAtOnce(t *testing.T) {
	c := startThree(t)
	l := c.leader()
	var reg wrpc.NodeRegisterResponse
	if err := c.call(l, "Node.Register", &wrpc.NodeRegisterRequest{ID: "n1", Address: "127.0.0.1:1",
		Capacity: scheduler.Resources{MemoryMB: 4096, Vcores: 4}, Secret: nodeSecret("n1")}, &reg); err != nil {
		t.Fatal(err)
	}
	var wr wrpc.WriteResponse
	// A leaving agent first has its node DRAINING, without a deadline, so
	// that nothing is placed there while its containers stop.
	if err := c.call(c.follower(), "Node.Deregister", &wrpc.NodeDeregisterRequest{ID: "n1", Epoch: reg.Epoch, Secret: nodeSecret("n1"),
		Leaving: true}, &wr); err != nil {
		t.Fatal(err)
	}
	if n, _ := l.State().Node("n1"); n.Status != scheduler.NodeDraining || n.DrainDeadline != 0 || !strings.Contains(n.StatusReason, "leaving") {
		t.Fatalf("node of a leaving agent: %s (%s), deadline %d", n.Status, n.StatusReason, n.DrainDeadline)
	}
	if err := c.call(c.follower(), "Node.Deregister", &wrpc.NodeDeregisterRequest{ID: "n1", Epoch: reg.Epoch, Secret: nodeSecret("n1")}, &wr); err != nil {
		t.Fatal(err)
	}
	n, _ := l.State().Node("n1")
	if n.Status != scheduler.NodeDown || n.StatusReason != "the agent left gracefully" {
		t.Fatalf("node after deregistration: %s (%s)", n.Status, n.StatusReason)
	}
	var hb wrpc.HeartbeatResponse
	if err := c.call(l, "Node.Heartbeat", &wrpc.HeartbeatRequest{NodeID: "n1", Epoch: reg.Epoch, Secret: nodeSecret("n1")}, &hb); err != nil || !hb.ReRegister {
		t.Fatalf("heartbeat of a deregistered node: %v re_register=%v", err, hb.ReRegister)
	}
	if err := c.call(l, "Node.Register", &wrpc.NodeRegisterRequest{ID: "bad id", Capacity: scheduler.Resources{MemoryMB: 1, Vcores: 1}, Secret: nodeSecret("x")}, &reg); !errors.Is(err, wrpc.ErrBadRequest) {
		t.Fatalf("registration under a bad node ID answered %v", err)
	}
	if err := c.call(l, "Node.Register", &wrpc.NodeRegisterRequest{ID: "n2", Capacity: scheduler.Resources{Vcores: 1}, Secret: nodeSecret("n2")}, &reg); !errors.Is(err, wrpc.ErrBadRequest) || !strings.Contains(err.Error(), "memory_mb") {
		t.Fatalf("registration without memory answered %v", err)
	}
}

// A blocking query through a follower waits as long as it asked, though
// that is longer than the follower holds requests for a leader (a fresh
// follower answers it from its own state; one that is not forwards it,
// with the request's whole deadline).
func TestForwardedBlockingQueryOutlivesTheHoldTime(t *testing.T) {
	c := startThree(t)
	f := c.follower()
	var sub wrpc.AppSubmitResponse
	if err := c.call(f, "App.Submit", &wrpc.AppSubmitRequest{Spec: testSpec("watched")}, &sub); err != nil {
		t.Fatal(err)
	}
	var first wrpc.AppStatusResponse
	if err := c.call(f, "App.Status", &wrpc.AppRequest{AppID: sub.AppID}, &first); err != nil {
		t.Fatal(err)
	}
	req := &wrpc.AppRequest{AppID: sub.AppID}
	req.MinQueryIndex, req.MaxWait = first.Index, 2*c.configs[f.NodeID()].RPCHoldTimeout
	start := time.Now()
	var again wrpc.AppStatusResponse
	if err := c.call(f, "App.Status", req, &again); err != nil {
		t.Fatalf("a blocking query through a follower, waiting longer than its hold time: %v", err)
	}
	// Nothing changed the app, so the answer came when the wait ran out,
	// not when the follower's hold did: a lower bound the server keeps.
	if waited := time.Since(start); waited < req.MaxWait || again.App.ID != sub.AppID || again.Index != first.Index {
		t.Fatalf("answered after %s (asked to wait %s), at index %d (was %d)", waited, req.MaxWait, again.Index, first.Index)
	}
}

// An agent keeping completed containers' directories until their apps end
// asks with its heartbeats which apps still run: the answer names those
// that have not ended, through a follower too, and more than
// MaxAppsToCheck apps are refused, naming the field.
func TestHeartbeatSaysWhichAppsStillRun(t *testing.T) {
	c := startThree(t)
	l := c.leader()
	var reg wrpc.NodeRegisterResponse
	if err := c.call(l, "Node.Register", &wrpc.NodeRegisterRequest{ID: "n1", Address: "127.0.0.1:1",
		Capacity: scheduler.Resources{MemoryMB: 4096, Vcores: 4}, Secret: nodeSecret("n1")}, &reg); err != nil {
		t.Fatal(err)
	}
	var running, killed wrpc.AppSubmitResponse
	for _, r := range []*wrpc.AppSubmitResponse{&running, &killed} {
		if err := c.call(l, "App.Submit", &wrpc.AppSubmitRequest{Spec: testSpec("app")}, r); err != nil {
			t.Fatal(err)
		}
	}
	if err := c.call(l, "App.Kill", &wrpc.AppRequest{AppID: killed.AppID}, &wrpc.WriteResponse{}); err != nil {
		t.Fatal(err)
	}
	seq := uint64(0)
	beat := func(s *Server, apps []string) (*wrpc.HeartbeatResponse, error) {
		seq++
		var hb wrpc.HeartbeatResponse
		err := c.call(s, "Node.Heartbeat", &wrpc.HeartbeatRequest{NodeID: "n1", Epoch: reg.Epoch, Secret: nodeSecret("n1"), Seq: seq,
			AppsToCheck: apps}, &hb)
		return &hb, err
	}
	for _, s := range []*Server{l, c.follower()} {
		hb, err := beat(s, []string{running.AppID, killed.AppID, "app-404"})
		if err != nil || len(hb.AppsRunning) != 1 || hb.AppsRunning[0] != running.AppID {
			t.Fatalf("apps running %v (%v, %+v), want only %s", hb.AppsRunning, err, hb, running.AppID)
		}
	}
	many := make([]string, wrpc.MaxAppsToCheck+1)
	for i := range many {
		many[i] = fmt.Sprintf("app-%d", i)
	}
	if _, err := beat(l, many); !errors.Is(err, wrpc.ErrBadRequest) || !strings.Contains(err.Error(), "apps_to_check") {
		t.Fatalf("a heartbeat asking about %d apps answered %v", len(many), err)
	}
}
