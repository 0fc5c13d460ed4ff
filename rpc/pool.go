package rpc

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/rpc"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/yamux"
	"github.com/weft-sched/weft/internal/tlsutil"
)

// DefaultCallTimeout bounds a call that is not a blocking query: enough for
// a follower to hold the request while a leader is elected and forward it.
const DefaultCallTimeout = 30 * time.Second

const (
	dialTimeout = 5 * time.Second
	// maxIdleStreams bounds the idle streams a session keeps: every
	// stream it may open (bench/rpc-hotpath.txt). An idle stream holds no
	// buffer (clientCodec), so keeping it costs little, while closing it
	// makes the next burst of calls open a stream each; with 16, a
	// follower forwarding bursts of 64 calls opened 0.65 streams per call.
	maxIdleStreams     = PoolMaxStreamsPerConn
	yamuxKeepAlive     = 10 * time.Second
	yamuxWriteDeadline = 10 * time.Second
	// probeTimeout bounds the ping that decides whether a session on which
	// a call went unanswered is still alive (Pool.suspect).
	probeTimeout = 5 * time.Second
	// sessionIdleTimeout closes a session that has carried no call for
	// that long (Pool.sweep): a client that moved to another server does
	// not keep a connection to each one it ever tried.
	sessionIdleTimeout = 2 * time.Minute
)

// YamuxConfig returns the yamux settings both ends of a multiplexed
// connection use.
func YamuxConfig() *yamux.Config {
	c := yamux.DefaultConfig()
	c.LogOutput = io.Discard
	c.KeepAliveInterval = yamuxKeepAlive
	c.ConnectionWriteTimeout = yamuxWriteDeadline
	c.StreamOpenTimeout = yamuxWriteDeadline
	return c
}

// Pool keeps yamux sessions to each server address and reuses idle
// streams, so a call costs neither a TCP handshake nor a new stream. A
// session carries at most PoolMaxStreamsPerConn streams at once (servers
// cap them, Limits.MaxStreamsPerConn); more concurrent calls to one address
// open another session. With TLS (see NewTLSPool) every address it dials
// must prove it holds one role. It is safe for concurrent use.
type Pool struct {
	logger hclog.Logger
	tls    *tlsutil.Configurator // nil: plaintext
	peers  []Role                // the roles a peer may hold, with tls

	mu       sync.Mutex
	sessions map[string][]*muxSession
	// dialing holds, per address, a channel closed when the dial in
	// flight there ends: callers that find no room wait for it rather
	// than each open a connection (a burst of calls would otherwise open
	// one each, past the servers' per-client limit).
	dialing map[string]chan struct{}
	closed  bool
	// sweeping is set while a sweep of idle sessions is scheduled.
	sweeping bool
	// probeTimeout and idleTimeout are probeTimeout and
	// sessionIdleTimeout (shorter in tests).
	probeTimeout, idleTimeout time.Duration

	// streamsOpened counts the streams the pool has opened (benchmarks
	// and tests: how often a call found no idle stream).
	streamsOpened atomic.Int64
}

// PoolMaxStreamsPerConn is the most streams a Pool opens on one
// connection, half the servers' default cap.
const PoolMaxStreamsPerConn = DefaultMaxStreamsPerConn / 2

type muxSession struct {
	addr    string
	session *yamux.Session
	// answered is set once the server at addr has answered a call on this
	// session: a session that dies before is likely refused, not broken.
	answered atomic.Bool
	// probing is set while a ping checks the session (Pool.suspect).
	probing atomic.Bool

	mu       sync.Mutex
	idle     []*clientStream
	open     int       // streams open, in use or idle
	lastUsed time.Time // when a call last ended on it
}

type clientStream struct {
	net.Conn
	codec rpc.ClientCodec
	sess  *muxSession
	once  sync.Once
	// closeFn ends the call on the stream and closes it (for Call's
	// context.AfterFunc), made once per stream rather than once per call.
	closeFn func()
}

