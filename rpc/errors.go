package rpc

import (
	"context"
	"errors"
	"fmt"
	"strings"
)

// Code classifies an error a server answers with. It crosses the wire with
// the message, so a client branches on the same condition the server
// named, with errors.Is against the sentinels below, never on the text.
type Code string

// Codes of server answers. Their values are part of the protocol: never
// rename one.
const (
	CodeNoLeader         Code = "no_leader"         // no leader is known (yet); retryable
	CodeNotReady         Code = "not_ready"         // the leader has not applied its barrier yet; retryable
	CodeTimeout          Code = "timeout"           // the request's deadline passed first; retryable
	CodeUnavailable      Code = "unavailable"       // a process the answer needs could not be reached; retryable
	CodeRateLimited      Code = "rate_limited"      // the caller (or everyone, at this server) has as many calls of the kind in flight as it may; retryable after a pause
	CodeUnreachable      Code = "unreachable"       // a federation's sub-cluster that holds the answer is LOST or DECOMMISSIONED; not retried: it may be gone for long
	CodeNotFound         Code = "not_found"         // the named object does not exist
	CodeBadRequest       Code = "bad_request"       // the request is malformed or invalid; it changed nothing
	CodeConflict         Code = "conflict"          // the request conflicts with the current state
	CodeTooLarge         Code = "too_large"         // the request exceeds a size limit
	CodeStale            Code = "stale_attempt"     // an AM attempt that is no longer the app's current one
	CodePermissionDenied Code = "permission_denied" // the caller's credentials do not allow the request; it changed nothing
	CodeInternal         Code = "internal"          // a bug on the server; it was logged there
	CodeUnknown          Code = "error"             // an error the server gave no code
)

// Error is a coded error. Servers return it (or wrap it with %w) from
// handlers; clients get one back, rebuilt from the wire, for every answer
// that is an error. Two Errors match under errors.Is when their codes are
// equal, so errors.Is(err, ErrNotFound) holds for any not-found answer.
type Error struct {
	Code    Code
	Message string
}

func (e *Error) Error() string { return e.Message }

// Is reports whether target is an *Error with the same code.
func (e *Error) Is(target error) bool {
	t, ok := target.(*Error)
	return ok && t.Code == e.Code
}

// Errorf returns a coded error with a formatted message. %w verbs wrap as
// in fmt.Errorf; the code is the one given.
func Errorf(code Code, format string, a ...any) error {
	return &codedWrap{code: code, err: fmt.Errorf(format, a...)}
}

// codedWrap gives an error a code while keeping its chain.
type codedWrap struct {
	code Code
	err  error
}

func (c *codedWrap) Error() string { return c.err.Error() }
func (c *codedWrap) Unwrap() error { return c.err }
func (c *codedWrap) Is(target error) bool {
	t, ok := target.(*Error)
	return ok && t.Code == c.code
}

// Sentinels for the conditions callers branch on. Wrap them with %w to add
// context; the code survives the wire.
var (
	ErrNoLeader         = &Error{CodeNoLeader, "no cluster leader"}
	ErrNotReady         = &Error{CodeNotReady, "the leader is not ready to serve consistent reads yet"}
	ErrTimeout          = &Error{CodeTimeout, "the request's deadline passed before it was answered"}
	ErrUnavailable      = &Error{CodeUnavailable, "unavailable"}
	ErrRateLimited      = &Error{CodeRateLimited, "too many calls in flight"}
	ErrNotFound         = &Error{CodeNotFound, "not found"}
	ErrBadRequest       = &Error{CodeBadRequest, "bad request"}
	ErrConflict         = &Error{CodeConflict, "conflict"}
	ErrTooLarge         = &Error{CodeTooLarge, fmt.Sprintf("request exceeds the %d MiB limit", MaxRequestSize>>20)}
	ErrStale            = &Error{CodeStale, "not the app's current AM attempt"}
	ErrPermissionDenied = &Error{CodePermissionDenied, "permission denied"}
	ErrInternal         = &Error{CodeInternal, "internal error"}
)

// ErrorCode returns the code of err: the code of the first coded error in
// its chain, CodeTimeout for a context deadline, or CodeUnknown.
func ErrorCode(err error) Code {
	if c, ok := firstCode(err); ok {
		return c
	}
	if errors.Is(err, context.DeadlineExceeded) {
		return CodeTimeout
	}
	return CodeUnknown
}

// firstCode walks err's tree, outermost first, to the first coded error.
func firstCode(err error) (Code, bool) {
	switch v := err.(type) {
	case nil:
		return "", false
	case *Error:
		return v.Code, true
	case *codedWrap:
		return v.code, true
	case interface{ Unwrap() []error }:
		for _, e := range v.Unwrap() {
			if c, ok := firstCode(e); ok {
				return c, true
			}
		}
		return "", false
	}
	return firstCode(errors.Unwrap(err))
}

// wirePrefix opens every error string a server sends: "[code] message".
const wirePrefix = "["

// encodeError is the text of err on the wire.
func encodeError(err error) string {
	return wirePrefix + string(ErrorCode(err)) + "] " + err.Error()
}

// decodeError rebuilds a server's error answer.
func decodeError(s string) *Error {
	if strings.HasPrefix(s, wirePrefix) {
		if end := strings.Index(s, "] "); end > 1 {
			code := s[1:end]
			if validCode(code) {
				return &Error{Code: Code(code), Message: s[end+2:]}
			}
		}
	}
	return &Error{Code: CodeUnknown, Message: s}
}

func validCode(s string) bool {
	if len(s) == 0 || len(s) > 32 {
		return false
	}
	for _, c := range s {
		if !(c >= 'a' && c <= 'z' || c == '_') {
			return false
		}
	}
	return true
}

// IsServerError reports whether err is an answer from a server (as opposed
// to a failure to reach one).
func IsServerError(err error) bool {
	var e *Error
	return errors.As(err, &e)
}

// TransportError is a failure to reach a server or to get its answer: the
// call may or may not have been carried out.
type TransportError struct {
	Addr   string
	Method string
	Err    error
}

func (e *TransportError) Error() string {
	return fmt.Sprintf("call %s on %s: %v", e.Method, e.Addr, e.Err)
}

func (e *TransportError) Unwrap() error { return e.Err }

// IsRetryable reports whether a call that failed with err may succeed if
// tried again, perhaps on another server: a server could not be reached or
// did not answer in time, or it answered with a retryable code. A caller's
// own cancelled context is final.
func IsRetryable(err error) bool {
	if err == nil || errors.Is(err, context.Canceled) {
		return false
	}
	var te *TransportError
	if errors.As(err, &te) {
		return true
	}
	switch ErrorCode(err) {
	case CodeNoLeader, CodeNotReady, CodeTimeout, CodeUnavailable, CodeRateLimited:
		return true
	}
	return false
}

// IsNoLeader reports whether err says no ready leader was known.
func IsNoLeader(err error) bool {
	return errors.Is(err, ErrNoLeader) || errors.Is(err, ErrNotReady)
}

// IsNotFound reports whether err says the named object does not exist.
func IsNotFound(err error) bool { return errors.Is(err, ErrNotFound) }
