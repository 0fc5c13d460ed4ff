package server

import (
	"errors"
	"fmt"

	"github.com/weft-sched/weft/fsm"
	wrpc "github.com/weft-sched/weft/rpc"
)

// RecoveryDoc names where the recovery from a halt is written down.
const RecoveryDoc = `docs/operations.md, "Unknown Raft entries"`

// haltRecovery says what an operator does about a halt at index.
func haltRecovery(index uint64) string {
	return fmt.Sprintf("upgrade every server to a weft that knows this entry (a newer server wrote it), "+
		"or, if no weft wrote it, restart every server with raft_skip_index = %d (-raft-skip-index %d); see %s",
		index, index, RecoveryDoc)
}

// Halted returns a channel that is closed once the server has stopped by
// itself because its replicated log holds an entry this binary cannot apply
// (see fsm.HaltError). The state it held is the state before that entry;
// HaltError says which entry and how to recover. The server has then shut
// down as Shutdown does, without leaving the cluster, so a restart on the
// same data dir rejoins it (and stops at the same entry again).
func (s *Server) Halted() <-chan struct{} { return s.haltedCh }

// HaltError returns, once Halted is closed, why the server stopped: an
// error that wraps the *fsm.HaltError and says how to recover. It returns
// nil before.
func (s *Server) HaltError() error {
	select {
	case <-s.haltedCh:
		return s.haltErr
	default:
		return nil
	}
}

// watchHalt stops the server when its FSM halts. Going on would serve
// reads from a state that no longer follows the log, and take writes that
// are never applied; skipping the entry would fork this server from any
// that can apply it. Stopping keeps the state exactly as it was, and a
// restart stops at the same entry with the same message.
//
// Raft runs on for haltLinger first: a server applies an entry only once
// it hears the entry is committed, and it hears that from a leader, so a
// halted leader that stopped at once could leave a follower that never
// learns it and waits, leaderless, instead of stopping too. Meanwhile the
// halted server is never a ready leader, so it answers no consistent read.
func (s *Server) watchHalt() {
	select {
	case <-s.shutdownCh:
		return
	case <-s.fsm.Halted():
	}
	h := s.fsm.HaltErr()
	recovery := haltRecovery(h.Index)
	s.logger.Error("stopping this server: the replicated log holds an entry it cannot apply; nothing at or after it was applied",
		"index", h.Index, "type", uint8(h.Type), "reason", h.Reason, "recovery", recovery)
	select {
	case <-s.clock.After(s.haltLinger):
	case <-s.shutdownCh:
	}
	s.haltErr = fmt.Errorf("%w; to recover, %s", h, recovery)
	s.stop()
	close(s.haltedCh)
}

// haltAnswer is what a caller whose write was committed after the halted
// entry is told: the write is in the log and takes effect once the cluster
// recovers; this server cannot answer for it.
func haltAnswer(err error) (error, bool) {
	var h *fsm.HaltError
	if !errors.As(err, &h) {
		return nil, false
	}
	return wrpc.Errorf(wrpc.CodeUnavailable, "this server stopped applying the replicated log at index %d (%s); "+
		"the write is in the log and takes effect when the cluster recovers", h.Index, h.Reason), true
}
