package server

import (
	"context"

	"github.com/hashicorp/serf/serf"
)

// establishLeadership runs on a new leader once its barrier has applied
// every earlier entry, before it is ready (raftnode.Hooks.Establish): the
// least-loaded board, node liveness and the unmanaged AMs' clocks start
// afresh for the term, from what serf says of the agents now, and the
// workload key exists.
func (s *Server) establishLeadership(ctx context.Context) {
	now := s.clock.Now()
	s.board.reset(now)
	s.unmanagedMu.Lock()
	s.unmanaged.Reset(now, s.fsm.State().ActiveApps())
	s.unmanagedMu.Unlock()
	s.livenessMu.Lock()
	s.liveness.Reset(now)
	for _, m := range s.serf.Members() {
		if m.Tags[TagRole] == RoleAgent {
			s.liveness.Gossip(m.Tags[TagID], gossipOf(m.Status))
		}
	}
	s.livenessMu.Unlock()
	s.ensureWorkloadKey(ctx)
}

// gossipOf maps a serf member status to what liveness needs of it.
func gossipOf(st serf.MemberStatus) gossipStatus {
	switch st {
	case serf.StatusAlive:
		return gossipAlive
	case serf.StatusFailed:
		return gossipFailed
	case serf.StatusLeft, serf.StatusLeaving:
		return gossipLeft
	}
	return gossipUnknown
}
