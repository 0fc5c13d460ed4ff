package server

import (
	"errors"
	"testing"

	wrpc "github.com/weft-sched/weft/rpc"
	"github.com/weft-sched/weft/scheduler"
)

// IDs that reach the replicated state from clients and agents are path
// elements on some agent: one that is not (scheduler.ValidateID) is
// refused. A node cannot register as "..", and an opportunistic container
// an agent reports under a traversing or pattern ID is never recorded; its
// agent is told to stop it.
func TestIDsFromOutsideAreValidatedBeforeTheyAreRecorded(t *testing.T) {
	c := newTestCluster(t)
	c.start("s1", 1)
	l := c.waitForLeader()
	for _, id := range []string{"..", ".", "a/b", "*"} {
		var reg wrpc.NodeRegisterResponse
		err := c.call(l, "Node.Register", &wrpc.NodeRegisterRequest{ID: id, Address: "127.0.0.1:1",
			Capacity: scheduler.Resources{MemoryMB: 4096, Vcores: 4}}, &reg)
		if !errors.Is(err, wrpc.ErrBadRequest) {
			t.Errorf("Node.Register %q: %v; want a bad request", id, err)
		}
		if _, ok := l.State().Node(id); ok {
			t.Errorf("node %q registered", id)
		}
	}
	n1 := registerFake(t, c, l, "n1", scheduler.Resources{MemoryMB: 4096, Vcores: 4})
	var sub wrpc.AppSubmitResponse
	if err := c.call(l, "App.Submit", &wrpc.AppSubmitRequest{Spec: testSpec("ids")}, &sub); err != nil {
		t.Fatal(err)
	}
	waitAMPlaced(t, l, sub.AppID)
	report := func(id string) wrpc.ContainerReport {
		return wrpc.ContainerReport{ID: id, AppID: sub.AppID, Attempt: 1, Resources: scheduler.Resources{MemoryMB: 128, Vcores: 1},
			ExecutionType: string(scheduler.Opportunistic), State: scheduler.ContainerRunning}
	}
	bad := []string{"o-../../x", "o-*", "o-a/b", "o-n1-1-1/.."}
	reports := []wrpc.ContainerReport{report("o-n1-1-1")}
	n1.mint(t, "n1", reports)
	for _, id := range bad {
		reports = append(reports, report(id))
	}
	var hb wrpc.HeartbeatResponse
	if err := c.call(l, "Node.Heartbeat", &wrpc.HeartbeatRequest{NodeID: "n1", Epoch: n1.epoch, Secret: n1.secret, Containers: reports}, &hb); err != nil {
		t.Fatal(err)
	}
	if _, ok := l.State().Container("o-n1-1-1"); !ok {
		t.Fatal("the well-formed container was not recorded")
	}
	killed := map[string]bool{}
	for _, k := range hb.Kill {
		killed[k.ID] = true
	}
	for _, id := range bad {
		if _, ok := l.State().Container(id); ok {
			t.Errorf("container %q recorded", id)
		}
		if !killed[id] {
			t.Errorf("container %q not in the agent's kill orders %+v", id, hb.Kill)
		}
	}
}
