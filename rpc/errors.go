package rpc

import (
	"errors"
	"net/rpc"
	"strings"
)

// Errors that cross the wire travel as text (net/rpc semantics), so each
// sentinel has a fixed message and an Is helper that matches it on either
// side of a connection.
var (
	// ErrNoLeader: no leader was known within the hold timeout. Retryable.
	ErrNoLeader = errors.New("no cluster leader")
	// ErrLeaderNotReady: the leader has not yet applied its barrier. Retryable.
	ErrLeaderNotReady = errors.New("leader is not ready to serve consistent reads yet")
	// ErrNotFound: the named object does not exist.
	ErrNotFound = errors.New("not found")
)

// IsNoLeader reports whether err is (or came over the wire as) ErrNoLeader
// or ErrLeaderNotReady.
func IsNoLeader(err error) bool {
	return matches(err, ErrNoLeader) || matches(err, ErrLeaderNotReady)
}

// IsNotFound reports whether err is, or came over the wire as, ErrNotFound.
func IsNotFound(err error) bool { return matches(err, ErrNotFound) }

// IsServerError reports whether err is an answer from a server (as opposed
// to a failure to reach one).
func IsServerError(err error) bool {
	var se rpc.ServerError
	return errors.As(err, &se)
}

// IsRetryable reports whether a call that failed with err may succeed if
// tried again, perhaps on another server.
func IsRetryable(err error) bool {
	if err == nil {
		return false
	}
	return !IsServerError(err) || IsNoLeader(err)
}

func matches(err, target error) bool {
	if err == nil {
		return false
	}
	return errors.Is(err, target) || strings.Contains(err.Error(), target.Error())
}
