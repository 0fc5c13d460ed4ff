package fedstate

import (
	"errors"
	"fmt"
)

// Kinds of rejection, as in package fsm: every command Apply refuses
// returns a *Rejection wrapping one of them, the same on every router.
var (
	ErrNotFound = errors.New("not found")
	ErrConflict = errors.New("conflict")
	ErrInvalid  = errors.New("invalid")
	// ErrFull: a bound of limits.go would be passed.
	ErrFull = errors.New("full")
	// ErrNoRoute: no sub-cluster may take the app now (none is RUNNING);
	// a queue whose policy excludes every sub-cluster is ErrInvalid.
	ErrNoRoute = errors.New("no route")
)

// Rejection is a command Apply refused. Its message is for the user.
type Rejection struct {
	Kind error
	Msg  string
}

func (r *Rejection) Error() string { return r.Msg }

// Unwrap returns the rejection's kind.
func (r *Rejection) Unwrap() error { return r.Kind }

func reject(kind error, format string, a ...any) error {
	return &Rejection{Kind: kind, Msg: fmt.Sprintf(format, a...)}
}

// HaltError is an entry this binary cannot apply (an unknown command, a
// body that does not decode): the FSM stops before it, on every router
// running the same binary alike, instead of diverging.
type HaltError struct {
	Index  uint64
	Type   MessageType
	Reason string
}

func (h *HaltError) Error() string {
	return fmt.Sprintf("federation state halted at index %d (command type %d): %s", h.Index, h.Type, h.Reason)
}
