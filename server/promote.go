package server

import (
	"time"

	"github.com/weft-sched/weft/fsm"
	wrpc "github.com/weft-sched/weft/rpc"
	"github.com/weft-sched/weft/scheduler"
)

// promote grants what it can of an AM's promotion requests (SPEC §10): the
// scheduler decides which containers may become guaranteed, the FSM
// re-checks each node's capacity as it records them, and the nodes are told
// at once so their agents stop counting the containers as evictable (their
// heartbeats would tell them within a second anyway).
func (s *Server) promote(st *fsm.State, app *scheduler.App, attempt int, ids []string, reply *wrpc.AMAllocateResponse) error {
	cs := make([]*scheduler.Container, len(ids))
	for i, id := range ids {
		if c, ok := st.Container(id); ok {
			cs[i] = c
		}
	}
	decisions := scheduler.CheckPromotions(st, app, cs)
	var grant []string
	for i, d := range decisions {
		switch {
		case d == nil && cs[i].Promoted:
			reply.Promoted = append(reply.Promoted, ids[i]) // promoted before
			continue
		case d == nil:
			grant = append(grant, ids[i])
			continue
		}
		reply.PromotionFailures = append(reply.PromotionFailures, wrpc.PromotionFailure{ID: ids[i], Reason: d.Reason, Retryable: d.Retryable})
	}
	if len(grant) == 0 {
		return nil
	}
	res, _, err := s.raftApply(fsm.PromoteType, &fsm.PromoteRequest{AppID: app.ID, Attempt: attempt, IDs: grant, Now: time.Now().UnixNano()})
	if err != nil {
		return err
	}
	after := s.fsm.State()
	for i, why := range res.(*fsm.PromoteResult).Refused {
		if why != "" {
			// The node's room went to someone else in between: ask again.
			reply.PromotionFailures = append(reply.PromotionFailures, wrpc.PromotionFailure{ID: grant[i], Reason: why, Retryable: true})
			continue
		}
		reply.Promoted = append(reply.Promoted, grant[i])
		c, _ := after.Container(grant[i])
		if n, ok := after.Node(c.NodeID); ok {
			go s.tellNodePromoted(n.Address, c.ID)
		}
	}
	s.logger.Info("promoted opportunistic containers", "app", app.ID, "promoted", len(reply.Promoted), "refused", len(reply.PromotionFailures))
	return nil
}

// tellNodePromoted tells a container's agent it is now guaranteed.
func (s *Server) tellNodePromoted(addr, id string) {
	if err := s.pool.Call(addr, "Container.Promote", &wrpc.ContainerIDRequest{ID: id}, &struct{}{}); err != nil {
		s.logger.Warn("could not tell the node of a promotion; its next heartbeat will", "container", id, "error", err)
	}
}
