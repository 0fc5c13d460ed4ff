package server

import (
	"context"
	"fmt"
	"runtime/debug"
	"sync"
	"time"

	wrpc "github.com/weft-sched/weft/rpc"
)

// Agents heartbeat to whichever server they reach, and a follower forwards
// each heartbeat to the leader. One forwarded call per heartbeat costs the
// leader a multiplexed stream, a request and an answer each: at thousands
// of nodes that transport work, not the handler, dominated the leader's
// profile. So a follower forwards the heartbeats that arrive together as
// one Node.HeartbeatBatch call (group commit, as the leader batches their
// container updates into Raft): a lone heartbeat goes at once, and while
// forwardBatchesInFlight batches await their answers the next ones gather.
const (
	forwardBatchesInFlight = 4
	// maxBatchedHeartbeatBytes bounds the estimated size of a heartbeat
	// that is batched; a larger one (an agent reporting hundreds of
	// containers) is forwarded alone. With MaxHeartbeatBatch heartbeats a
	// batch stays well under MaxRequestSize.
	maxBatchedHeartbeatBytes = 16 << 10
	// maxForwardBatchWait bounds a batch's call when its heartbeats gave
	// longer deadlines.
	maxForwardBatchWait = 30 * time.Second
)

// forwardedHeartbeat is one agent's heartbeat waiting in a follower's batch.
type forwardedHeartbeat struct {
	args     *wrpc.HeartbeatRequest
	deadline time.Time
}

// heartbeatForwarder batches the heartbeats a follower forwards.
type heartbeatForwarder = groupCommit[forwardedHeartbeat, wrpc.HeartbeatResult]

func newHeartbeatForwarder(send commitFunc[forwardedHeartbeat, wrpc.HeartbeatResult]) *heartbeatForwarder {
	return newGroupCommit("the forwarded heartbeat", wrpc.MaxHeartbeatBatch, forwardBatchesInFlight, send)
}

// forwardHeartbeat handles a heartbeat on a follower: it returns true when
// the leader answered it (reply and error are the leader's). A heartbeat
// that cannot go in a batch, or whose batch failed as a whole (no leader,
// the leader unreachable or deposed, a leader that does not know
// Node.HeartbeatBatch), takes the single-call path with its hold and
// retries; a heartbeat is safe to repeat.
func (s *Server) forwardHeartbeat(ctx context.Context, args *wrpc.HeartbeatRequest, reply *wrpc.HeartbeatResponse) (bool, error) {
	if s.IsLeader() {
		return false, nil
	}
	if addr, _ := s.raft.LeaderWithID(); addr != "" && string(addr) != s.rpcAddr && heartbeatBytes(args) <= maxBatchedHeartbeatBytes {
		deadline, ok := ctx.Deadline()
		if !ok {
			deadline = s.clock.Now().Add(maxForwardBatchWait)
		}
		res, err := s.hbForward.submit(ctx, s.shutdownCh, forwardedHeartbeat{args: args, deadline: deadline})
		if err == nil {
			*reply = res.Response
			if reply.Servers == nil && res.Error == "" {
				reply.Servers = s.serverAddrs() // the leader leaves them to us
			}
			return true, res.Err()
		}
		if ctx.Err() != nil {
			return true, err
		}
	}
	return s.forwardWrite(ctx, "Node.Heartbeat", args, reply)
}

