package fsm

import (
	"errors"
	"fmt"
)

// HaltError says that the FSM stopped applying the log: the committed entry
// at Index is one this binary cannot apply (an unknown command type without
// IgnoreUnknownTypeFlag, or a body that does not decode). Nothing at or
// after Index was applied, so the state is exactly the state before Index
// on every server that runs the same binary. Apply returns it for the entry
// at Index and for every later entry; the FSM stays halted.
type HaltError struct {
	// Index is the Raft index of the entry that cannot be applied.
	Index uint64
	// Type is the entry's command type (for a client request, the type of
	// the command it carries); 0 for an empty entry.
	Type MessageType
	// Reason says what is wrong with the entry.
	Reason string
}

func (e *HaltError) Error() string {
	return fmt.Sprintf("the committed Raft entry at index %d cannot be applied (%s): nothing at or after index %d was applied", e.Index, e.Reason, e.Index)
}

// errUnknownType is decodeCommand's answer for a type this binary does not
// know and may not ignore.
var errUnknownType = errors.New("unknown command type")

// Option configures an FSM made by New.
type Option func(*FSM)

// WithSkipIndex is the operator's escape hatch for a hostile or garbled
// entry that no weft version can apply: the entry at index, and only it,
// is skipped (applied as a no-op, logged as an error) if this binary cannot
// apply it. An entry at index that this binary can apply is applied as
// usual. Every server must be given the same index, or the servers' states
// diverge. 0 skips nothing.
func WithSkipIndex(index uint64) Option {
	return func(f *FSM) { f.skipIndex = index }
}

// Halted returns a channel that is closed when the FSM halts. It never
// reopens: a halted FSM applies nothing more, takes no snapshot and
// restores none.
func (f *FSM) Halted() <-chan struct{} { return f.haltCh }

// HaltErr returns why the FSM halted, or nil if it has not.
func (f *FSM) HaltErr() *HaltError { return f.halt.Load() }

// setHalt records the halt and wakes Halted's watchers. It is called once,
// from Raft's FSM goroutine.
func (f *FSM) setHalt(h *HaltError) {
	f.halt.Store(h)
	f.logger.Error("halted: the replicated log holds an entry this server cannot apply; nothing from it on is applied",
		"index", h.Index, "type", uint8(h.Type), "reason", h.Reason)
	close(f.haltCh)
}

// haltFor describes why the entry at index, of type t, cannot be applied.
func haltFor(index uint64, t MessageType, err error, inRequest bool) *HaltError {
	where := ""
	if inRequest {
		where = " inside a client request"
	}
	if errors.Is(err, errUnknownType) {
		return &HaltError{Index: index, Type: t, Reason: fmt.Sprintf(
			"unknown command type %d%s: written by a newer weft, or not by weft at all", t, where)}
	}
	return &HaltError{Index: index, Type: t, Reason: fmt.Sprintf("command type %d%s does not decode: %v", t, where, err)}
}
