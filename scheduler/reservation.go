package scheduler

import (
	"fmt"
	"sort"
	"time"
)

// Node reservations of capacity queues, as YARN's Capacity Scheduler
// makes them (RegularContainerAllocator): when the container a capacity
// leaf should get next fits on no node, the pass reserves the node with
// free room that comes closest to holding it. A reservation counts
// against the leaf, its ancestors and its user like a container (so it
// respects max capacity and the user limit), and bars the node to every
// other app: room freed there accumulates until the container fits. That
// is how capacity lent to a sibling with smaller containers comes back:
// without it the sibling would take each slot as it frees.
//
// A reservation ends when its container is placed — on its node, or on
// any other that has room first (YARN's continue-looking) — when its app,
// attempt or ask goes, when its node leaves READY, and after the
// scheduler's capacity.reservation_timeout, when the node is given back
// and the app may not reserve it again for as long. Fair and DRF queues
// make none: their starved apps take room back by preemption.

// Reservation is a node held for one container of an app (App and Node
// both record it; the FSM keeps them together).
type Reservation struct {
	AppID   string `codec:"app_id"`
	NodeID  string `codec:"node_id"`
	Attempt int    `codec:"attempt"`
	// AskID is the ask the container is for; IsAM marks the AM container
	// of attempt Attempt instead.
	AskID     uint64    `codec:"ask_id"`
	IsAM      bool      `codec:"is_am,omitempty"`
	Resources Resources `codec:"resources"`
	Since     int64     `codec:"since"` // Unix ns
}

// MaxReservationsPerApp bounds the nodes one app may hold reserved.
const MaxReservationsPerApp = 64

// Matches reports whether placement p is the container r holds its node
// for.
func (r *Reservation) Matches(p *Placement) bool {
	return r.AppID == p.AppID && r.IsAM == p.IsAM && (p.IsAM || r.AskID == p.AskID) && r.Attempt == p.Attempt
}

// ValidateReservation checks a reservation against its app as the FSM
// holds it: the app's current attempt asks for it (its AM container, or
// an ask with a container not yet reserved) with the same resources, and
// the app holds fewer than MaxReservationsPerApp. It returns why not.
func ValidateReservation(app *App, r *Reservation) string {
	if len(app.Reservations) >= MaxReservationsPerApp {
		return fmt.Sprintf("the app holds %d reservations, the most one may", MaxReservationsPerApp)
	}
	return reservationGone(app, r, len(app.Reservations))
}

// reservationGone returns why r no longer stands for a container of app
// (empty: it does), counting the first n of the app's reservations as
// already standing.
func reservationGone(app *App, r *Reservation, n int) string {
	if app.State.Terminal() {
		return "the app has ended"
	}
	if r.IsAM {
		if !app.AMPending || r.Attempt != app.CurrentAttempt()+1 {
			return "the app no longer needs that AM container"
		}
		if !sameResources(r.Resources, app.Spec.AMResources) {
			return "resources differ from the AM's"
		}
		return ""
	}
	if app.State != AppRunning || r.Attempt != app.CurrentAttempt() {
		return "the app's attempt has changed"
	}
	k := askIndexOf(app.Asks, r.AskID)
	if k < 0 || !sameResources(r.Resources, app.Asks[k].Resources) {
		return "the app no longer asks for it"
	}
	held := 0
	for _, o := range app.Reservations[:n] {
		if !o.IsAM && o.AskID == r.AskID && o.NodeID != r.NodeID {
			held++
		}
	}
	if held >= app.Asks[k].Count {
		return "every container the ask still wants is reserved"
	}
	return ""
}

func sameResources(a, b Resources) bool { return a.Fits(b) && b.Fits(a) }

func askIndexOf(asks []Ask, id uint64) int {
	for i := range asks {
		if asks[i].AskID == id {
			return i
		}
	}
	return -1
}

// reserveKey names a node an app gave back at its reservation's timeout.
type reserveKey struct{ app, node string }

// reservations of a pass: the nodes held, by node, and what the pass does
// with them first (fulfilReservations).
type heldNode struct {
	r   *Reservation
	app *appNode
}

// fulfilReservations runs first in a pass over capacity queues: each
// reservation whose container now fits on its node, or on another node
// with room, is placed there; one that no longer stands, or has waited
// past the timeout, is released; the rest keep their nodes barred to
// every other app for the pass (s.reserved). It returns the plan entries.
func (s *pass) fulfilReservations(held []heldNode, timeout time.Duration) []Placement {
	if s.reserved == nil {
		s.reserved = map[string]string{}
	}
	for _, h := range held {
		s.reserved[h.r.NodeID] = h.r.AppID
	}
	var out []Placement
	// First the containers that fit on their own nodes, so that one that
	// moves elsewhere never takes a node its app reserved for another.
	var rest []heldNode
	for _, h := range held {
		r := h.r
		n := s.candidate(r.NodeID)
		switch {
		case n == nil: // not READY: the FSM has released it already
			delete(s.reserved, r.NodeID)
		case r.Resources.Fits(n.free):
			delete(s.reserved, r.NodeID)
			out = append(out, s.placeReserved(h, n))
		default:
			rest = append(rest, h)
		}
	}
	for _, h := range rest {
		r, a := h.r, h.app
		release := Placement{AppID: r.AppID, Attempt: r.Attempt, AskID: r.AskID, IsAM: r.IsAM, NodeID: r.NodeID, Resources: r.Resources, Unreserve: true}
		if other := s.heap.best(r.Resources, s.fence(a)); other != nil && s.reserved[other.node.ID] == "" {
			delete(s.reserved, r.NodeID)
			out = append(out, release, s.placeReserved(h, other))
		} else if s.now.Sub(time.Unix(0, r.Since)) >= timeout {
			delete(s.reserved, r.NodeID)
			out = append(out, release)
			s.waits.gaveBack(reserveKey{r.AppID, r.NodeID}, s.now.Add(timeout))
			s.unchargeReservation(h)
		}
	}
	return out
}

