package server

import (
	"context"
	"fmt"
	"sync/atomic"

	"github.com/weft-sched/weft/fsm"
	wrpc "github.com/weft-sched/weft/rpc"
)

// maxUpdateBatch bounds how many heartbeats' container updates one Raft
// entry carries; a batch whose encoding passes raftMaxCommand is split.
const maxUpdateBatch = 512

// batchesInFlight is how many batches may be proposed and not yet applied
// at once: two lets the leader write one to its log while a follower
// writes the other.
const batchesInFlight = 2

// updateBatcher commits the container updates of concurrent heartbeats
// together (group commit): a heartbeat's update is queued, and one
// goroutine proposes everything queued as one ContainerUpdateBatch entry
// as soon as fewer than batchesInFlight of its entries await their apply.
// So an idle leader commits a lone heartbeat at once and a busy one in few
// entries (what queues while the batches in flight commit goes out as the
// next); the scheduler's plans take their own path to Raft (raftApply) and
// wait behind at most batchesInFlight batches, never behind a queue of
// heartbeats. Each heartbeat's answer waits
// for its batch's apply; an apply that fails fails every waiter in it.
type updateBatcher struct {
	in chan *updateWaiter
	// propose commits updates as one entry (or a few, if too large) and
	// returns each one's result, or the error that failed them all. It is
	// swappable so tests can watch or hold the batches.
	propose atomic.Pointer[proposeFunc]
	// slots holds a token per batch in flight (at most its capacity).
	slots chan struct{}
}

// proposeFunc commits a batch of updates (see updateBatcher.propose).
type proposeFunc func(updates []fsm.ContainerUpdateRequest) ([]error, error)

// updateWaiter is one heartbeat's update and where its result goes.
type updateWaiter struct {
	req  fsm.ContainerUpdateRequest
	done chan error
}

func newUpdateBatcher(propose proposeFunc) *updateBatcher {
	b := &updateBatcher{in: make(chan *updateWaiter, maxUpdateBatch), slots: make(chan struct{}, batchesInFlight)}
	b.propose.Store(&propose)
	return b
}

// submit queues req and waits for its batch to be applied. When ctx ends
// first the outcome is unknown (the batch may still apply): ErrTimeout,
// as for any write; a heartbeat is safe to repeat.
func (b *updateBatcher) submit(ctx context.Context, stop <-chan struct{}, req fsm.ContainerUpdateRequest) error {
	w := &updateWaiter{req: req, done: make(chan error, 1)}
	select {
	case b.in <- w:
	case <-ctx.Done():
		return wrpc.Errorf(wrpc.CodeTimeout, "the heartbeat's update was not queued before the request's deadline")
	case <-stop:
		return wrpc.ErrNoLeader
	}
	select {
	case err := <-w.done:
		return err
	case <-ctx.Done():
		return wrpc.Errorf(wrpc.CodeTimeout, "the heartbeat's update was proposed but not applied before the request's deadline; its outcome is unknown")
	case <-stop:
		return wrpc.ErrNoLeader
	}
}

// run proposes batches until stop is closed.
func (b *updateBatcher) run(stop <-chan struct{}) {
	batch := make([]*updateWaiter, 0, maxUpdateBatch)
	for {
		// Take a slot first: while every slot is taken, updates wait in
		// b.in and all go out together in the next batch.
		select {
		case b.slots <- struct{}{}:
		case <-stop:
			return
		}
		select {
		case w := <-b.in:
			batch = append(batch[:0], w)
		case <-stop:
			return
		}
	drain:
		for len(batch) < maxUpdateBatch {
			select {
			case w := <-b.in:
				batch = append(batch, w)
			default:
				break drain
			}
		}
		go b.commit(batch)
		batch = make([]*updateWaiter, 0, maxUpdateBatch)
	}
}

// commit proposes one batch, answers its waiters and frees its slot.
func (b *updateBatcher) commit(batch []*updateWaiter) {
	defer func() { <-b.slots }()
	reqs := make([]fsm.ContainerUpdateRequest, len(batch))
	for i, w := range batch {
		reqs[i] = w.req
	}
	errs, err := (*b.propose.Load())(reqs)
	for i, w := range batch {
		switch {
		case err != nil:
			w.done <- err
		case i < len(errs):
			w.done <- errs[i]
		default:
			w.done <- fmt.Errorf("the batch answered %d of %d updates", len(errs), len(batch))
		}
	}
}

// proposeUpdates commits updates as one ContainerUpdateBatch entry, split
// in halves while an entry would pass raftMaxCommand, and returns each
// update's rejection (nil if applied) in order. A failure of any entry
// fails them all: the caller cannot tell which heartbeats' updates stuck,
// and every heartbeat is safe to repeat.
func (s *Server) proposeUpdates(updates []fsm.ContainerUpdateRequest) ([]error, error) {
	ctx, cancel := context.WithTimeout(context.Background(), raftEnqueueTimeout)
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
