package server

import (
	"context"
	"fmt"
	"slices"

	"github.com/weft-sched/weft/fsm"
	wrpc "github.com/weft-sched/weft/rpc"
)

// A follower that does not know a token may be behind: the token may have
// been created a moment ago. It used to ask the leader about each such
// secret, so a flood of requests with random tokens (which anyone can
// send, before any credential is checked) became as many calls to the
// leader. Instead it asks the leader one question whatever the secret —
// how far has your state applied? — waits until its own state has applied
// as far, and looks again. The question is shared (group commit, as the
// heartbeats a follower forwards): requests that arrive while it is being
// asked wait for the next one, which every request then waiting shares, so
// a follower asks at most leaderIndexInFlight questions at once however
// many unknown tokens arrive. A token whose creation was acknowledged
// before the request arrived was applied on the leader before the answer,
// so it is found.

// leaderIndexInFlight is how many questions a follower asks the leader at
// once, and leaderIndexBatch how many waiting requests one answer serves.
const (
	leaderIndexInFlight = 1
	leaderIndexBatch    = 4096
)

// leaderIndexAsker shares "how far has the leader applied?" among the
// requests that need it.
type leaderIndexAsker = groupCommit[struct{}, uint64]

func newLeaderIndexAsker(ask commitFunc[struct{}, uint64]) *leaderIndexAsker {
	return newGroupCommit("the question to the leader", leaderIndexBatch, leaderIndexInFlight, ask)
}

// askLeaderIndex asks the leader how far its state has applied, for every
// request of the batch.
func (s *Server) askLeaderIndex(batch []struct{}) ([]uint64, error) {
	addr, _ := s.raft.LeaderWithID()
	if addr == "" || string(addr) == s.rpcAddr {
		return nil, wrpc.ErrNoLeader
	}
	ctx, cancel := context.WithTimeout(context.Background(), tokenLookupTimeout)
	defer cancel()
	var meta wrpc.ResponseMeta
	if err := s.pool.Call(ctx, string(addr), "Status.AppliedIndex", &wrpc.RequestHeader{}, &meta); err != nil {
		return nil, fmt.Errorf("%w: asking the leader how far it has applied: %v", wrpc.ErrUnavailable, err)
	}
	return slices.Repeat([]uint64{meta.Index}, len(batch)), nil
}

// catchUpWithLeader waits until this server's state has applied as far as
// the leader's had when asked (the question asked after the call began),
// for at most tokenLookupTimeout, and returns that state.
func (s *Server) catchUpWithLeader(ctx context.Context) (*fsm.State, error) {
	ctx, cancel := context.WithTimeout(ctx, tokenLookupTimeout)
	defer cancel()
	index, err := s.leaderIndex.submit(ctx, s.shutdownCh, struct{}{})
	if err != nil {
		return nil, err
	}
	for {
		st := s.fsm.State()
		if st.Index() >= index {
			return st, nil
		}
		select {
		case <-st.Changed():
		case <-ctx.Done():
			return nil, fmt.Errorf("%w: this server has applied up to index %d, the leader %d", wrpc.ErrUnavailable, st.Index(), index)
		case <-s.shutdownCh:
			return nil, wrpc.ErrNoLeader
		}
	}
}

// AppliedIndex answers how far the leader's state has applied (servers
// only: a follower catching up before it refuses a token it does not
// know). Only a leader that has applied everything of earlier terms
// answers.
func (e *Status) AppliedIndex(ctx context.Context, args *wrpc.RequestHeader, reply *wrpc.ResponseMeta) error {
	if !e.srv.IsLeader() || !e.srv.leaderReady.Load() {
		return wrpc.ErrNoLeader
	}
	reply.Index = e.srv.fsm.State().Index()
	return nil
}
