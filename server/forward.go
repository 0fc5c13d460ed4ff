package server

import (
	"context"
	"errors"

	"github.com/weft-sched/weft/fsm"
	"github.com/weft-sched/weft/internal/raftnode"
	wrpc "github.com/weft-sched/weft/rpc"
)

// raftMaxCommand is the largest command a Raft entry may take
// (raftnode.MaxCommand): batches split below it.
const raftMaxCommand = raftnode.MaxCommand

// forwardWrite sends a write to the leader unless this server is it
// (raftnode.Node.ForwardWrite): true when it was handled elsewhere.
func (s *Server) forwardWrite(ctx context.Context, method string, args, reply any) (bool, error) {
	return s.node.ForwardWrite(ctx, method, args, reply)
}

// forwardRead sends a consistent read to the leader unless this server is a
// ready leader; stale reads are always answered locally.
func (s *Server) forwardRead(ctx context.Context, method string, hdr *wrpc.RequestHeader, args, reply any) (bool, error) {
	return s.node.ForwardRead(ctx, method, hdr, args, reply)
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

// apply proposes an encoded command (raftnode.Node.Apply) and turns what
// the FSM answered into the RPC's answer: a retried request's first answer,
// a rejection's code.
func (s *Server) apply(ctx context.Context, buf []byte) (any, uint64, error) {
	res, index, err := s.node.Apply(ctx, buf)
	if err != nil {
		return nil, 0, err
	}
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
	case fsm.ErrStale:
		return &wrpc.Error{Code: wrpc.CodeStale, Message: r.Msg}
	}
	return err
}
