package server

import (
	"context"
	"fmt"
	"slices"
	"sync/atomic"

	"github.com/weft-sched/weft/fsm"
	"github.com/weft-sched/weft/internal/raftnode"
	wrpc "github.com/weft-sched/weft/rpc"
)

// maxUpdateBatch bounds how many heartbeats' container updates one Raft
// entry carries, and maxUpdateChanges how many container changes (records
// and status updates) in all: applying a change costs each server ~10 µs
// (BenchmarkContainerLifecycle), so an entry applies in tens of
// milliseconds, and a plan never waits behind batches that take seconds
// (512 heartbeats of 64 changes each did: ~0.4 s apiece). A batch whose
// encoding passes raftMaxCommand is split too.
const (
	maxUpdateBatch   = 512
	maxUpdateChanges = 4096
)

// batchesInFlight is how many batches of container updates may be proposed
// and not yet applied at once: two lets the leader write one to its log
// while a follower writes the other.
const batchesInFlight = 2

// groupCommit sends concurrent requests on together (group commit): a
// request is queued, and one goroutine hands everything queued to commit as
// one batch as soon as fewer than its slots of batches are in flight. So an
// idle server sends a lone request at once and a busy one in few batches
// (what queues while the batches in flight commit goes out as the next).
// Each request's caller waits for its own result; a batch that fails fails
// every request in it.
//
// Two use it: the leader's container updates from heartbeats (one Raft
// entry per batch; the scheduler's plans take their own path to Raft and
// wait behind at most batchesInFlight batches, never behind a queue of
// heartbeats), and a follower's heartbeats forwarded to the leader (one
// Node.HeartbeatBatch call per batch, forward_batch.go).
type groupCommit[Q, R any] struct {
	what string // what a request is, for errors: "the heartbeat's update"
	max  int    // requests per batch
	// weight, when set, is a request's share of maxWeight, the most a
	// batch carries (a request heavier than that goes alone).
	weight    func(Q) int
	maxWeight int
	in        chan *groupWaiter[Q, R]
	// commit sends a batch and returns each request's result in order, or
	// the error that failed them all. It is swappable so tests can watch
	// or hold the batches.
	commit atomic.Pointer[commitFunc[Q, R]]
	// slots holds a token per batch in flight (at most its capacity).
	slots chan struct{}
}

// commitFunc sends a batch of requests (see groupCommit.commit).
type commitFunc[Q, R any] func(reqs []Q) ([]R, error)

// groupWaiter is one request and where its outcome goes.
type groupWaiter[Q, R any] struct {
	req  Q
	done chan groupOutcome[R]
}

type groupOutcome[R any] struct {
	res R
	err error
}

func newGroupCommit[Q, R any](what string, max, inFlight int, commit commitFunc[Q, R]) *groupCommit[Q, R] {
	b := &groupCommit[Q, R]{what: what, max: max, in: make(chan *groupWaiter[Q, R], max), slots: make(chan struct{}, inFlight)}
	b.commit.Store(&commit)
	return b
}

// submit queues req and waits for its batch's result. When ctx ends first
// the outcome is unknown (the batch may still commit): ErrTimeout, as for
// any write; what is batched must be safe to repeat.
func (b *groupCommit[Q, R]) submit(ctx context.Context, stop <-chan struct{}, req Q) (R, error) {
	var zero R
	w := &groupWaiter[Q, R]{req: req, done: make(chan groupOutcome[R], 1)}
	select {
	case b.in <- w:
	case <-ctx.Done():
		return zero, wrpc.Errorf(wrpc.CodeTimeout, "%s was not queued before the request's deadline", b.what)
	case <-stop:
		return zero, wrpc.ErrNoLeader
	}
	select {
	case o := <-w.done:
		return o.res, o.err
	case <-ctx.Done():
		return zero, wrpc.Errorf(wrpc.CodeTimeout, "%s was sent but not answered before the request's deadline; its outcome is unknown", b.what)
	case <-stop:
		return zero, wrpc.ErrNoLeader
	}
}

// weighted bounds a batch by the weight of its requests as well as by
// their number.
func (b *groupCommit[Q, R]) weighted(weight func(Q) int, max int) *groupCommit[Q, R] {
	b.weight, b.maxWeight = weight, max
	return b
}

// weigh returns a request's weight: 0 when batches are bounded by count
// only.
func (b *groupCommit[Q, R]) weigh(w *groupWaiter[Q, R]) int {
	if b.weight == nil {
		return 0
	}
	return b.weight(w.req)
}

