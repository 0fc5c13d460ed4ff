package rpc

import (
	"fmt"
	"io"
	"net"
	"net/rpc"
	"sync"
	"time"

	"github.com/hashicorp/go-hclog"
	msgpackrpc "github.com/hashicorp/net-rpc-msgpackrpc/v2"
	"github.com/hashicorp/yamux"
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
	return c
}

// Pool keeps one yamux session per server address and reuses idle streams,
// so a call costs neither a TCP handshake nor a new stream. It is safe for
// concurrent use.
type Pool struct {
	logger hclog.Logger

	mu       sync.Mutex
	sessions map[string]*muxSession
	closed   bool
}

type muxSession struct {
	addr    string
	session *yamux.Session

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

// Call invokes method on the server at addr. A server's answer (including a
// server-side error) comes back as it is; a failure to reach the server, or
// a broken stream, is wrapped with the address and the session is dropped.
func (p *Pool) Call(addr, method string, args, reply any) error {
	timeout := DefaultCallTimeout
	if h, ok := args.(interface{ Header() *RequestHeader }); ok {
		timeout = h.Header().callTimeout()
	}
	s, err := p.session(addr)
	if err != nil {
		return err
	}
	st, err := s.stream()
	if err != nil {
		p.drop(s)
		return fmt.Errorf("open stream to %s: %w", addr, err)
	}
	st.SetDeadline(time.Now().Add(timeout))
	err = msgpackrpc.CallWithCodec(st.codec, method, args, reply)
	if err != nil && !IsServerError(err) {
		st.Close()
		if s.session.IsClosed() {
			p.drop(s)
		}
		return fmt.Errorf("call %s on %s: %w", method, addr, err)
	}
	s.release(st)
	return err
}

func (p *Pool) session(addr string) (*muxSession, error) {
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

	conn, err := net.DialTimeout("tcp", addr, dialTimeout)
	if err != nil {
		return nil, err
	}
	if _, err := conn.Write([]byte{byte(ConnMultiplex)}); err != nil {
		conn.Close()
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