func newClientStream(conn net.Conn, s *muxSession) *clientStream {
	st := &clientStream{Conn: conn, codec: NewClientCodec(conn), sess: s}
	st.closeFn = func() {
		// A deadline in the past wakes a read or write in progress (a
		// yamux stream's Close alone does not), then the stream closes.
		st.Conn.SetDeadline(time.Unix(1, 0))
		st.Close()
	}
	return st
}

// Close closes the stream and frees its place in the session.
func (st *clientStream) Close() error {
	err := st.Conn.Close()
	st.once.Do(func() {
		st.sess.mu.Lock()
		st.sess.open--
		st.sess.mu.Unlock()
	})
	return err
}

// NewPool returns an empty pool.
func NewPool(logger hclog.Logger) *Pool {
	if logger == nil {
		logger = hclog.NewNullLogger()
	}
	return &Pool{logger: logger.Named("rpc_pool"), sessions: map[string][]*muxSession{}, dialing: map[string]chan struct{}{},
		probeTimeout: probeTimeout, idleTimeout: sessionIdleTimeout}
}

// NewTLSPool returns an empty pool whose connections are TLS (verified
// with tc, presenting tc's certificate) to peers that must hold a
// certificate of role peer (or one of also): a pool per role a process
// calls (servers for the servers, agents for the agents; servers or
// routers for a client). With tc nil it is NewPool.
func NewTLSPool(logger hclog.Logger, tc *tlsutil.Configurator, peer Role, also ...Role) *Pool {
	p := NewPool(logger)
	p.tls, p.peers = tc, append([]Role{peer}, also...)
	return p
}

// Call invokes method on the server at addr and waits for the answer
// until ctx ends or the request's own timeout (DefaultCallTimeout, or its
// blocking wait plus that) passes, whichever comes first. The server is
// told how long the caller waits (RequestHeader.Timeout), so it gives up in
// time to answer. A server's answer that is an error comes back as an
// *Error with the server's code; a failure to reach the server or to get
// its answer is a *TransportError. A session on which a call broke is
// dropped; one on which a call went unanswered in time is probed and
// dropped only if the server does not answer a ping (Pool.suspect).
func (p *Pool) Call(ctx context.Context, addr, method string, args, reply any) error {
	deadline := time.Now().Add(DefaultCallTimeout)
	var hdr *RequestHeader
	if h, ok := args.(interface{ Header() *RequestHeader }); ok {
		hdr = h.Header()
		deadline = time.Now().Add(hdr.callTimeout())
	}
	if d, ok := ctx.Deadline(); ok && d.Before(deadline) {
		deadline = d
	}
	if err := ctx.Err(); err != nil {
		return &TransportError{Addr: addr, Method: method, Err: err}
	}
	if hdr != nil {
		// Leave the answer time to come back.
		remaining := time.Until(deadline)
		hdr.Timeout = remaining - min(remaining/16, 250*time.Millisecond)
	}
	// The call ends with ctx: closing the stream under it (below) ends a
	// read or write in progress. The stream's own deadline is not used: a
	// yamux stream with a deadline starts a timer for every read.
	if d, ok := ctx.Deadline(); !ok || d.After(deadline) {
		var cancel context.CancelFunc
		ctx, cancel = context.WithDeadline(ctx, deadline)
		defer cancel()
	}
	s, st, err := p.stream(ctx, addr)
	if err != nil {
		if s != nil {
			err = s.refused(err)
			p.drop(s)
		}
		return &TransportError{Addr: addr, Method: method, Err: err}
	}
	// A caller that gives up, or whose deadline passes, closes the stream
	// under the call.
	stop := context.AfterFunc(ctx, st.closeFn)
	err = callWithCodec(st.codec, method, args, reply)
	cancelled := !stop()
	se, isServerErr := err.(rpc.ServerError) // callWithCodec does not wrap it
	switch {
	case err == nil && !cancelled:
		s.answered.Store(true)
		s.release(st)
		return nil
	case isServerErr && !cancelled:
		s.answered.Store(true)
		s.release(st)
		return decodeError(string(se))
	}
	st.Close()
	switch {
	case cancelled:
		err = ctx.Err()
	case !time.Now().Before(deadline):
		err = fmt.Errorf("%w (%v)", context.DeadlineExceeded, err)
	}
	err = s.refused(err)
	switch {
	case errors.Is(err, context.Canceled):
	case errors.Is(err, context.DeadlineExceeded) && !s.session.IsClosed():
		p.suspect(s)
	default:
		// A server that broke the stream is not trusted with the session's
		// other calls: reconnect next time.
		p.drop(s)
	}
	return &TransportError{Addr: addr, Method: method, Err: err}
}