// placeReserved places a reservation's container on n: what the
// reservation charged its queue becomes the container's.
func (s *pass) placeReserved(h heldNode, n *candidate) Placement {
	r := h.r
	p := Placement{AppID: r.AppID, Attempt: r.Attempt, AskID: r.AskID, IsAM: r.IsAM, NodeID: n.node.ID, Resources: r.Resources}
	n.free = n.free.Sub(r.Resources)
	n.refresh()
	s.heap.update(n)
	h.app.usage = h.app.usage.Add(r.Resources)
	if r.IsAM {
		h.app.app = withAMPlaced(h.app.app)
	}
	return p
}

// unchargeReservation takes back what a released reservation charged its
// queue and user, and gives its container back to the app's demand.
func (s *pass) unchargeReservation(h heldNode) {
	r, a := h.r, h.app
	leaf := a.queue
	for q := leaf; q != nil; q = q.parent {
		q.usage = clampPositive(q.usage.Sub(r.Resources))
		if a.runnable {
			q.pending = q.pending.Add(r.Resources)
		}
	}
	if leaf.cap != nil {
		u := leaf.cap.user(a.app.Spec.User)
		u.used = clampPositive(u.used.Sub(r.Resources))
		if a.runnable {
			leaf.cap.addDemand(a.app.Spec.User, r.Resources)
		}
	}
	a.pending = a.pending.Add(r.Resources)
	for i := range a.asks {
		if !r.IsAM && a.asks[i].AskID == r.AskID {
			a.asks[i].Count++
		}
	}
	if r.IsAM {
		a.app = withAMPending(a.app)
	}
}

// candidate returns the pass's READY node id, or nil.
func (s *pass) candidate(id string) *candidate {
	i := sort.Search(len(s.nodes), func(i int) bool { return s.nodes[i].node.ID >= id })
	if i < len(s.nodes) && s.nodes[i].node.ID == id {
		return s.nodes[i]
	}
	return nil
}

// reserve holds a node for the container of r that app a (in capacity
// leaf a.queue) should get next and that fits nowhere: the READY node
// with free room, large enough for r once its tasks end (reservable), that the fence allows
// and loc accepts at level, not reserved already nor given back by a
// lately, that comes closest to holding r (the least of each resource's
// free ÷ wanted), the lowest ID among equals. It returns the entry, or
// false when no node qualifies or a holds its most.
func (s *pass) reserve(a *appNode, r Resources, ask *Ask, loc Locality, level int) (Placement, bool) {
	if a.queue.cap == nil || a.reservations >= MaxReservationsPerApp {
		return Placement{}, false
	}
	f := s.fence(a)
	var best *candidate
	bestCover := -1.0
	for _, c := range s.nodes {
		if c.free.MemoryMB <= 0 || c.free.Vcores <= 0 || !r.Fits(c.node.Capacity) || f.bars(c.node.ID) ||
			s.reserved[c.node.ID] != "" || s.waits.givenBack(reserveKey{a.app.ID, c.node.ID}, s.now) {
			continue
		}
		if level != levelAny && !nodeAt(loc, c.node, level, s.rackOf) {
			continue
		}
		if cover := coverage(c.free, r); cover > bestCover && s.reservable(c, r) {
			best, bestCover = c, cover
		}
	}
	if best == nil {
		return Placement{}, false
	}
	if s.reserved == nil {
		s.reserved = map[string]string{}
	}
	s.reserved[best.node.ID] = a.app.ID
	a.reservations++
	p := Placement{AppID: a.app.ID, Attempt: a.app.CurrentAttempt(), NodeID: best.node.ID, Resources: r, Reserve: true}
	if ask == nil {
		p.IsAM, p.Attempt = true, a.app.CurrentAttempt()+1
	} else {
		p.AskID = ask.AskID
	}
	return p, true
}

// reservable reports whether r could fit on c once its task containers
// end: its AM containers run as long as their apps, so a node whose AMs
// alone leave too little room is no use to hold.
func (s *pass) reservable(c *candidate, r Resources) bool {
	room := c.node.Capacity
	for _, x := range s.st.NodeLiveContainers(c.node.ID) {
		if x.IsAM && x.ExecutionType == Guaranteed {
			room = room.Sub(x.Resources)
		}
	}
	return r.Fits(room)
}

// withAMPending returns a copy of app that needs its AM container again.
func withAMPending(app *App) *App {
	c := *app
	c.AMPending = true
	return &c
}

// gaveBack remembers that an app gave a node back at its reservation's
// timeout, until until; givenBack reports whether that is still so.
func (l *LocalityWaits) gaveBack(k reserveKey, until time.Time) {
	if l.givenBackUntil == nil {
		l.givenBackUntil = map[reserveKey]time.Time{}
	}
	for old, t := range l.givenBackUntil { // few: one per timed-out reservation
		if !t.After(until.Add(-time.Hour)) {
			delete(l.givenBackUntil, old)
		}
	}
	l.givenBackUntil[k] = until
}

func (l *LocalityWaits) givenBack(k reserveKey, now time.Time) bool {
	until, ok := l.givenBackUntil[k]
	return ok && now.Before(until)
}
