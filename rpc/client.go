package rpc

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"strings"
	"sync"
	"time"
)

// Client defaults.
const (
	// DefaultRetryBudget bounds how long Call retries when its context has
	// no deadline.
	DefaultRetryBudget = 15 * time.Second
	// DefaultAttemptTimeout bounds a client's first attempt on one server
	// (beyond a blocking query's wait); each retry doubles it up to
	// MaxAttemptTimeout. A server that does not answer in time is passed
	// over for the next one at once.
	DefaultAttemptTimeout = time.Second
	MaxAttemptTimeout     = 10 * time.Second
)

// Client calls weft servers. It sticks to one server while calls succeed
// and rotates to the next on a connection error, a timeout or a retryable
// answer (no leader), retrying until its context ends or its retry budget
// is spent. It is safe for concurrent use.
type Client struct {
	pool *Pool
	// RetryBudget bounds how long Call retries when its context has no
	// deadline of its own.
	RetryBudget time.Duration
	// AttemptTimeout bounds the first attempt on one server; later attempts
	// double it, up to MaxAttemptTimeout.
	AttemptTimeout time.Duration
	// OnRetry, if set, is told of every failed attempt that will be
	// retried, with how long the call has taken so far and the last outcome
	// on each server tried (progress for a waiting user).
	OnRetry func(elapsed time.Duration, tried []ServerOutcome)
	// Token is the ACL token's secret ID sent with every request that
	// carries none of its own (SPEC §15).
	Token string
	// Spread starts the client at a random server of a list it is given
	// (SetServers) rather than the first, so that many clients given the
	// same list, such as a cluster's agents, spread over the servers
	// instead of all calling the first (which would forward all their
	// calls). Set it before SetServers.
	Spread bool

	mu      sync.Mutex
	servers []string
	next    int
}

// ServerOutcome is what the last attempt on one server came to.
type ServerOutcome struct {
	Addr string
	Err  error
}

// NewClient returns a client for the given server addresses (host:port).
// If pool is nil the client makes its own.
func NewClient(servers []string, pool *Pool) *Client {
	if pool == nil {
		pool = NewPool(nil)
	}
	c := &Client{pool: pool, RetryBudget: DefaultRetryBudget, AttemptTimeout: DefaultAttemptTimeout}
	c.SetServers(servers)
	return c
}

// SetServers replaces the server list, keeping the current server first if
// it is still in it; otherwise the client starts at the first, or, with
// Spread, at a random one.
func (c *Client) SetServers(servers []string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	cur := ""
	if len(c.servers) > 0 {
		cur = c.servers[c.next%len(c.servers)]
	}
	c.servers = append([]string(nil), servers...)
	c.next = 0
	if c.Spread && len(c.servers) > 1 {
		c.next = rand.N(len(c.servers))
	}
	for i, s := range c.servers {
		if s == cur {
			c.next = i
		}
	}
}

// Servers returns the current server list.
func (c *Client) Servers() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]string(nil), c.servers...)
}

func (c *Client) current() (string, int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.servers) == 0 {
		return "", 0
	}
	return c.servers[c.next%len(c.servers)], len(c.servers)
}

func (c *Client) rotate(failed string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.servers) > 0 && c.servers[c.next%len(c.servers)] == failed {
		c.next = (c.next + 1) % len(c.servers)
	}
}

// ErrNoServers is returned by a client that has no server addresses.
var ErrNoServers = errors.New("no weft servers known")

// CallError is a call that failed on every server tried: it names what
// each answered, and unwraps to every server's failure (so IsNoLeader and
// IsRetryable see through it).
type CallError struct {
	Method string
	Tried  []ServerOutcome
}

func (e *CallError) Error() string {
	parts := make([]string, len(e.Tried))
	for i, t := range e.Tried {
		parts[i] = t.Addr + ": " + Describe(t.Err)
	}
	return fmt.Sprintf("%s failed on every server tried: %s", e.Method, strings.Join(parts, "; "))
}

func (e *CallError) Unwrap() []error {
	out := make([]error, len(e.Tried))
	for i, t := range e.Tried {
		out[i] = t.Err
	}
	return out
}

// Describe says in a few words what an attempt on one server came to.
func Describe(err error) string {
	var te *TransportError
	switch {
	case err == nil:
		return "ok"
	case errors.Is(err, ErrNoLeader):
		return "knows no leader"
	case errors.Is(err, ErrNotReady):
		return "leader not ready yet"
	case errors.As(err, &te):
		inner := te.Err
		if errors.Is(inner, context.DeadlineExceeded) || isTimeout(inner) {
			return "no answer in time"
		}
		return "unreachable (" + inner.Error() + ")"
	}
	return err.Error()
}