// suspect checks a session on which a call went unanswered in time, and
// drops it if the server does not answer a ping within probeTimeout (a
// server cut off, stopped or gone). A slow server is not a dead one: a
// busy leader answers some calls after their attempt's deadline, and
// dropping the session then made every late answer cost a new connection
// (TCP and TLS handshakes on both ends, a TIME_WAIT port here) just when
// the servers were busiest. At 10,000 simulated nodes that loop turned
// slow heartbeats into a storm of reconnections that used up the
// ephemeral ports. A yamux ping is answered by the server's session loop,
// whatever its handlers are doing, so it tells the two apart. Calls may
// use the session meanwhile; one probe runs at a time.
func (p *Pool) suspect(s *muxSession) {
	if !s.probing.CompareAndSwap(false, true) {
		return
	}
	go func() {
		defer s.probing.Store(false)
		pong := make(chan error, 1)
		// Ping returns when the pong comes, the session closes (drop
		// closes it) or yamux's own write timeout passes.
		go func() {
			_, err := s.session.Ping()
			pong <- err
		}()
		t := time.NewTimer(p.probeTimeout)
		defer t.Stop()
		select {
		case err := <-pong:
			if err == nil {
				return
			}
			p.logger.Debug("dropping a session whose server failed a ping", "addr", s.addr, "error", err)
		case <-t.C:
			p.logger.Debug("dropping a session whose server did not answer a ping", "addr", s.addr, "timeout", p.probeTimeout)
		}
		p.drop(s)
	}()
}

// refused adds a likely reason to the failure of a session on which the
// server never answered: it closed the connection at once, as a server
// does to a peer whose TLS setting or certificate it refuses.
func (s *muxSession) refused(err error) error {
	if s.answered.Load() || !s.session.IsClosed() || errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return err
	}
	return fmt.Errorf("%w (the server closed the connection before any answer: does it need TLS, or refuse this certificate? its log says why)", err)
}

// stream returns an idle stream to addr, or a new one on a session with
// room, or on a new session.
func (p *Pool) stream(ctx context.Context, addr string) (*muxSession, *clientStream, error) {
	for {
		p.mu.Lock()
		if p.closed {
			p.mu.Unlock()
			return nil, nil, fmt.Errorf("connection pool is shut down")
		}
		var onStack [4]*muxSession
		sessions := append(onStack[:0], p.sessions[addr]...)
		p.mu.Unlock()
		for _, s := range sessions {
			if s.session.IsClosed() {
				p.drop(s)
				continue
			}
			st, reserved := s.take()
			if st != nil {
				return s, st, nil
			}
			if !reserved {
				continue // full
			}
			conn, err := s.session.Open()
			if err != nil {
				s.unreserve()
				return s, nil, fmt.Errorf("open stream: %w", err) // Call drops s
			}
			p.streamsOpened.Add(1)
			return s, newClientStream(conn, s), nil
		}
		if err := p.dialOnce(ctx, addr); err != nil {
			return nil, nil, err
		}
	}
}

