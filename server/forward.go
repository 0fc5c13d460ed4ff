package server

import (
	"errors"
	"math/rand/v2"
	"time"

	"github.com/hashicorp/raft"
	"github.com/weft-sched/weft/fsm"
	wrpc "github.com/weft-sched/weft/rpc"
)

// raftApplyTimeout bounds how long a write waits to be enqueued in Raft.
const raftApplyTimeout = 30 * time.Second

// forwardWrite sends a write to the leader unless this server is it. It
// returns true when the request was handled elsewhere (reply and error are
// the leader's). With no leader known it holds the request, retrying with
// jitter, for up to RPCHoldTimeout and then fails with ErrNoLeader.
func (s *Server) forwardWrite(method string, args, reply any) (bool, error) {
	return s.forwardTo(method, args, reply, false)
}

// forwardRead sends a consistent read to the leader unless this server is a
// ready leader; stale reads are always answered locally.
func (s *Server) forwardRead(method string, hdr *wrpc.RequestHeader, args, reply any) (bool, error) {
	if hdr.AllowStale {
		return false, nil
	}
	return s.forwardTo(method, args, reply, true)
}

func (s *Server) forwardTo(method string, args, reply any, needReady bool) (bool, error) {
	deadline := time.Now().Add(s.config.RPCHoldTimeout)
	var lastErr error = wrpc.ErrNoLeader
	for {
		if s.IsLeader() {
			if !needReady || s.leaderReady.Load() {
				return false, nil
			}
			lastErr = wrpc.ErrLeaderNotReady
		} else if addr, _ := s.raft.LeaderWithID(); addr != "" && string(addr) != s.rpcAddr {
			err := s.pool.Call(string(addr), method, args, reply)
			if err == nil || !wrpc.IsRetryable(err) {
				return true, err
			}
			lastErr = err
			if !wrpc.IsServerError(err) {
				lastErr = wrpc.ErrNoLeader // the leader we knew is unreachable
			}
		}
		if time.Now().After(deadline) {
			return true, lastErr
		}
		// Wait a jittered fraction of the hold time before looking again.
		wait := s.config.RPCHoldTimeout / 16
		select {
		case <-time.After(wait/2 + rand.N(wait)):
		case <-s.shutdownCh:
			return true, wrpc.ErrNoLeader
		}
	}
}

// raftApply proposes a command and waits for it to be applied. A command the
// FSM rejected returns the FSM's error; a proposal that lost leadership
// returns ErrNoLeader, which clients retry.
func (s *Server) raftApply(t fsm.MessageType, body any) (any, uint64, error) {
	buf, err := fsm.Encode(t, body)
	if err != nil {
		return nil, 0, err
	}
	f := s.raft.Apply(buf, raftApplyTimeout)
	if err := f.Error(); err != nil {
		if errors.Is(err, raft.ErrNotLeader) || errors.Is(err, raft.ErrLeadershipLost) ||
			errors.Is(err, raft.ErrLeadershipTransferInProgress) || errors.Is(err, raft.ErrRaftShutdown) {
			return nil, 0, wrpc.ErrNoLeader
		}
		return nil, 0, err
	}
	if err, ok := f.Response().(error); ok {
		return nil, f.Index(), err
	}
	return f.Response(), f.Index(), nil
}