// sendHeartbeats forwards a batch to the leader as one Node.HeartbeatBatch
// and returns each heartbeat's result, in order.
func (s *Server) sendHeartbeats(batch []forwardedHeartbeat) ([]wrpc.HeartbeatResult, error) {
	addr, _ := s.raft.LeaderWithID()
	if addr == "" || string(addr) == s.rpcAddr {
		return nil, wrpc.ErrNoLeader
	}
	hbs := batchRequests.Get().(*[]wrpc.HeartbeatRequest)
	defer func() {
		clear(*hbs)
		batchRequests.Put(hbs)
	}()
	req := wrpc.HeartbeatBatchRequest{Heartbeats: (*hbs)[:0]}
	var latest time.Time
	for _, h := range batch {
		req.Heartbeats = append(req.Heartbeats, *h.args)
		if h.deadline.After(latest) {
			latest = h.deadline
		}
	}
	*hbs = req.Heartbeats
	now := s.clock.Now()
	wait := min(max(latest.Sub(now), 0), maxForwardBatchWait)
	ctx, cancel := context.WithTimeout(context.Background(), wait)
	defer cancel()
	var resp wrpc.HeartbeatBatchResponse
	if err := s.pool.Call(ctx, string(addr), "Node.HeartbeatBatch", &req, &resp); err != nil {
		return nil, err
	}
	if len(resp.Results) != len(batch) {
		return nil, fmt.Errorf("the leader answered %d of %d forwarded heartbeats", len(resp.Results), len(batch))
	}
	for i := range resp.Results {
		resp.Unshare(i)
	}
	return resp.Results, nil
}

// batchRequests holds the slices forwarded batches are built in: each is
// encoded, sent and done with before the call returns.
var batchRequests = sync.Pool{New: func() any { s := make([]wrpc.HeartbeatRequest, 0, wrpc.MaxHeartbeatBatch); return &s }}

// heartbeatBytes estimates a heartbeat's encoded size, generously.
func heartbeatBytes(args *wrpc.HeartbeatRequest) int {
	n := 256 + len(args.NodeID) + len(args.Secret)
	for i := range args.Containers {
		c := &args.Containers[i]
		n += 128 + len(c.ID) + len(c.AppID) + len(c.ExecutionType) + len(c.Reason) + len(c.Diagnostics) + len(c.State)
	}
	return n
}

// HeartbeatBatch answers heartbeats a follower forwards together (servers
// only): each as Node.Heartbeat would, concurrently, so that one waiting
// for its container updates to commit holds up no other.
func (e *Node) HeartbeatBatch(ctx context.Context, args *wrpc.HeartbeatBatchRequest, reply *wrpc.HeartbeatBatchResponse) error {
	if n := len(args.Heartbeats); n > wrpc.MaxHeartbeatBatch {
		return wrpc.Errorf(wrpc.CodeBadRequest, "heartbeats: %d in one batch, at most %d", n, wrpc.MaxHeartbeatBatch)
	}
	if !e.srv.IsLeader() {
		// Deposed since the follower looked: it forwards each heartbeat
		// on its own to whoever leads now.
		return wrpc.ErrNoLeader
	}
	reply.Results = make([]wrpc.HeartbeatResult, len(args.Heartbeats))
	var wg sync.WaitGroup
	for i := range args.Heartbeats {
		wg.Add(1)
		e.srv.batchWorkers.Go(func() {
			defer wg.Done()
			var resp wrpc.HeartbeatResponse
			reply.Results[i] = wrpc.NewHeartbeatResult(&resp, e.batchedHeartbeat(ctx, &args.Heartbeats[i], &resp))
		})
	}
	wg.Wait()
	reply.ShareLeastLoaded()
	reply.ShareFederation()
	return nil
}

// batchedHeartbeat answers one heartbeat of a batch, a panic turned into
// an internal error as the RPC server does for a whole call.
func (e *Node) batchedHeartbeat(ctx context.Context, args *wrpc.HeartbeatRequest, reply *wrpc.HeartbeatResponse) (err error) {
	defer func() {
		if r := recover(); r != nil {
			e.srv.logger.Error("heartbeat handler panicked; answering with an internal error", "node", args.NodeID,
				"panic", fmt.Sprint(r), "stack", string(debug.Stack()))
			err = fmt.Errorf("Node.Heartbeat: %w", wrpc.ErrInternal)
		}
	}()
	if e.srv.IsLeader() {
		err = e.heartbeat(ctx, args, reply)
		// The follower that forwarded it answers with its own copy of the
		// server list (the same Raft configuration): encoding and decoding
		// the list once per heartbeat was a tenth of what a batch's answer
		// allocated on the follower.
		reply.Servers = nil
		return err
	}
	_, err = e.srv.forwardWrite(ctx, "Node.Heartbeat", args, reply)
	return err
}
