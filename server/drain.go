package server

import (
	"context"
	"time"

	"github.com/weft-sched/weft/fsm"
	wrpc "github.com/weft-sched/weft/rpc"
	"github.com/weft-sched/weft/scheduler"
)

// Drain drains a node (SPEC §20): it becomes DRAINING, so that neither the
// scheduler nor any AMRMProxy places a container there, and what still
// runs there at the deadline (the leader's clock plus args.Deadline,
// default one hour) is killed with reason "drained". Disable makes the
// node READY again. Draining a DOWN node is a conflict.
func (e *Node) Drain(ctx context.Context, args *wrpc.NodeDrainRequest, reply *wrpc.WriteResponse) error {
	if done, err := e.srv.forwardWrite(ctx, "Node.Drain", args, reply); done {
		return err
	}
	if err := scheduler.ValidateNodeID(args.ID); err != nil {
		return wrpc.Errorf(wrpc.CodeBadRequest, "id: %v", err)
	}
	deadline := args.Deadline
	switch {
	case deadline < 0:
		return wrpc.Errorf(wrpc.CodeBadRequest, "deadline: %s is negative; give how long running containers may go on (e.g. 1h)", deadline)
	case deadline == 0:
		deadline = wrpc.DefaultDrainDeadline
	}
	now := e.srv.clock.Now()
	_, index, err := e.srv.raftApplyRequest(ctx, &args.RequestHeader, fsm.NodeDrainType, &fsm.NodeDrainRequest{
		ID: args.ID, Drain: !args.Disable, Deadline: now.Add(deadline).UnixNano(), Now: now.UnixNano(),
	})
	reply.Index = index
	if err != nil {
		return err
	}
	// The least-loaded list the agents' AMRMProxies allocate from is
	// rebuilt at the next heartbeat, without (or again with) this node.
	e.srv.board.invalidate()
	if args.Disable {
		e.srv.logger.Info("node drain ended", "node", args.ID)
	} else {
		e.srv.logger.Info("node draining", "node", args.ID, "deadline", now.Add(deadline).UTC().Format(time.RFC3339))
	}
	return nil
}

// invalidate makes the next heartbeat rebuild the least-loaded list.
func (b *loadBoard) invalidate() {
	b.mu.Lock()
	defer b.mu.Unlock()
	if !b.computed.IsZero() {
		b.computed = time.Time{}
	}
}

// drainTick kills, with reason drained, the containers still live on the
// DRAINING nodes whose deadline has passed; their AMs see them complete
// and ask again, and the scheduler places the new asks elsewhere. It
// reads only the DRAINING nodes.
func (s *Server) drainTick(ctx context.Context, now time.Time) {
	ids := drainKillsDue(s.fsm.State(), now)
	if len(ids) == 0 {
		return
	}
	s.logger.Info("killing containers on drained nodes past their deadline", "count", len(ids))
	if _, _, err := s.raftApply(ctx, fsm.ContainerStopType, &fsm.ContainerStopRequest{IDs: ids, Reason: scheduler.ReasonDrained, Now: now.UnixNano()}); err != nil {
		s.logger.Error("kill containers on drained nodes", "error", err)
	}
}

// drainKillsDue returns the live containers, not being killed yet, on
// DRAINING nodes whose deadline is at or before now.
func drainKillsDue(st *fsm.State, now time.Time) []string {
	var ids []string
	for _, n := range st.DrainingNodes() {
		if n.DrainDeadline <= 0 || n.DrainDeadline > now.UnixNano() {
			continue
		}
		for _, c := range st.NodeLiveContainers(n.ID) {
			if !c.KillRequested {
				ids = append(ids, c.ID)
			}
		}
	}
	return ids
}
