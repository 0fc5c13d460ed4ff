package fsm

import (
	"slices"

	"github.com/weft-sched/weft/scheduler"
)

// Node reservations of capacity queues (scheduler/reservation.go) are
// held on both sides: the node names the container it is held for, and
// the app lists its reserved nodes, so that either can release the other.
// A reservation is made and released by the leader's plans, and released
// here too when its container is placed, its app ends or its node leaves
// READY.

// applyReservation makes or releases the reservation plan entry p names.
func (t *txn) applyReservation(p *scheduler.Placement, node *scheduler.Node, app *scheduler.App, now int64) string {
	if p.Unreserve {
		if r := node.Reservation; r == nil || r.AppID != p.AppID {
			return "the node holds no reservation of the app"
		}
		a, _ := t.mutableApp(p.AppID)
		t.dropReservation(a, p.NodeID)
		t.putApp(a)
		return ""
	}
	if node.Reservation != nil {
		return "the node is reserved already, for " + node.Reservation.AppID
	}
	if !p.Resources.Fits(node.Capacity) {
		return "the node could never hold the container"
	}
	r := scheduler.Reservation{AppID: p.AppID, NodeID: p.NodeID, Attempt: p.Attempt, AskID: p.AskID, IsAM: p.IsAM,
		Resources: p.Resources, Since: now}
	if why := scheduler.ValidateReservation(app, &r); why != "" {
		return why
	}
	a, _ := t.mutableApp(p.AppID)
	a.Reservations = append(slices.Clip(a.Reservations), r)
	t.putApp(a)
	n, _ := t.mutableNode(p.NodeID)
	n.Reservation = &r
	t.putNode(n)
	return ""
}

// dropReservation releases the reservation app a holds on node id, on
// both sides; the caller stores a.
func (t *txn) dropReservation(a *scheduler.App, id string) {
	a.Reservations = slices.DeleteFunc(slices.Clone(a.Reservations), func(r scheduler.Reservation) bool { return r.NodeID == id })
	if len(a.Reservations) == 0 {
		a.Reservations = nil
	}
	if n, ok := t.mutableNode(id); ok && n.Reservation != nil && n.Reservation.AppID == a.ID {
		n.Reservation = nil
		t.putNode(n)
	}
}

// releaseAppReservations releases every node an ended app holds; the
// caller stores a.
func (t *txn) releaseAppReservations(a *scheduler.App) {
	for _, r := range a.Reservations {
		if n, ok := t.mutableNode(r.NodeID); ok && n.Reservation != nil && n.Reservation.AppID == a.ID {
			n.Reservation = nil
			t.putNode(n)
		}
	}
	a.Reservations = nil
}

// releaseNodeReservation releases a node leaving READY from the app that
// held it; the caller stores n.
func (t *txn) releaseNodeReservation(n *scheduler.Node) {
	r := n.Reservation
	n.Reservation = nil
	if a, ok := t.mutableApp(r.AppID); ok {
		a.Reservations = slices.DeleteFunc(slices.Clone(a.Reservations), func(o scheduler.Reservation) bool { return o.NodeID == n.ID })
		if len(a.Reservations) == 0 {
			a.Reservations = nil
		}
		t.putApp(a)
	}
}