// run sends batches until stop is closed.
func (b *groupCommit[Q, R]) run(stop <-chan struct{}) {
	batch := make([]*groupWaiter[Q, R], 0, b.max)
	// carry is the request that would have taken the last batch past
	// maxWeight: it opens the next one. Its caller waits in submit, which
	// also returns when stop closes.
	var carry *groupWaiter[Q, R]
	for {
		// Take a slot first: while every slot is taken, requests wait in
		// b.in and all go out together in the next batch.
		select {
		case b.slots <- struct{}{}:
		case <-stop:
			return
		}
		if carry != nil {
			batch, carry = append(batch[:0], carry), nil
		} else {
			select {
			case w := <-b.in:
				batch = append(batch[:0], w)
			case <-stop:
				return
			}
		}
		weight := b.weigh(batch[0])
	drain:
		for len(batch) < b.max {
			select {
			case w := <-b.in:
				if b.weight != nil && weight+b.weigh(w) > b.maxWeight {
					carry = w
					break drain
				}
				batch = append(batch, w)
				weight += b.weigh(w)
			default:
				break drain
			}
		}
		go b.send(slices.Clone(batch)) // as long as it is: batches are often of one
		clear(batch)
	}
}

// send commits one batch, answers its waiters and frees its slot.
func (b *groupCommit[Q, R]) send(batch []*groupWaiter[Q, R]) {
	defer func() { <-b.slots }()
	reqs := make([]Q, len(batch))
	for i, w := range batch {
		reqs[i] = w.req
	}
	res, err := (*b.commit.Load())(reqs)
	for i, w := range batch {
		switch {
		case err != nil:
			w.done <- groupOutcome[R]{err: err}
		case i < len(res):
			w.done <- groupOutcome[R]{res: res[i]}
		default:
			w.done <- groupOutcome[R]{err: fmt.Errorf("the batch answered %d of %d requests", len(res), len(batch))}
		}
	}
}

// updateBatcher commits the container updates of concurrent heartbeats in
// few Raft entries (ContainerUpdateBatch); each result is the update's
// rejection, nil if it applied.
type updateBatcher = groupCommit[fsm.ContainerUpdateRequest, error]

// proposeFunc commits a batch of container updates.
type proposeFunc = commitFunc[fsm.ContainerUpdateRequest, error]

func newUpdateBatcher(propose proposeFunc) *updateBatcher {
	return newGroupCommit("the heartbeat's update", maxUpdateBatch, batchesInFlight, propose).
		weighted(updateChanges, maxUpdateChanges)
}

// updateChanges is how many container changes an update carries.
func updateChanges(u fsm.ContainerUpdateRequest) int {
	return len(u.Records) + len(u.Updates)
}

// submitUpdate queues a heartbeat's container update and waits until its
// batch is applied; it returns the update's rejection or the batch's error.
func (s *Server) submitUpdate(ctx context.Context, req fsm.ContainerUpdateRequest) error {
	return updateOutcome(s.updates.submit(ctx, s.shutdownCh, req))
}

// updateOutcome is one error for an update: the batch's, else its own
// rejection.
func updateOutcome(rejected, err error) error {
	if err != nil {
		return err
	}
	return rejected
}

// proposeUpdates commits updates as one ContainerUpdateBatch entry, split
// in halves while an entry would pass raftMaxCommand, and returns each
// update's rejection (nil if applied) in order. A failure of any entry
// fails them all: the caller cannot tell which heartbeats' updates stuck,
// and every heartbeat is safe to repeat.
func (s *Server) proposeUpdates(updates []fsm.ContainerUpdateRequest) ([]error, error) {
	ctx, cancel := context.WithTimeout(context.Background(), raftnode.EnqueueTimeout)
	defer cancel()
	go func() {
		select {
		case <-s.shutdownCh:
			cancel()
		case <-ctx.Done():
		}
	}()
	return s.proposeUpdatesCtx(ctx, updates)
}

func (s *Server) proposeUpdatesCtx(ctx context.Context, updates []fsm.ContainerUpdateRequest) ([]error, error) {
	if len(updates) == 0 {
		return nil, nil
	}
	buf, err := fsm.Encode(fsm.ContainerUpdateBatchType, &fsm.ContainerUpdateBatchRequest{Updates: updates})
	if err != nil {
		return nil, err
	}
	if len(buf) > raftMaxCommand && len(updates) > 1 {
		half := len(updates) / 2
		first, err := s.proposeUpdatesCtx(ctx, updates[:half])
		if err != nil {
			return nil, err
		}
		rest, err := s.proposeUpdatesCtx(ctx, updates[half:])
		if err != nil {
			return nil, err
		}
		return append(first, rest...), nil
	}
	res, _, err := s.apply(ctx, buf)
	if err != nil {
		return nil, err
	}
	r, ok := res.(*fsm.ContainerUpdateBatchResult)
	if !ok {
		return nil, fmt.Errorf("a container update batch answered %T", res)
	}
	for i, e := range r.Errors {
		if e != nil {
			r.Errors[i] = rejection(e)
		}
	}
	return r.Errors, nil
}
