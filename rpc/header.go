package rpc

import (
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"strconv"
	"time"
)

// MaxBlockingWait caps a blocking query's max_wait (SPEC §4).
const MaxBlockingWait = 5 * time.Minute

// DefaultBlockingWait applies when a blocking query gives no max_wait.
const DefaultBlockingWait = 5 * time.Minute

// RequestHeader is carried by every request (SPEC §4).
type RequestHeader struct {
	// Region selects a federated sub-cluster (reserved).
	Region string `codec:"region" json:"region,omitempty"`
	// AuthToken authenticates the caller (reserved).
	AuthToken string `codec:"auth_token" json:"-"`
	// AllowStale lets any server answer a read from its local state.
	AllowStale bool `codec:"allow_stale" json:"allow_stale,omitempty"`
	// MinQueryIndex makes a read block until the state index exceeds it.
	MinQueryIndex uint64 `codec:"min_query_index" json:"min_query_index,omitempty"`
	// MaxWait bounds a blocking read; at most MaxBlockingWait.
	MaxWait time.Duration `codec:"max_wait" json:"max_wait,omitempty"`
	// RequestID identifies one logical write: a write retried with the same
	// ID (by a client after a broken connection, or by a follower
	// forwarding it) is applied at most once, and the retry gets the first
	// answer. Clients fill it in; see NewRequestID.
	RequestID string `codec:"request_id" json:"-"`
	// Timeout is how long the caller waits for the answer from when the
	// request is sent: the server gives up (and stops forwarding or holding
	// the request) before then. Clients fill it in.
	Timeout time.Duration `codec:"timeout" json:"-"`
}

// MaxRequestIDLength bounds a request ID.
const MaxRequestIDLength = 64

// NewRequestID returns a fresh random request ID.
func NewRequestID() string {
	var b [16]byte
	rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// ValidateRequestID checks the header's request ID: empty, or at most
// MaxRequestIDLength letters, digits, '-' and '_'.
func (h *RequestHeader) ValidateRequestID() error {
	if len(h.RequestID) > MaxRequestIDLength {
		return Errorf(CodeBadRequest, "request_id: longer than %d characters", MaxRequestIDLength)
	}
	for _, c := range h.RequestID {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-' || c == '_') {
			return Errorf(CodeBadRequest, "request_id: %s: use letters, digits, '-' and '_'", strconv.Quote(h.RequestID))
		}
	}
	return nil
}

// Header returns h; it lets servers reach the header of any request type.
func (h *RequestHeader) Header() *RequestHeader { return h }

// IsRead reports whether the request may be answered without the leader.
func (h *RequestHeader) IsRead() bool { return h.AllowStale }

// callTimeout is how long a client waits for the answer to a request with
// this header: long enough for the server to block for MaxWait.
func (h *RequestHeader) callTimeout() time.Duration {
	if h.MinQueryIndex == 0 {
		return DefaultCallTimeout
	}
	w := h.MaxWait
	if w <= 0 || w > MaxBlockingWait {
		w = MaxBlockingWait
	}
	return w + w/16 + DefaultCallTimeout
}

// ResponseMeta is carried by every read response.
type ResponseMeta struct {
	// Index is the Raft index of the data returned; pass it back as
	// MinQueryIndex to wait for a change.
	Index uint64 `codec:"index" json:"index"`
	// LastContact is how long since the answering server heard from the
	// leader (0 on the leader): how stale a stale read may be.
	LastContact time.Duration `codec:"last_contact" json:"last_contact"`
	// KnownLeader reports whether the answering server knew a leader.
	KnownLeader bool `codec:"known_leader" json:"known_leader"`
	// IndexLag is how many committed Raft entries the answering server had
	// not applied yet when it answered (0 on the leader): with LastContact,
	// how far behind a stale read is.
	IndexLag uint64 `codec:"index_lag" json:"index_lag"`
}

// Meta returns m; it lets servers fill the meta of any response type.
func (m *ResponseMeta) Meta() *ResponseMeta { return m }

// Duration is a time.Duration that reads as "5s" in JSON output. On the
// wire it is msgpack's integer nanoseconds, like time.Duration.
type Duration time.Duration

// MarshalJSON writes the duration as a Go duration string.
func (d Duration) MarshalJSON() ([]byte, error) {
	return json.Marshal(time.Duration(d).String())
}

// String formats d like time.Duration, with zero as "off".
func (d Duration) String() string {
	if d == 0 {
		return "off"
	}
	return time.Duration(d).String()
}

// StaleNote describes how far behind a stale answer may be, or is empty
// for an answer from the leader.
func (m *ResponseMeta) StaleNote() string {
	switch {
	case !m.KnownLeader:
		return "the answering server knows no leader; this answer may be out of date"
	case m.LastContact > 0 || m.IndexLag > 0:
		return fmt.Sprintf("stale read: the answering server last heard from the leader %s ago and was %d entries behind what it knew to be committed",
			m.LastContact.Round(time.Millisecond), m.IndexLag)
	}
	return ""
}
