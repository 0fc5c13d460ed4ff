package fsm

import (
	"fmt"

	"github.com/weft-sched/weft/scheduler"
)

// completeContainer records that c completed and applies the consequences:
// a current AM container that ends while its app runs starts the next
// attempt, or fails the app when no attempts are left.
func (t *txn) completeContainer(c *scheduler.Container, reason scheduler.ExitReason, exitCode *int, diag string, at int64) {
	if !c.State.Live() {
		return
	}
	n := c.Copy()
	n.State = scheduler.ContainerCompleted
	if c.KillRequested && (reason == scheduler.ReasonKilled || reason == "") {
		reason = c.KillReason
	}
	n.Reason = reason
	n.ExitCode = exitCode
	n.Diagnostics = diag
	n.FinishedAt = at
	t.putContainer(n)
	if n.IsAM {
		t.amCompleted(n, at)
	}
}

// stopContainer stops a live container: one that never started completes
// now; a started one is marked for its agent to kill.
func (t *txn) stopContainer(c *scheduler.Container, reason scheduler.ExitReason, now int64) {
	switch {
	case !c.State.Live():
	case c.State == scheduler.ContainerAllocated:
		t.completeContainer(c, reason, nil, "stopped before it started", now)
	case !c.KillRequested:
		n := c.Copy()
		n.KillRequested = true
		n.KillReason = reason
		t.putContainer(n)
	}
}

// applyContainerUpdate records what a node's agent reports: first the
// opportunistic containers it runs that were allocated by AMRMProxies,
// then state changes.
func (t *txn) applyContainerUpdate(req *ContainerUpdateRequest) error {
	if len(req.Records) > 0 {
		if err := t.recordOpportunistic(req.NodeID, req.Records); err != nil {
			return err
		}
	}
	for _, u := range req.Updates {
		c, ok := t.container(u.ID)
		if !ok || c.NodeID != req.NodeID || !c.State.Live() {
			continue
		}
		switch u.State {
		case scheduler.ContainerQueued:
			if c.State == scheduler.ContainerAllocated {
				n := c.Copy()
				n.State = scheduler.ContainerQueued
				t.putContainer(n)
			}
		case scheduler.ContainerRunning:
			if c.State == scheduler.ContainerAllocated || c.State == scheduler.ContainerQueued {
				n := c.Copy()
				n.State = scheduler.ContainerRunning
				n.StartedAt = u.At
				if u.StartedAt > 0 {
					n.StartedAt = u.StartedAt
				}
				t.putContainer(n)
			} else if c.State == scheduler.ContainerPaused {
				n := c.Copy() // resumed: it started when it first did
				n.State = scheduler.ContainerRunning
				t.putContainer(n)
			}
		case scheduler.ContainerPaused:
			// Only opportunistic work is paused, and only once it runs.
			if c.ExecutionType == scheduler.Opportunistic && (c.State == scheduler.ContainerRunning || c.State == scheduler.ContainerAllocated ||
				c.State == scheduler.ContainerQueued) {
				n := c.Copy()
				n.State = scheduler.ContainerPaused
				if n.StartedAt == 0 {
					n.StartedAt = u.StartedAt
				}
				t.putContainer(n)
			}
		case scheduler.ContainerCompleted:
			if c.StartedAt == 0 && u.StartedAt > 0 {
				// It ran and ended between two reports.
				c = c.Copy()
				c.StartedAt = u.StartedAt
			}
			t.completeContainer(c, u.Reason, u.ExitCode, u.Diagnostics, u.At)
		}
	}
	return nil
}

// applyContainerUpdateBatch applies each update in order, as its own
// command would be: a rejected one changed nothing (recordOpportunistic
// rejects before any change) and the rest still apply.
func (t *txn) applyContainerUpdateBatch(req *ContainerUpdateBatchRequest) *ContainerUpdateBatchResult {
	res := &ContainerUpdateBatchResult{Errors: make([]error, len(req.Updates))}
	for i := range req.Updates {
		res.Errors[i] = t.applyContainerUpdate(&req.Updates[i])
	}
	return res
}

// applyContainerStop stops containers; it is refused whole if any ID is
// unknown or belongs to another app.
func (t *txn) applyContainerStop(req *ContainerStopRequest) error {
	cs := make([]*scheduler.Container, 0, len(req.IDs))
	for _, id := range req.IDs {
		c, ok := t.container(id)
		if !ok {
			return reject(ErrNotFound, "container %s not found", id)
		}
		if req.AppID != "" && c.AppID != req.AppID {
			return reject(ErrInvalid, "container %s belongs to %s, not %s", id, c.AppID, req.AppID)
		}
		cs = append(cs, c)
	}
	for _, c := range cs {
		if cur, _ := t.container(c.ID); cur != nil {
			t.stopContainer(cur, req.Reason, req.Now)
		}
	}
	return nil
}

