package server

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"time"

	"github.com/hashicorp/raft"
	"github.com/weft-sched/weft/fsm"
	wrpc "github.com/weft-sched/weft/rpc"
)

// raftEnqueueTimeout bounds how long a write waits to be enqueued in Raft.
const raftEnqueueTimeout = 30 * time.Second

// forwardWrite sends a write to the leader unless this server is it. It
// returns true when the request was handled elsewhere (reply and error are
// the leader's). With no leader known it holds the request, retrying with
// jitter, for up to RPCHoldTimeout (or until the request's deadline, if
// sooner) and then fails with ErrNoLeader. A leader that does not answer
// within the request's deadline fails it with ErrTimeout: the caller tries
// another server at once.
func (s *Server) forwardWrite(ctx context.Context, method string, args, reply any) (bool, error) {
	return s.forwardTo(ctx, method, args, reply, false)
}

// forwardRead sends a consistent read to the leader unless this server is a
// ready leader; stale reads are always answered locally.
func (s *Server) forwardRead(ctx context.Context, method string, hdr *wrpc.RequestHeader, args, reply any) (bool, error) {
	if hdr.AllowStale {
		return false, nil
	}
	return s.forwardTo(ctx, method, args, reply, true)
}

func (s *Server) forwardTo(ctx context.Context, method string, args, reply any, needReady bool) (bool, error) {
	// The hold bounds the wait for a leader; a call forwarded to one has
	// the request's whole deadline (a blocking query may wait minutes).
	holdOver := s.clock.After(s.config.RPCHoldTimeout)
	var lastErr error = wrpc.ErrNoLeader
	for {
		if s.IsLeader() {
			switch {
			case !needReady:
				return false, nil
			case !s.leaderReady.Load() || s.fsm.HaltErr() != nil:
				lastErr = wrpc.ErrNotReady
			case s.verifyLeader(ctx) == nil:
				return false, nil
			default:
				lastErr = wrpc.ErrNoLeader // deposed: look for the new leader
			}
		} else if addr, _ := s.raft.LeaderWithID(); addr != "" && string(addr) != s.rpcAddr {
			err := s.pool.Call(ctx, string(addr), method, args, reply)
			if err == nil || !wrpc.IsRetryable(err) {
				return true, err
			}
			lastErr = err
			if !wrpc.IsServerError(err) {
				lastErr = wrpc.Errorf(wrpc.CodeTimeout, "the leader at %s did not answer: %v", addr, errors.Unwrap(err))
			}
		}
		// Wait a jittered fraction of the hold time before looking again.
		wait := s.config.RPCHoldTimeout / 16
		select {
		case <-s.clock.After(wait/2 + rand.N(wait)):
		case <-holdOver:
			return true, lastErr
		case <-ctx.Done():
			return true, lastErr
		case <-s.shutdownCh:
			return true, wrpc.ErrNoLeader
		}
	}
}

// verifyLeader confirms with a quorum that this server still leads, so a
// consistent read is never answered by a leader that was deposed while it
// was paused or cut off and has not noticed yet.
func (s *Server) verifyLeader(ctx context.Context) error {
	f := s.raft.VerifyLeader()
	done := make(chan error, 1)
	go func() { done <- f.Error() }()
	select {
	case err := <-done:
		return err
	case <-ctx.Done():
		return ctx.Err()
	}
}

// raftApply proposes a command and waits for it to be applied, or for ctx
// to end (the write's outcome is then unknown: ErrTimeout, retryable when
// the write is idempotent or carries a request ID). A command the FSM
// rejected returns the FSM's reason with its code; a proposal that lost
// leadership returns ErrNoLeader, which clients retry.
func (s *Server) raftApply(ctx context.Context, t fsm.MessageType, body any) (any, uint64, error) {
	buf, err := fsm.Encode(t, body)
	if err != nil {
		return nil, 0, err
	}
	return s.apply(ctx, buf)
}

// raftApplyRequest is raftApply for a client's write: it carries the
// request ID of hdr (if any), so that a retry of the write is applied at
// most once and gets the first answer (SPEC §4).
func (s *Server) raftApplyRequest(ctx context.Context, hdr *wrpc.RequestHeader, t fsm.MessageType, body any) (any, uint64, error) {
	if hdr.RequestID == "" {
		return s.raftApply(ctx, t, body)
	}
	if err := hdr.ValidateRequestID(); err != nil {
		return nil, 0, err
	}
	buf, err := fsm.EncodeRequest(hdr.RequestID, s.clock.Now().UnixNano(), t, body)
	if err != nil {
		return nil, 0, err
	}
	return s.apply(ctx, buf)
}

func (s *Server) apply(ctx context.Context, buf []byte) (any, uint64, error) {
	enqueue := raftEnqueueTimeout
	if d, ok := ctx.Deadline(); ok {
		enqueue = min(enqueue, time.Until(d))
	}
	f := s.raft.Apply(buf, enqueue)
	done := make(chan error, 1)
	go func() { done <- f.Error() }()
	select {
	case err := <-done:
		if err != nil {
			if errors.Is(err, raft.ErrNotLeader) || errors.Is(err, raft.ErrLeadershipLost) ||
				errors.Is(err, raft.ErrLeadershipTransferInProgress) || errors.Is(err, raft.ErrRaftShutdown) ||
				errors.Is(err, raft.ErrEnqueueTimeout) {
				return nil, 0, fmt.Errorf("%w (%v)", wrpc.ErrNoLeader, err)
			}
			return nil, 0, err
		}
	case <-ctx.Done():
		return nil, 0, wrpc.Errorf(wrpc.CodeTimeout, "the write was proposed but not applied before the request's deadline; its outcome is unknown")
	}
	res, index := f.Response(), f.Index()
	if r, ok := res.(*fsm.Replay); ok {
		// A retry of a request already applied: the first answer.
		s.logger.Debug("answered a retried request with its first answer", "index", r.Index)
		res, index = r.Result, r.Index
	}
	if err, ok := res.(error); ok {
		return nil, index, rejection(err)
	}
	return res, index, nil
}

// rejection gives an FSM rejection the code its kind maps to, and a halt
// (the FSM stopped before the entry) CodeUnavailable.
func rejection(err error) error {
	if h, ok := haltAnswer(err); ok {
		return h
	}
	var r *fsm.Rejection
	if !errors.As(err, &r) {
		return err
	}
	switch r.Kind {
	case fsm.ErrNotFound:
		return &wrpc.Error{Code: wrpc.CodeNotFound, Message: r.Msg}
	case fsm.ErrConflict:
		return &wrpc.Error{Code: wrpc.CodeConflict, Message: r.Msg}
	case fsm.ErrInvalid:
		return &wrpc.Error{Code: wrpc.CodeBadRequest, Message: r.Msg}
	}
	return err
}