func isTimeout(err error) bool {
	var t interface{ Timeout() bool }
	return errors.As(err, &t) && t.Timeout()
}

// Call invokes method on a server. A request with a RequestHeader gets a
// request ID if it has none (so a retry of this write is applied at most
// once); a request value is one logical request — build a new one for the
// next. Server answers are returned as they are, except retryable ones (no
// leader) which, like connection errors and timeouts, make the client try
// the next server at once, with jittered backoff once all were tried.
// Retrying ends when ctx ends, or after RetryBudget if ctx has no
// deadline; when every server refuses connections it ends after two rounds
// over them, so a client whose servers are all down fails fast.
func (c *Client) Call(ctx context.Context, method string, args, reply any) error {
	if _, ok := ctx.Deadline(); !ok && c.RetryBudget > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, c.RetryBudget)
		defer cancel()
	}
	var hdr *RequestHeader
	if h, ok := args.(interface{ Header() *RequestHeader }); ok {
		hdr = h.Header()
		if hdr.RequestID == "" {
			hdr.RequestID = NewRequestID()
		}
		if hdr.AuthToken == "" {
			hdr.AuthToken = c.Token
		}
	}
	start := time.Now()
	backoff := 50 * time.Millisecond
	attemptTimeout := c.AttemptTimeout
	var tried []ServerOutcome
	note := func(addr string, err error) {
		for i := range tried {
			if tried[i].Addr == addr {
				tried[i].Err = err
				return
			}
		}
		tried = append(tried, ServerOutcome{addr, err})
	}
	for attempt := 1; ; attempt++ {
		addr, n := c.current()
		if addr == "" {
			return ErrNoServers
		}
		err := c.attempt(ctx, addr, method, args, reply, hdr, attemptTimeout)
		if err == nil || !IsRetryable(err) {
			return err
		}
		note(addr, err)
		c.rotate(addr)
		if errors.Is(err, ErrTimeout) || isTimeoutErr(err) {
			attemptTimeout = min(2*attemptTimeout, MaxAttemptTimeout)
		}
		if ctx.Err() != nil || attempt >= 2*n && allUnreachable(tried) {
			return &CallError{Method: method, Tried: tried}
		}
		if c.OnRetry != nil {
			c.OnRetry(time.Since(start), append([]ServerOutcome(nil), tried...))
		}
		if attempt < n {
			continue // try every server once before waiting
		}
		select {
		case <-time.After(backoff + rand.N(backoff)):
		case <-ctx.Done():
			return &CallError{Method: method, Tried: tried}
		}
		backoff = min(2*backoff, time.Second)
	}
}

// allUnreachable reports whether no server tried has answered or hung:
// every one refused the connection, so waiting will not help.
func allUnreachable(tried []ServerOutcome) bool {
	for _, t := range tried {
		if IsServerError(t.Err) || isTimeoutErr(t.Err) {
			return false
		}
	}
	return true
}

// isTimeoutErr reports whether err is a transport timeout: the server did
// not answer within the attempt's deadline.
func isTimeoutErr(err error) bool {
	var te *TransportError
	return errors.As(err, &te) && (errors.Is(te.Err, context.DeadlineExceeded) || isTimeout(te.Err))
}

// attempt makes one call on one server, bounded by the attempt timeout on
// top of the request's own blocking wait.
func (c *Client) attempt(ctx context.Context, addr, method string, args, reply any, hdr *RequestHeader, timeout time.Duration) error {
	if timeout > 0 {
		if hdr != nil && hdr.MinQueryIndex > 0 {
			w := hdr.MaxWait
			if w <= 0 || w > MaxBlockingWait {
				w = MaxBlockingWait
			}
			timeout += w + w/16
		}
		// A caller whose own deadline comes first (an agent's heartbeat,
		// whose attempt lasts the whole heartbeat) needs no second timer.
		if d, ok := ctx.Deadline(); !ok || time.Until(d) > timeout {
			var cancel context.CancelFunc
			ctx, cancel = context.WithTimeout(ctx, timeout)
			defer cancel()
		}
	}
	return c.pool.Call(ctx, addr, method, args, reply)
}

// Pool returns the client's connection pool.
func (c *Client) Pool() *Pool { return c.pool }

// Close releases the client's connections.
func (c *Client) Close() { c.pool.Shutdown() }

// String describes the client's servers for error messages.
func (c *Client) String() string { return fmt.Sprint(c.Servers()) }
