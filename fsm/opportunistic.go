package fsm

import (
	"fmt"
	"strings"

	"github.com/weft-sched/weft/scheduler"
)

// maxContainerIDLength bounds IDs minted outside the FSM (by agents).
const maxContainerIDLength = 256

// placeOpportunistic records an opportunistic container the leader
// allocated centrally, as id. It takes no guaranteed capacity: its node
// queues it if it cannot start at once. It returns why it was refused, or "".
func (t *txn) placeOpportunistic(id string, p *scheduler.Placement, app *scheduler.App, now int64) string {
	switch {
	case p.IsAM:
		return "an AM container cannot be opportunistic"
	case app.State != scheduler.AppRunning || app.AMPending || p.Attempt != app.CurrentAttempt():
		return "the app's current attempt is not running"
	case p.Resources.Validate() != nil || p.Resources.MemoryMB <= 0 || p.Resources.Vcores <= 0:
		return "resources must be positive"
	}
	t.putContainer(&scheduler.Container{
		ID:            id,
		AppID:         p.AppID,
		Attempt:       p.Attempt,
		NodeID:        p.NodeID,
		AskID:         p.AskID,
		Resources:     p.Resources,
		ExecutionType: scheduler.Opportunistic,
		State:         scheduler.ContainerAllocated,
		AllocatedAt:   now,
		CreateIndex:   t.index,
	})
	return ""
}

// recordOpportunistic inserts the opportunistic containers a node reports
// that AMRMProxies allocated. A record that is malformed, already known or
// of an unknown app is skipped; a live container of an app or attempt that
// is over is recorded already marked for its agent to kill.
func (t *txn) recordOpportunistic(nodeID string, records []ContainerRecord) error {
	if _, ok := t.node(nodeID); !ok {
		return reject(ErrNotFound, "node %s is not registered", nodeID)
	}
	for i := range records {
		r := &records[i]
		if err := ValidateRecord(r); err != nil {
			continue
		}
		if _, known := t.container(r.ID); known {
			continue
		}
		app, ok := t.app(r.AppID)
		if !ok {
			continue
		}
		c := &scheduler.Container{
			ID: r.ID, AppID: r.AppID, Attempt: r.Attempt, NodeID: nodeID, AskID: r.AskID, Resources: r.Resources,
			ExecutionType: scheduler.Opportunistic, Distributed: true, State: r.State,
			AllocatedAt: r.AllocatedAt, StartedAt: r.StartedAt, CreateIndex: t.index,
		}
		if r.State == scheduler.ContainerCompleted {
			c.ExitCode, c.Reason, c.Diagnostics, c.FinishedAt = r.ExitCode, r.Reason, r.Diagnostics, r.FinishedAt
		}
		if c.State.Live() && (app.State.Terminal() || app.AMPending || r.Attempt != app.CurrentAttempt()) {
			c.KillRequested, c.KillReason = true, scheduler.ReasonKilled
		}
		t.putContainer(c)
	}
	return nil
}

// ValidateRecord reports why an agent's record of a container cannot be
// recorded, or nil.
func ValidateRecord(r *ContainerRecord) error {
	switch {
	case !strings.HasPrefix(r.ID, scheduler.AgentContainerIDPrefix) || len(r.ID) > maxContainerIDLength:
		// Only IDs an agent mints: one that looked like a leader's could
		// collide with a later placement.
		return fmt.Errorf("container id %.64q is not an agent's (%s…, at most %d bytes)", r.ID, scheduler.AgentContainerIDPrefix, maxContainerIDLength)
	case r.State != scheduler.ContainerQueued && r.State != scheduler.ContainerRunning && r.State != scheduler.ContainerPaused &&
		r.State != scheduler.ContainerCompleted:
		return fmt.Errorf("container %s: state %q is not QUEUED, RUNNING, PAUSED or COMPLETED", r.ID, r.State)
	case r.Resources.Validate() != nil || r.Resources.MemoryMB <= 0 || r.Resources.Vcores <= 0:
		return fmt.Errorf("container %s: resources must be positive", r.ID)
	}
	return nil
}

// applyPromote makes running opportunistic containers of the app's current
// attempt guaranteed, each only if its node's free guaranteed capacity
// still holds it: no promotion can overcommit a node. A container promoted
// already counts as promoted again.
func (t *txn) applyPromote(req *PromoteRequest) *PromoteResult {
	res := &PromoteResult{Refused: make([]string, len(req.IDs))}
	app, ok := t.app(req.AppID)
	for i, id := range req.IDs {
		c, known := t.container(id)
		switch {
		case !ok || app.State != scheduler.AppRunning || app.AMPending || req.Attempt != app.CurrentAttempt():
			res.Refused[i] = "the app's current attempt is not running"
		case !known || c.AppID != req.AppID || c.Attempt != req.Attempt:
			res.Refused[i] = "not a container of this app attempt"
		case c.Promoted && c.State.Live():
			continue
		case c.ExecutionType != scheduler.Opportunistic:
			res.Refused[i] = "already guaranteed"
		case c.State != scheduler.ContainerRunning || c.KillRequested:
			res.Refused[i] = "not running"
		}
		if res.Refused[i] != "" {
			continue
		}
		node, _ := t.node(c.NodeID)
		if node == nil || node.Status != scheduler.NodeReady {
			res.Refused[i] = "its node is not ready"
			continue
		}
		if !c.Resources.Fits(node.FreeGuaranteed()) {
			res.Refused[i] = fmt.Sprintf("%s exceeds the node's free guaranteed capacity %s", c.Resources, node.FreeGuaranteed())
			continue
		}
		n := c.Copy()
		n.ExecutionType, n.Promoted = scheduler.Guaranteed, true
		t.putContainer(n)
	}
	return res
}
