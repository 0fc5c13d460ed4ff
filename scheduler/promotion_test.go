package scheduler

import "testing"

// promotionState: one 4-vcore node with 2 vcores of guaranteed work; app
// P in root.capped (max 3 vcores, 2 in use) runs opportunistic containers.
func promotionState() (*fakeState, *App) {
	cfg := leaves(PolicyFair, "capped", "other")
	cfg.Root.Children[0].MaxResources = &Resources{MemoryMB: Unlimited, Vcores: 3}
	n := node("n1", 8192, 4)
	n.AllocatedGuaranteed = Resources{MemoryMB: 1024, Vcores: 2}
	down := node("n2", 8192, 4)
	down.Status = NodeDown
	p := &App{ID: "P", Queue: "root.capped", State: AppRunning, Used: Resources{MemoryMB: 1024, Vcores: 2},
		Attempts: []Attempt{{Attempt: 1}}}
	other := &App{ID: "G", Queue: "root.other", State: AppRunning, Used: Resources{MemoryMB: 512, Vcores: 1},
		Attempts: []Attempt{{Attempt: 1}}}
	return &fakeState{nodes: []*Node{n, down}, cfg: cfg, apps: []*App{p, other}}, p
}

func opp(id, node string, state ContainerState) *Container {
	return &Container{ID: id, AppID: "P", Attempt: 1, NodeID: node, Resources: oneCore,
		ExecutionType: Opportunistic, State: state}
}

func TestCheckPromotions(t *testing.T) {
	f, app := promotionState()
	guaranteed := opp("g", "n1", ContainerRunning)
	guaranteed.ExecutionType = Guaranteed
	oldAttempt := opp("old", "n1", ContainerRunning)
	oldAttempt.Attempt = 0
	before := opp("before", "n1", ContainerRunning)
	before.ExecutionType, before.Promoted = Guaranteed, true
	cs := []*Container{
		before,                           // promoted already: granted again, taking nothing more
		opp("a", "n1", ContainerRunning), // granted: 1 of the node's 2 free vcores; the queue reaches 3 of 3
		opp("b", "n1", ContainerQueued),  // not running yet
		nil,                              // not recorded yet
		opp("c", "n2", ContainerRunning), // node down
		guaranteed,
		oldAttempt,
		opp("d", "n1", ContainerRunning), // the node has room (its last free vcore), the queue would reach 4 > 3
	}
	got := CheckPromotions(f, app, cs)
	want := []*PromotionRefusal{nil, nil, PromoteNotRunning, PromoteUnknown, PromoteNodeDown, PromoteGuaranteed, PromoteNotYours, nil}
	for i := range want[:7] {
		if got[i] != want[i] {
			t.Errorf("container %d: %v, want %v", i, got[i], want[i])
		}
	}
	if got[7] == nil || !got[7].Retryable || got[7].Reason != "queue root.capped would exceed its max_resources" {
		t.Errorf("container d: %+v, want refused by root.capped's max_resources, retryable", got[7])
	}
}

func TestCheckPromotionsCountsEarlierGrantsOnTheNode(t *testing.T) {
	f, app := promotionState()
	f.cfg.Root.Children[0].MaxResources = nil // no queue limit: only the node's room matters
	// The node has 2 free guaranteed vcores: two of three promotions fit.
	got := CheckPromotions(f, app, []*Container{opp("a", "n1", ContainerRunning), opp("b", "n1", ContainerRunning), opp("c", "n1", ContainerRunning)})
	if got[0] != nil || got[1] != nil || got[2] != PromoteNoRoom {
		t.Fatalf("decisions %v, want grant, grant, no room", got)
	}
	if !PromoteNoRoom.Retryable || PromoteNotYours.Retryable {
		t.Fatalf("retryability: no room must be retryable, a foreign container must not")
	}
}
