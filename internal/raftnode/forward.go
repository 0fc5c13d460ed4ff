package raftnode

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"time"

	"github.com/hashicorp/raft"
	wrpc "github.com/weft-sched/weft/rpc"
)

// EnqueueTimeout bounds how long a write waits to be enqueued in Raft.
const EnqueueTimeout = 30 * time.Second

// ForwardWrite sends a write to the leader unless this member is it. It
// returns true when the request was handled elsewhere (reply and error are
// the leader's). With no leader known it holds the request, retrying with
// jitter, for up to RPCHoldTimeout (or until the request's deadline, if
// sooner) and then fails with ErrNoLeader. A leader that does not answer
// within the request's deadline fails it with ErrTimeout: the caller tries
// another member at once.
func (n *Node) ForwardWrite(ctx context.Context, method string, args, reply any) (bool, error) {
	return n.forwardTo(ctx, method, args, reply, false)
}

// ForwardRead sends a consistent read to the leader unless this member is
// a ready leader. Stale reads are always answered locally, and blocking
// reads (a min_query_index) too while this member is fresh (fresh.go).
func (n *Node) ForwardRead(ctx context.Context, method string, hdr *wrpc.RequestHeader, args, reply any) (bool, error) {
	if hdr.AllowStale {
		return false, nil
	}
	if fresh, _ := n.Fresh(); fresh && hdr.MinQueryIndex > 0 {
		return false, nil
	}
	return n.forwardTo(ctx, method, args, reply, true)
}

// forwardTo forwards a call to the leader unless this member leads (and,
// with needReady, is ready and still leads by a quorum's word). A client's
// call (ClientCall) takes a place among the client calls forwarded at once,
// or is answered rate_limited when there is none, and goes over the
// clients' pool.
func (n *Node) forwardTo(ctx context.Context, method string, args, reply any, needReady bool) (bool, error) {
	pool := n.cfg.Pool
	if client, ok := ClientOf(ctx); ok && !n.IsLeader() {
		if !n.clientForwards.Acquire(client) {
			return true, n.refuseForward(method, client)
		}
		defer n.clientForwards.Release(client)
		pool = n.cfg.ClientPool
	}
	// The hold bounds the wait for a leader; a call forwarded to one has
	// the request's whole deadline (a blocking query may wait minutes).
	holdOver := n.clock.After(n.cfg.RPCHoldTimeout)
	var lastErr error = wrpc.ErrNoLeader
	for {
		if n.IsLeader() {
			switch {
			case !needReady:
				return false, nil
			case !n.ready.Load() || n.halted():
				lastErr = wrpc.ErrNotReady
			case n.verifyLeader(ctx) == nil:
				return false, nil
			default:
				lastErr = wrpc.ErrNoLeader // deposed: look for the new leader
			}
		} else if addr, _ := n.raft.LeaderWithID(); addr != "" && string(addr) != n.addr {
			err := pool.Call(ctx, string(addr), method, args, reply)
			if err == nil || !wrpc.IsRetryable(err) || errors.Is(err, wrpc.ErrRateLimited) {
				return true, err // the leader's rate_limited is the caller's to retry
			}
			lastErr = err
			if !wrpc.IsServerError(err) {
				lastErr = wrpc.Errorf(wrpc.CodeTimeout, "the leader at %s did not answer: %v", addr, errors.Unwrap(err))
			}
		}
		// Wait a jittered fraction of the hold time before looking again.
		wait := n.cfg.RPCHoldTimeout / 16
		select {
		case <-n.clock.After(wait/2 + rand.N(wait)):
		case <-holdOver:
			return true, lastErr
		case <-ctx.Done():
			return true, lastErr
		case <-n.shutdownCh:
			return true, wrpc.ErrNoLeader
		}
	}
}

// verifyLeader confirms with a quorum that this member still leads, so a
// consistent read is never answered by a leader that was deposed while it
// was paused or cut off and has not noticed yet.
func (n *Node) verifyLeader(ctx context.Context) error {
	return waitFuture(ctx, n.raft.VerifyLeader())
}

// Apply proposes an encoded command and waits for it to be applied, or for
// ctx to end (the write's outcome is then unknown: ErrTimeout, retryable
// when the write is idempotent or carries a request ID). It returns what
// the FSM returned for it, uninterpreted, and its index. A command past
// MaxCommand is refused with ErrTooLarge; a proposal that lost leadership
// returns ErrNoLeader, which clients retry.
func (n *Node) Apply(ctx context.Context, buf []byte) (any, uint64, error) {
	if len(buf) > MaxCommand {
		// Every member refuses Raft messages past a bound built on this
		// one (frames.go): such an entry would never replicate.
		return nil, 0, fmt.Errorf("the command is %d bytes, more than the %d a Raft entry may take: %w", len(buf), MaxCommand, wrpc.ErrTooLarge)
	}
	enqueue := EnqueueTimeout
	if d, ok := ctx.Deadline(); ok {
		enqueue = min(enqueue, time.Until(d))
	}
	f := n.raft.Apply(buf, enqueue)
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
	return f.Response(), f.Index(), nil
}
