package server

import (
	"context"
	"sync"
	"time"

	"github.com/weft-sched/weft/fsm"
	wrpc "github.com/weft-sched/weft/rpc"
	"github.com/weft-sched/weft/scheduler"
)

// promoteWait bounds how long the leader waits for nodes to hear of
// promotions before it answers the AM; a node that did not hear in time
// learns from its next heartbeat.
const promoteWait = 2 * time.Second

// promote grants what it can of an AM's promotion requests (SPEC §10): the
// scheduler decides which containers may become guaranteed, the FSM
// re-checks each node's capacity as it records them, and the nodes are
// told before the AM hears "promoted", so their agents stop counting the
// containers as evictable (heartbeats repeat it until they have). Leader
// promotions are decided one request at a time, so two AMs of one queue
// cannot both pass its max_resources check on the same state.
func (s *Server) promote(ctx context.Context, app *scheduler.App, attempt int, ids []string, reply *wrpc.AMAllocateResponse) error {
	s.promoteMu.Lock()
	defer s.promoteMu.Unlock()
	st := s.fsm.State()
	cs := make([]*scheduler.Container, len(ids))
	for i, id := range ids {
		if c, ok := st.Container(id); ok {
			cs[i] = c
		}
	}
	var grant []string
	for i, d := range scheduler.CheckPromotions(st, app, cs) {
		switch {
		case d == nil && cs[i].Promoted:
			reply.Promoted = append(reply.Promoted, ids[i]) // promoted before
		case d == nil:
			grant = append(grant, ids[i])
		default:
			reply.PromotionFailures = append(reply.PromotionFailures, wrpc.PromotionFailure{ID: ids[i], Reason: d.Reason, Retryable: d.Retryable})
		}
	}
	if len(grant) == 0 {
		return nil
	}
	res, _, err := s.raftApply(ctx, fsm.PromoteType, &fsm.PromoteRequest{AppID: app.ID, Attempt: attempt, IDs: grant, Now: s.clock.Now().UnixNano()})
	if err != nil {
		return err
	}
	after := s.fsm.State()
	tellCtx, cancel := context.WithTimeout(ctx, promoteWait)
	defer cancel()
	var told sync.WaitGroup
	for i, why := range res.(*fsm.PromoteResult).Refused {
		if why != "" {
			// The node's room went to a guaranteed placement in between.
			reply.PromotionFailures = append(reply.PromotionFailures, wrpc.PromotionFailure{ID: grant[i], Reason: why, Retryable: true})
			continue
		}
		reply.Promoted = append(reply.Promoted, grant[i])
		c, _ := after.Container(grant[i])
		tok, err := s.relayToken(after, c) // a token of c as it is now: guaranteed
		if n, ok := after.Node(c.NodeID); ok && err == nil {
			told.Add(1)
			go func() {
				defer told.Done()
				s.tellNodePromoted(tellCtx, n.Address, c.ID, tok)
			}()
		}
	}
	told.Wait() // each call gives up at promoteWait
	s.logger.Info("promoted opportunistic containers", "app", app.ID, "promoted", len(reply.Promoted), "refused", len(reply.PromotionFailures))
	return nil
}

// tellNodePromoted tells a container's agent it is now guaranteed; token
// is a container token of it as guaranteed, which only servers mint.
func (s *Server) tellNodePromoted(ctx context.Context, addr, id, token string) {
	if err := s.agentPool.Call(ctx, addr, "Container.Promote", &wrpc.ContainerIDRequest{ID: id, Token: token}, &struct{}{}); err != nil {
		s.logger.Warn("could not tell the node of a promotion; its next heartbeat will", "container", id, "error", err)
	}
}
