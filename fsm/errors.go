package fsm

import (
	"errors"
	"fmt"
)

// Kinds of rejection. Every command the FSM refuses returns a *Rejection
// that wraps one of them, so that a server answers with the matching code
// and a retried request gets the same kind of answer.
var (
	// ErrNotFound: the command names an object the state does not hold.
	ErrNotFound = errors.New("not found")
	// ErrConflict: the command is valid but does not apply to the state as
	// it is (an app that already ended, an attempt that is over).
	ErrConflict = errors.New("conflict")
	// ErrInvalid: the command itself is malformed or invalid.
	ErrInvalid = errors.New("invalid")
	// ErrStale: the command speaks for an AM attempt the state has moved
	// past (an unmanaged AM's attempt older than the one recorded, or its
	// app has ended): retrying it can never succeed.
	ErrStale = errors.New("stale")
)

// Rejection is a command the FSM refused, on every server alike. Its
// message is for the user; Kind says which of ErrNotFound, ErrConflict,
// ErrInvalid or ErrStale it is.
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

// kindCode is a rejection kind's number in request records.
func kindCode(kind error) uint8 {
	switch kind {
	case ErrNotFound:
		return 1
	case ErrConflict:
		return 2
	case ErrInvalid:
		return 3
	case ErrStale:
		return 4
	}
	return 0
}

func kindOf(code uint8) error {
	switch code {
	case 1:
		return ErrNotFound
	case 2:
		return ErrConflict
	case 3:
		return ErrInvalid
	case 4:
		return ErrStale
	}
	return nil
}
