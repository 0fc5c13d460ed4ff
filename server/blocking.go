package server

import (
	"context"
	"math/rand/v2"
	"time"

	"github.com/weft-sched/weft/fsm"
	wrpc "github.com/weft-sched/weft/rpc"
)

// A read function reads this server's state: it returns the index of the
// data it depends on, or an error to answer with.
type readFunc func(*fsm.State) (uint64, error)

// blockingQuery answers a read from this server's state: build fills the
// reply and returns the index of the data it read; blockingQuery fills
// meta. Without a min_query_index it builds once. With one (a blocking
// read) it first waits until this server has applied that index (so it
// never answers from a state older than one the client has seen), then
// until the state's index for the read passes it, max_wait
// (capped, plus a little jitter so that many watchers do not wake
// together) passes, the request's deadline comes, or — for a read that
// did not ask for a stale answer — this server stops being fresh
// (raftnode.Node.Fresh: it answers at once with what it has, and meta
// says how stale that is; the client's next read goes to the leader).
//
// watch, if not nil, returns the index build would report without
// building the answer (or an error to answer at once): it is what runs on
// every state change while the read waits, so a waiting read costs a
// lookup per change, not an answer's worth of work and memory. Without
// watch, build runs on every change.
func (s *Server) blockingQuery(ctx context.Context, hdr *wrpc.RequestHeader, meta *wrpc.ResponseMeta, watch, build readFunc) error {
	var timeout <-chan time.Time
	var stale <-chan struct{}
	if hdr.MinQueryIndex > 0 {
		wait := hdr.MaxWait
		if wait <= 0 || wait > wrpc.MaxBlockingWait {
			wait = wrpc.DefaultBlockingWait
		}
		wait += rand.N(wait/16 + 1)
		if d, ok := ctx.Deadline(); ok {
			// Answer before the caller gives up.
			wait = min(wait, time.Until(d)*15/16)
		}
		timeout = s.clock.After(wait)
		if !hdr.AllowStale {
			_, stale = s.node.Fresh()
		}
	}
	over := false // the wait is over: answer with what there is
	for {
		st := s.fsm.State()
		if hdr.MinQueryIndex > 0 && !over && st.Index() < hdr.MinQueryIndex {
			// This server is behind what the client has seen (a follower
			// catching up with the leader that gave the index): its
			// state would answer from before it, "not found" included.
			var err error
			if over, err = s.awaitChange(ctx, st, timeout, stale); err != nil {
				return err
			}
			continue
		}
		if hdr.MinQueryIndex > 0 && !over && watch != nil {
			index, err := watch(st)
			if err != nil {
				return err
			}
			if index <= hdr.MinQueryIndex {
				if over, err = s.awaitChange(ctx, st, timeout, stale); err != nil {
					return err
				}
				continue
			}
		}
		index, err := build(st)
		if err != nil {
			return err
		}
		if index == 0 {
			index = 1 // never hand out 0: a client passing it back would not block
		}
		meta.Index = index
		s.setMeta(meta)
		if hdr.MinQueryIndex == 0 || index > hdr.MinQueryIndex || over {
			return nil
		}
		if over, err = s.awaitChange(ctx, st, timeout, stale); err != nil {
			return err
		}
	}
}

// awaitChange waits for a state newer than st, and reports over when the
// read's wait has ended instead (its max_wait, this server no longer
// fresh, shutdown). A caller gone is an error: nobody is left to answer.
func (s *Server) awaitChange(ctx context.Context, st *fsm.State, timeout <-chan time.Time, stale <-chan struct{}) (over bool, err error) {
	select {
	case <-st.Changed():
		return false, nil
	case <-timeout:
	case <-stale:
	case <-s.shutdownCh:
	case <-ctx.Done():
		return true, ctx.Err()
	}
	return true, nil
}

// setMeta records how fresh this server's answer is: on a follower, how
// long since it heard from the leader and how many committed entries it
// has not applied yet.
func (s *Server) setMeta(meta *wrpc.ResponseMeta) {
	if s.IsLeader() {
		meta.LastContact, meta.IndexLag = 0, 0
		meta.KnownLeader = true
		return
	}
	addr, _ := s.raft.LeaderWithID()
	meta.KnownLeader = addr != ""
	if last := s.raft.LastContact(); !last.IsZero() {
		meta.LastContact = time.Since(last)
	}
	if commit, applied := s.raft.CommitIndex(), s.fsm.State().Index(); commit > applied {
		meta.IndexLag = commit - applied
	}
}
