package scheduler

import (
	"math"
	"slices"
)

// WithPlanned returns st as it will be once the guaranteed placements of
// plans (decided by earlier passes, not yet applied) are: their nodes hold
// them, their asks are that much smaller, an app whose AM container is
// placed waits for its AM. A pass on it decides only what those plans left
// to decide, so the leader can decide its next plan while the last one
// commits (plan pipelining) without placing an ask twice or a node past
// its capacity — the FSM would refuse such placements, wasting the plan.
//
// It is the FSM's placement rule (fsm's txn.place) restricted to what a
// pass reads; opportunistic placements change nothing a pass reads. A
// plan the FSM has applied since it was decided must not be given again:
// it would be counted twice (a pass then decides too little, never too
// much). st is not changed; nodes and apps the plans touch are copied.
func WithPlanned(st State, plans ...[]Placement) State {
	v := &plannedState{State: st, nodes: map[string]*Node{}, apps: map[string]*App{}}
	for _, plan := range plans {
		for i := range plan {
			v.add(&plan[i])
		}
	}
	if len(v.nodes)+len(v.apps) == 0 {
		return st
	}
	return v
}

// plannedState is a State with placements applied to copies of the nodes
// and apps they touch.
type plannedState struct {
	State
	nodes map[string]*Node
	apps  map[string]*App
	// base and baseNodes hold the state's active apps and nodes by ID,
	// made when first needed.
	base      map[string]*App
	baseNodes map[string]*Node
}

func (v *plannedState) add(p *Placement) {
	if p.Opportunistic {
		return
	}
	if !v.has(p.NodeID, p.AppID) {
		return // gone: the FSM refuses the placement
	}
	n, a := v.node(p.NodeID), v.app(p.AppID)
	switch {
	case p.Reserve:
		if n.Reservation == nil {
			// Made by the pass that planned it: its wait has not begun.
			r := Reservation{AppID: p.AppID, NodeID: p.NodeID, Attempt: p.Attempt, AskID: p.AskID, IsAM: p.IsAM, Resources: p.Resources,
				Since: math.MaxInt64}
			n.Reservation = &r
			a.Reservations = append(slices.Clip(a.Reservations), r)
		}
		return
	case p.Unreserve:
		n.Reservation = nil
		a.Reservations = slices.DeleteFunc(slices.Clone(a.Reservations), func(r Reservation) bool { return r.NodeID == p.NodeID })
		return
	case n.Reservation != nil && n.Reservation.Matches(p):
		n.Reservation = nil
		a.Reservations = slices.DeleteFunc(slices.Clone(a.Reservations), func(r Reservation) bool { return r.NodeID == p.NodeID })
	}
	n.AllocatedGuaranteed = n.AllocatedGuaranteed.Add(p.Resources)
	n.RunningGuaranteed++
	a.Used, a.Live = a.Used.Add(p.Resources), a.Live+1
	if p.IsAM {
		a.AMPending, a.Asks = false, nil
		a.Attempts = append(a.Attempts, Attempt{Attempt: p.Attempt, NodeID: p.NodeID})
		return
	}
	for k := range a.Asks {
		if a.Asks[k].AskID == p.AskID && a.Asks[k].Count > 0 {
			if a.Asks[k].Count--; a.Asks[k].Count == 0 {
				a.Asks = append(a.Asks[:k], a.Asks[k+1:]...)
			}
			return
		}
	}
}

// has reports whether the state holds the node and the active app.
func (v *plannedState) has(nodeID, appID string) bool {
	if v.baseNodes == nil {
		v.baseNodes = map[string]*Node{}
		for _, n := range v.State.Nodes() {
			v.baseNodes[n.ID] = n
		}
	}
	if v.base == nil {
		v.base = map[string]*App{}
		for _, a := range v.State.ActiveApps() {
			v.base[a.ID] = a
		}
	}
	_, okN := v.baseNodes[nodeID]
	_, okA := v.base[appID]
	return okN && okA
}

// node returns the planned copy of a node the state holds, made on first
// use.
func (v *plannedState) node(id string) *Node {
	if n, ok := v.nodes[id]; ok {
		return n
	}
	c := *v.baseNodes[id]
	v.nodes[id] = &c
	return &c
}

// app returns the planned copy of an active app the state holds, made on
// first use.
func (v *plannedState) app(id string) *App {
	if a, ok := v.apps[id]; ok {
		return a
	}
	c := v.base[id].Copy()
	v.apps[id] = c
	return c
}

// Nodes returns every node, the planned copies in place of the originals.
func (v *plannedState) Nodes() []*Node {
	nodes := v.State.Nodes()
	if len(v.nodes) == 0 {
		return nodes
	}
	out := make([]*Node, len(nodes))
	for i, n := range nodes {
		if c, ok := v.nodes[n.ID]; ok {
			n = c
		}
		out[i] = n
	}
	return out
}

// ActiveApps returns the active apps, the planned copies in place of the
// originals, in the state's order.
func (v *plannedState) ActiveApps() []*App {
	apps := v.State.ActiveApps()
	if len(v.apps) == 0 {
		return apps
	}
	out := make([]*App, len(apps))
	for i, a := range apps {
		if c, ok := v.apps[a.ID]; ok {
			a = c
		}
		out[i] = a
	}
	return out
}
