package fsm

import (
	"testing"

	"github.com/weft-sched/weft/scheduler"
)

// A batch applies each node's update as its own entry would: a rejected one
// (its node is unknown) changes nothing and gets its error; the others apply.
func TestContainerUpdateBatchAppliesEachUpdate(t *testing.T) {
	h := seeded(t)
	st := h.f.State()
	app, am := st.ActiveApps()[0].ID, st.Containers()[0].ID
	h.register("n2", 8192)
	res := h.ok(ContainerUpdateBatchType, &ContainerUpdateBatchRequest{Updates: []ContainerUpdateRequest{
		{NodeID: "n9", Records: []ContainerRecord{{ID: "o-n9-1-1", AppID: app, Attempt: 1, AskID: 2, Resources: small,
			State: scheduler.ContainerQueued, AllocatedAt: 9}}},
		{NodeID: "n1", Updates: []ContainerStatus{{ID: am, State: scheduler.ContainerRunning, At: 4, StartedAt: 4}}},
		{NodeID: "n2", Updates: []ContainerStatus{{ID: am, State: scheduler.ContainerCompleted, At: 5}}}, // not n2's: ignored
	}}).(*ContainerUpdateBatchResult)
	if len(res.Errors) != 3 || res.Errors[0] == nil || res.Errors[1] != nil || res.Errors[2] != nil {
		t.Fatalf("errors %v, want only the first (unknown node) rejected", res.Errors)
	}
	if c := h.container(am); c.State != scheduler.ContainerRunning || c.StartedAt != 4 {
		t.Fatalf("AM container %s started %d, want RUNNING at 4", c.State, c.StartedAt)
	}
	if _, ok := h.f.State().Container("o-n9-1-1"); ok {
		t.Fatal("the rejected update recorded a container")
	}
}
