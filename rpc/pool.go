package rpc

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/rpc"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/go-hclog"
	msgpackrpc "github.com/hashicorp/net-rpc-msgpackrpc/v2"
	"github.com/hashicorp/yamux"
	"github.com/weft-sched/weft/internal/tlsutil"
)

// DefaultCallTimeout bounds a call that is not a blocking query: enough for
// a follower to hold the request while a leader is elected and forward it.
const DefaultCallTimeout = 30 * time.Second

const (
	dialTimeout        = 5 * time.Second
	maxIdleStreams     = 16
	yamuxKeepAlive     = 10 * time.Second
	yamuxWriteDeadline = 10 * time.Second
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

// Pool keeps one yamux session per server address and reuses idle streams,
// so a call costs neither a TCP handshake nor a new stream. With TLS (see
// NewTLSPool) every address it dials must prove it holds one role. It is
// safe for concurrent use.
type Pool struct {
	logger hclog.Logger
	tls    *tlsutil.Configurator // nil: plaintext
	peer   Role                  // the role every peer must hold, with tls

	mu       sync.Mutex
	sessions map[string]*muxSession
	closed   bool
}

type muxSession struct {
	addr    string
	session *yamux.Session
	// answered is set once the server at addr has answered a call on this
	// session: a session that dies before is likely refused, not broken.
	answered atomic.Bool

	mu   sync.Mutex
	idle []*clientStream
}

type clientStream struct {
	net.Conn
	codec rpc.ClientCodec
}

// NewPool returns an empty pool.
func NewPool(logger hclog.Logger) *Pool {
	if logger == nil {
		logger = hclog.NewNullLogger()
	}
	return &Pool{logger: logger.Named("rpc_pool"), sessions: map[string]*muxSession{}}
}

// NewTLSPool returns an empty pool whose connections are TLS (verified
// with tc, presenting tc's certificate) to peers that must hold a
// certificate of role peer: a pool per role a process calls (servers
// for the servers, agents for the agents). With tc nil it is NewPool.
func NewTLSPool(logger hclog.Logger, tc *tlsutil.Configurator, peer Role) *Pool {
	p := NewPool(logger)
	p.tls, p.peer = tc, peer
	return p
}

// Call invokes method on the server at addr and waits for the answer
// until ctx ends or the request's own timeout (DefaultCallTimeout, or its
// blocking wait plus that) passes, whichever comes first. The server is
// told how long the caller waits (RequestHeader.Timeout), so it gives up in
// time to answer. A server's answer that is an error comes back as an
// *Error with the server's code; a failure to reach the server or to get
// its answer is a *TransportError, and the session to it is dropped.
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
	s, err := p.session(ctx, addr)
	if err != nil {
		return &TransportError{Addr: addr, Method: method, Err: err}
	}
	st, err := s.stream()
	if err != nil {
		err = s.refused(fmt.Errorf("open stream: %w", err))
		p.drop(s)
		return &TransportError{Addr: addr, Method: method, Err: err}
	}
	st.SetDeadline(deadline)
	// A caller that gives up early closes the stream under the call.
	stop := context.AfterFunc(ctx, func() { st.Close() })
	err = msgpackrpc.CallWithCodec(st.codec, method, args, reply)
	cancelled := !stop()
	var se rpc.ServerError
	switch {
	case err == nil && !cancelled:
		s.answered.Store(true)
		s.release(st)
		return nil
	case errors.As(err, &se) && !cancelled:
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
	if !errors.Is(err, context.Canceled) {
		// A server that did not answer in time, or broke the stream, is not
		// trusted with the session's other calls: reconnect next time.
		p.drop(s)
	}
	return &TransportError{Addr: addr, Method: method, Err: err}
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

func (p *Pool) session(ctx context.Context, addr string) (*muxSession, error) {
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		return nil, fmt.Errorf("connection pool is shut down")
	}
	if s, ok := p.sessions[addr]; ok && !s.session.IsClosed() {
		p.mu.Unlock()
		return s, nil
	}
	p.mu.Unlock()

	d := net.Dialer{Timeout: dialTimeout}
	conn, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		return nil, err
	}
	hsCtx, cancel := context.WithTimeout(ctx, dialTimeout)
	conn, err = ClientHandshake(hsCtx, conn, p.tls, p.peer, ConnMultiplex)
	cancel()
	if err != nil {
		return nil, fmt.Errorf("handshake with %s: %w", addr, err)
	}
	ys, err := yamux.Client(conn, YamuxConfig())
	if err != nil {
		conn.Close()
		return nil, fmt.Errorf("start session with %s: %w", addr, err)
	}
	s := &muxSession{addr: addr, session: ys}

	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		ys.Close()
		return nil, fmt.Errorf("connection pool is shut down")
	}
	if old, ok := p.sessions[addr]; ok && !old.session.IsClosed() {
		ys.Close() // lost a race with another dialer; use theirs
		return old, nil
	}
	p.sessions[addr] = s
	return s, nil
}

func (p *Pool) drop(s *muxSession) {
	p.mu.Lock()
	if p.sessions[s.addr] == s {
		delete(p.sessions, s.addr)
	}
	p.mu.Unlock()
	s.session.Close()
}

func (s *muxSession) stream() (*clientStream, error) {
	s.mu.Lock()
	if n := len(s.idle); n > 0 {
		st := s.idle[n-1]
		s.idle = s.idle[:n-1]
		s.mu.Unlock()
		return st, nil
	}
	s.mu.Unlock()
	conn, err := s.session.Open()
	if err != nil {
		return nil, err
	}
	return &clientStream{Conn: conn, codec: NewClientCodec(conn)}, nil
}

func (s *muxSession) release(st *clientStream) {
	st.SetDeadline(time.Time{})
	s.mu.Lock()
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
	p.sessions = map[string]*muxSession{}
	p.mu.Unlock()
	for _, s := range sessions {
		s.session.Close()
	}
}