// applyPlan commits the placements that still fit.
func (t *txn) applyPlan(req *PlanApplyRequest) *PlanResult {
	res := &PlanResult{IDs: make([]string, len(req.Placements))}
	for i, p := range req.Placements {
		id, why := t.place(i, &p, req.Now)
		if why != "" {
			res.Refused = append(res.Refused, fmt.Sprintf("placement %d (%s on %s): %s", i, p.AppID, p.NodeID, why))
			continue
		}
		res.IDs[i] = id
	}
	return res
}

// place re-checks and records one placement; it returns the container's
// ID, or why it was refused.
func (t *txn) place(pos int, p *scheduler.Placement, now int64) (id, why string) {
	node, ok := t.node(p.NodeID)
	if !ok || node.Status != scheduler.NodeReady {
		return "", "node is not ready"
	}
	app, ok := t.app(p.AppID)
	if !ok || app.State.Terminal() {
		return "", "app is not active"
	}
	if p.Reserve || p.Unreserve {
		return "", t.applyReservation(p, node, app, now)
	}
	id = scheduler.PlacedContainerID(app, t.index, pos)
	if p.Opportunistic {
		if why := t.placeOpportunistic(id, p, app, now); why != "" {
			return "", why
		}
		return id, ""
	}
	if !p.Resources.Fits(node.FreeGuaranteed()) {
		return "", fmt.Sprintf("%s exceeds the node's free guaranteed capacity %s", p.Resources, node.FreeGuaranteed())
	}
	r := node.Reservation
	if r != nil && r.AppID != p.AppID {
		return "", fmt.Sprintf("the node is reserved for %s", r.AppID)
	}
	a, _ := t.mutableApp(p.AppID)
	if p.IsAM {
		if !app.AMPending || p.Attempt != app.CurrentAttempt()+1 {
			return "", "the app does not need an AM container for this attempt"
		}
		if !p.Resources.Fits(app.Spec.AMResources) || !app.Spec.AMResources.Fits(p.Resources) {
			return "", "resources differ from the AM's"
		}
		a.AMPending = false
		a.Attempts = append(a.Attempts, scheduler.Attempt{Attempt: p.Attempt, ContainerID: id, NodeID: p.NodeID, StartedAt: now})
	} else {
		if app.State != scheduler.AppRunning || p.Attempt != app.CurrentAttempt() {
			return "", "the app's current attempt is not running"
		}
		k := askIndex(a.Asks, p.AskID)
		if k < 0 || a.Asks[k].Count == 0 {
			return "", "no outstanding ask"
		}
		if !p.Resources.Fits(a.Asks[k].Resources) || !a.Asks[k].Resources.Fits(p.Resources) {
			return "", "resources differ from the ask's"
		}
		a.Asks[k].Count--
		if a.Asks[k].Count == 0 {
			a.Asks = append(a.Asks[:k], a.Asks[k+1:]...)
		}
	}
	a.Used, a.Live = a.Used.Add(p.Resources), a.Live+1
	if r != nil && r.Matches(p) {
		t.dropReservation(a, p.NodeID) // its container is placed
	}
	t.putApp(a)
	t.storeContainer(&scheduler.Container{
		ID:            id,
		AppID:         p.AppID,
		Attempt:       p.Attempt,
		NodeID:        p.NodeID,
		AskID:         p.AskID,
		Resources:     p.Resources,
		ExecutionType: scheduler.Guaranteed,
		IsAM:          p.IsAM,
		State:         scheduler.ContainerAllocated,
		AllocatedAt:   now,
		CreateIndex:   t.index,
	}, false)
	return id, ""
}

func askIndex(asks []scheduler.Ask, id uint64) int {
	for i, a := range asks {
		if a.AskID == id {
			return i
		}
	}
	return -1
}

// applyPreemptMark marks victims and records each preemption on its app.
func (t *txn) applyPreemptMark(req *PreemptMarkRequest) error {
	for _, m := range req.Marks {
		c, ok := t.container(m.ContainerID)
		if !ok || !c.State.Live() || c.PreemptKillAt > 0 || c.ExecutionType != scheduler.Guaranteed {
			continue
		}
		n := c.Copy()
		n.PreemptKillAt, n.PreemptFor, n.PreemptReason = req.KillAt, m.ForApp, m.Reason
		t.putContainer(n)
		if a, ok := t.app(c.AppID); ok {
			a = a.Copy()
			a.Preemptions = append(a.Preemptions, scheduler.PreemptionRecord{
				ContainerID: c.ID, NodeID: c.NodeID, Reason: m.Reason, ForApp: m.ForApp, At: req.Now})
			if k := len(a.Preemptions) - scheduler.MaxPreemptionRecords; k > 0 {
				a.Preemptions = a.Preemptions[k:]
			}
			t.putApp(a)
		}
	}
	return nil
}
