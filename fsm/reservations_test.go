package fsm

import (
	"strings"
	"testing"

	"github.com/weft-sched/weft/scheduler"
)

// A node reservation is held on the node and the app together: it bars
// the node to other apps' containers, is released by its own container's
// placement, by an unreserve entry, by its node leaving READY and by its
// app ending; an entry that names no standing ask is refused.
func TestNodeReservations(t *testing.T) {
	h := newHarness(t)
	epoch := h.register("n1", 8192)
	h.register("n2", 8192)
	app := h.runningApp("n2")
	other := h.runningApp("n2")
	big := scheduler.Resources{MemoryMB: 4096, Vcores: 4}
	h.ok(AskUpdateType, &AskUpdateRequest{AppID: app, Attempt: 1, SeenIndex: h.f.State().Index(),
		Asks: []scheduler.Ask{{AskID: 7, Count: 1, Resources: big, ExecutionType: scheduler.Guaranteed}}})
	reserve := scheduler.Placement{AppID: app, Attempt: 1, AskID: 7, NodeID: "n1", Resources: big, Reserve: true}
	plan := func(ps ...scheduler.Placement) *PlanResult {
		return h.ok(PlanApplyType, &PlanApplyRequest{Placements: ps, Now: 42}).(*PlanResult)
	}
	if res := plan(reserve); len(res.Refused) != 0 {
		t.Fatalf("reservation refused: %v", res.Refused)
	}
	n, _ := h.f.State().Node("n1")
	if r := n.Reservation; r == nil || r.AppID != app || r.Since != 42 || len(h.app(app).Reservations) != 1 {
		t.Fatalf("node reservation %+v, app's %+v", n.Reservation, h.app(app).Reservations)
	}
	// Another reservation of the same node, or of a container the ask no
	// longer wants, is refused.
	if res := plan(reserve); len(res.Refused) != 1 || !strings.Contains(res.Refused[0], "reserved already") {
		t.Fatalf("a second reservation of n1: %v", res.Refused)
	}
	if res := plan(scheduler.Placement{AppID: app, Attempt: 1, AskID: 7, NodeID: "n2", Resources: big, Reserve: true}); len(res.Refused) != 1 ||
		!strings.Contains(res.Refused[0], "every container the ask still wants is reserved") {
		t.Fatalf("a reservation past the ask's count: %v", res.Refused)
	}
	// Another app's container is refused the node; the reserved one takes
	// it and releases it.
	if res := plan(scheduler.Placement{AppID: other, Attempt: 1, IsAM: false, AskID: 1, NodeID: "n1", Resources: small}); len(res.Refused) != 1 ||
		!strings.Contains(res.Refused[0], "reserved for "+app) {
		t.Fatalf("another app on the reserved node: %v", res.Refused)
	}
	if res := plan(scheduler.Placement{AppID: app, Attempt: 1, AskID: 7, NodeID: "n1", Resources: big}); res.IDs[0] == "" {
		t.Fatalf("the reserved container refused: %v", res.Refused)
	}
	if n, _ := h.f.State().Node("n1"); n.Reservation != nil || len(h.app(app).Reservations) != 0 {
		t.Fatalf("the reservation outlived its container: %+v", n.Reservation)
	}

	// Released by an unreserve entry, by the node going DOWN, by the app
	// ending.
	h.ok(AskUpdateType, &AskUpdateRequest{AppID: app, Attempt: 1, SeenIndex: h.f.State().Index(),
		Asks: []scheduler.Ask{{AskID: 8, Count: 3, Resources: big, ExecutionType: scheduler.Guaranteed}}})
	r8 := func(node string) scheduler.Placement {
		return scheduler.Placement{AppID: app, Attempt: 1, AskID: 8, NodeID: node, Resources: big, Reserve: true}
	}
	plan(r8("n1"), r8("n2"))
	if got := len(h.app(app).Reservations); got != 2 {
		t.Fatalf("%d reservations, want 2", got)
	}
	release := r8("n2")
	release.Reserve, release.Unreserve = false, true
	plan(release)
	if n, _ := h.f.State().Node("n2"); n.Reservation != nil || len(h.app(app).Reservations) != 1 {
		t.Fatalf("unreserve left %+v", h.app(app).Reservations)
	}
	h.ok(NodeStatusType, &NodeStatusRequest{ID: "n1", Epoch: epoch, Status: scheduler.NodeDown, Reason: "ttl"})
	if n, _ := h.f.State().Node("n1"); n.Reservation != nil || len(h.app(app).Reservations) != 0 {
		t.Fatalf("a DOWN node kept its reservation: %+v", h.app(app).Reservations)
	}
	plan(r8("n2"))
	h.ok(AppFinishType, &AppFinishRequest{AppID: app, Attempt: 1, State: scheduler.AppFinished, Now: 50})
	if n, _ := h.f.State().Node("n2"); n.Reservation != nil || len(h.app(app).Reservations) != 0 {
		t.Fatalf("an ended app kept its reservation on n2")
	}
}
