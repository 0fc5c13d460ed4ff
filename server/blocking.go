package server

import (
	"context"
	"math/rand/v2"
	"time"

	"github.com/weft-sched/weft/fsm"
	wrpc "github.com/weft-sched/weft/rpc"
)

// blockingQuery runs a read against the current state. With a
// min_query_index it re-runs each time a newer state is published until the
// index run reports exceeds it, or max_wait (capped, plus a little jitter so
// that many watchers do not wake together) passes, or the request's
// deadline comes. run returns the index of the data it read; blockingQuery
// fills meta.
func (s *Server) blockingQuery(ctx context.Context, hdr *wrpc.RequestHeader, meta *wrpc.ResponseMeta, run func(*fsm.State) (uint64, error)) error {
	var timeout <-chan time.Time
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
	}
	for {
		st := s.fsm.State()
		index, err := run(st)
		if err != nil {
			return err
		}
		if index == 0 {
			index = 1 // never hand out 0: a client passing it back would not block
		}
		meta.Index = index
		s.setMeta(meta)
		if hdr.MinQueryIndex == 0 || index > hdr.MinQueryIndex {
			return nil
		}
		select {
		case <-st.Changed():
		case <-timeout:
			return nil
		case <-ctx.Done():
			return nil
		case <-s.shutdownCh:
			return nil
		}
	}
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