// dialOnce opens a new session to addr, or waits for the dial already in
// flight there to end; either way the caller looks for room again.
func (p *Pool) dialOnce(ctx context.Context, addr string) error {
	p.mu.Lock()
	if wait, ok := p.dialing[addr]; ok {
		p.mu.Unlock()
		select {
		case <-wait:
			return nil
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	done := make(chan struct{})
	p.dialing[addr] = done
	p.mu.Unlock()
	err := p.dial(ctx, addr)
	p.mu.Lock()
	delete(p.dialing, addr)
	p.mu.Unlock()
	close(done)
	return err
}

// take returns an idle stream, or reserves room for a new one (reserved),
// or neither when the session is full.
func (s *muxSession) take() (st *clientStream, reserved bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if n := len(s.idle); n > 0 {
		st = s.idle[n-1]
		s.idle = s.idle[:n-1]
		return st, false
	}
	if s.open < PoolMaxStreamsPerConn {
		s.open++
		return nil, true
	}
	return nil, false
}

func (s *muxSession) unreserve() {
	s.mu.Lock()
	s.open--
	s.mu.Unlock()
}

func (s *muxSession) hasRoom() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.idle) > 0 || s.open < PoolMaxStreamsPerConn
}

// dial opens a new session to addr, unless another caller has meanwhile
// opened one with room.
func (p *Pool) dial(ctx context.Context, addr string) error {
	d := net.Dialer{Timeout: dialTimeout}
	conn, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		return err
	}
	hsCtx, cancel := context.WithTimeout(ctx, dialTimeout)
	conn, err = clientHandshake(hsCtx, conn, p.tls, p.peers, ConnMultiplex)
	cancel()
	if err != nil {
		return fmt.Errorf("handshake with %s: %w", addr, err)
	}
	ys, err := yamux.Client(newFrameConn(conn), YamuxConfig())
	if err != nil {
		conn.Close()
		return fmt.Errorf("start session with %s: %w", addr, err)
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		ys.Close()
		return fmt.Errorf("connection pool is shut down")
	}
	for _, old := range p.sessions[addr] {
		if !old.session.IsClosed() && old.hasRoom() {
			ys.Close() // lost a race with another dialer; use theirs
			return nil
		}
	}
	p.sessions[addr] = append(p.sessions[addr], &muxSession{addr: addr, session: ys, lastUsed: time.Now()})
	if !p.sweeping {
		p.sweeping = true
		time.AfterFunc(p.idleTimeout, p.sweep)
	}
	return nil
}

// sweep closes the sessions that have carried no call for idleTimeout,
// and looks again later while any remain.
func (p *Pool) sweep() {
	now := time.Now()
	var idle []*muxSession
	p.mu.Lock()
	for addr, list := range p.sessions {
		kept := list[:0]
		for _, s := range list {
			if s.idleSince(now) >= p.idleTimeout {
				idle = append(idle, s)
			} else {
				kept = append(kept, s)
			}
		}
		clear(list[len(kept):])
		if len(kept) == 0 {
			delete(p.sessions, addr)
		} else {
			p.sessions[addr] = kept
		}
	}
	p.sweeping = len(p.sessions) > 0 && !p.closed
	if p.sweeping {
		time.AfterFunc(p.idleTimeout/2, p.sweep)
	}
	p.mu.Unlock()
	for _, s := range idle {
		s.session.Close()
	}
}

// idleSince returns how long the session has had no call in flight (0
// while one is).
func (s *muxSession) idleSince(now time.Time) time.Duration {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.open > len(s.idle) {
		return 0
	}
	return now.Sub(s.lastUsed)
}

func (p *Pool) drop(s *muxSession) {
	p.mu.Lock()
	p.sessions[s.addr] = slices.DeleteFunc(p.sessions[s.addr], func(x *muxSession) bool { return x == s })
	if len(p.sessions[s.addr]) == 0 {
		delete(p.sessions, s.addr)
	}
	p.mu.Unlock()
	s.session.Close()
}

// release keeps st idle for the next call, or closes it past the idle
// bound.
func (s *muxSession) release(st *clientStream) {
	s.mu.Lock()
	s.lastUsed = time.Now()
	if len(s.idle) < maxIdleStreams {
		s.idle = append(s.idle, st)
		st = nil
	}
	s.mu.Unlock()
	if st != nil {
		st.Close()
	}
}

// Shutdown closes every session; later calls fail.
func (p *Pool) Shutdown() {
	p.mu.Lock()
	p.closed = true
	sessions := p.sessions
	p.sessions = map[string][]*muxSession{}
	p.mu.Unlock()
	for _, list := range sessions {
		for _, s := range list {
			s.session.Close()
		}
	}
}
