package rpc

import (
	"context"
	"errors"
	"io"
	"net"
	"sync"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/yamux"
)

// Listener serves a TCP port by the first byte of each connection:
// ConnRPC and ConnMultiplex are served by an RPC server, ConnRaft is handed
// to Raft (when a Raft handoff is set), ConnTLS is unwrapped first (with
// UseTLS; it is then the only type accepted), anything else is closed with
// a logged reason. Malformed requests close only their own connection.
type Listener struct {
	rpc    *Server
	logger hclog.Logger
	raft   func(net.Conn)
	// raftRole is the certificate role that may open Raft (with TLS on):
	// a server's for servers, a router's for routers (WithRaftRole).
	raftRole Role
	tls      *listenerTLS    // nil: plaintext only (see UseTLS)
	ctx      context.Context // ends when the listener closes
	cancel   context.CancelFunc

	limits  Limits
	clients clientCounts
	mem     *memBudget

	mu     sync.Mutex
	conns  map[net.Conn]struct{}
	closed bool
	wg     sync.WaitGroup
}

// NewListener returns a Listener for rpcServer, with DefaultLimits unless
// an option says otherwise. raft, if not nil, receives connections whose
// first byte is ConnRaft, with the handshake read deadline still set: it
// clears it once a whole message has arrived.
func NewListener(rpcServer *Server, logger hclog.Logger, raft func(net.Conn), opts ...ListenerOption) *Listener {
	if logger == nil {
		logger = hclog.NewNullLogger()
	}
	ctx, cancel := context.WithCancel(context.Background())
	l := &Listener{rpc: rpcServer, logger: logger, raft: raft, raftRole: RoleServer, conns: map[net.Conn]struct{}{}, ctx: ctx, cancel: cancel,
		limits: DefaultLimits()}
	for _, o := range opts {
		o(l)
	}
	l.mem = newMemBudget(l.limits)
	l.mem.onRefused = func(key clientKey) {
		if !l.mem.refused.shouldWarn() {
			return
		}
		l.logger.Warn("reading slowly from a client that made this process read past its allowance of refused requests (further ones logged at most every 10s)",
			"client", key, "allowance", byteSize(l.limits.RefusedReadAllowance), "rate_per_second", byteSize(l.limits.RefusedReadRate))
	}
	return l
}

// Serve accepts connections on ln until ln is closed.
func (l *Listener) Serve(ln net.Listener) {
	for {
		conn, err := ln.Accept()
		if err != nil {
			if l.isClosed() || errors.Is(err, net.ErrClosed) {
				return
			}
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() {
				continue
			}
			l.logger.Error("accept failed", "error", err)
			time.Sleep(10 * time.Millisecond) // back off a hot error loop (e.g. out of file descriptors)
			continue
		}
		if conn = l.admit(conn); conn == nil {
			continue // over its client's connection limit
		}
		l.wg.Add(1)
		go func() {
			defer l.wg.Done()
			l.handle(conn)
		}()
	}
}

// Close closes every connection being served, ends the contexts of the
// requests in flight and waits for their handlers to return. Close the
// net.Listener first, so that Serve accepts nothing more.
func (l *Listener) Close() {
	l.mu.Lock()
	l.closed = true
	conns := l.conns
	l.conns = map[net.Conn]struct{}{}
	l.mu.Unlock()
	l.cancel()
	for c := range conns {
		c.Close()
	}
	l.wg.Wait()
}

func (l *Listener) isClosed() bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.closed
}

func (l *Listener) track(c net.Conn) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed {
		return false
	}
	l.conns[c] = struct{}{}
	return true
}

func (l *Listener) untrack(c net.Conn) {
	l.mu.Lock()
	delete(l.conns, c)
	l.mu.Unlock()
}

func (l *Listener) handle(conn net.Conn) {
	if !l.track(conn) {
		conn.Close()
		return
	}
	// The read deadline set by admit (the handshake timeout) covers the
	// type byte, for TLS the whole handshake and the inner type byte, and
	// runs on until a whole request has arrived (limits.go).
	deadline := handshakeDeadline(conn)
	var b [1]byte
	if _, err := io.ReadFull(conn, b[:]); err != nil {
		l.logger.Debug("connection closed before its type byte", "remote", conn.RemoteAddr(), "error", err)
		l.untrack(conn)
		conn.Close()
		return
	}
	raw := conn // tracked; closing it closes a TLS connection over it too
	conn, t, info, err := l.unwrapTLS(raw, ConnType(b[0]), deadline)
	if err != nil {
		l.logger.Warn("closing connection", "remote", raw.RemoteAddr(), "error", err)
		l.untrack(raw)
		raw.Close()
		return
	}
	if t != ConnRaft && t != ConnRPC && t != ConnMultiplex || t == ConnRaft && l.raft == nil {
		l.logger.Warn("closing connection with unknown type byte", "remote", conn.RemoteAddr(), "byte", byte(t))
		l.untrack(raw)
		conn.Close()
		return
	}
	mem, err := l.identify(raw, info, t)
	if err != nil {
		l.logger.Warn("closing connection", "remote", raw.RemoteAddr(), "error", err)
		l.untrack(raw)
		raw.Close()
		return
	}
	if t == ConnRaft {
		l.untrack(raw) // Raft's transport owns it from here
		l.raft(conn)
		return
	}
	defer mem.close()
	defer l.untrack(raw)
	if t == ConnRPC {
		l.serveRPC(&trackedConn{Conn: conn, activity: l.activityOf(conn), mem: mem}, info)
	} else {
		l.serveMultiplex(conn, info, mem)
	}
}

// serveMultiplex serves the streams of a yamux session on conn; mem is
// the connection's request memory, which every stream and the bytes yamux
// holds for them are charged to.
func (l *Listener) serveMultiplex(conn net.Conn, info *ConnInfo, mem *connMemory) {
	meter := &yamuxMeter{mem: mem, onCut: func(err error) {
		l.logger.Warn("closing a multiplexed connection over its request memory", "remote", conn.RemoteAddr(), "error", err)
	}}
	session, err := yamux.Server(newFrameConn(&meteredConn{Conn: conn, meter: meter}), l.serverYamuxConfig())
	if err != nil {
		l.logger.Warn("cannot start yamux session", "remote", conn.RemoteAddr(), "error", err)
		conn.Close()
		return
	}
	var streams streamCap
	defer func() {
		session.Close()
		streams.running.Wait()
		meter.close()
	}()
	act := l.activityOf(conn)
	act.setOnIdle(func() { session.Close() })
	for {
		stream, err := session.AcceptStream()
		if err != nil {
			if !session.IsClosed() && !l.isClosed() {
				l.logger.Debug("multiplexed session ended", "remote", conn.RemoteAddr(), "error", err)
			}
			return
		}
		if !l.admitStream(&streams, session, stream, conn.RemoteAddr()) {
			if session.IsClosed() {
				return
			}
			continue
		}
		if err := mem.takeOverhead(streamOverhead); err != nil {
			l.logger.Warn("closing a multiplexed connection over its request memory", "remote", conn.RemoteAddr(), "error", err)
			streams.open.Add(-1)
			stream.Close()
			return
		}
		stream.SetReadDeadline(time.Now().Add(l.limits.HandshakeTimeout))
		l.wg.Add(1)
		streams.running.Add(1)
		go func() {
			defer l.wg.Done()
			defer streams.running.Done()
			defer streams.open.Add(-1)
			defer mem.giveOverhead(streamOverhead)
			l.serveRPC(&trackedConn{Conn: stream, activity: act, mem: mem, stream: stream, meter: meter}, info)
		}()
	}
}

// meteredConn is the connection under a yamux session: what it reads is
// counted by the session's meter, and a frame the connection's request
// memory has no room for ends the session.
type meteredConn struct {
	net.Conn
	meter *yamuxMeter
}

func (c *meteredConn) Read(p []byte) (int, error) {
	n, err := c.Conn.Read(p)
	if n > 0 {
		if merr := c.meter.count(p[:n]); merr != nil {
			return 0, merr
		}
	}
	return n, err
}

// serveRPC serves msgpack RPC on one connection or stream until it closes.
// info is the connection's; each stream gets a copy.
func (l *Listener) serveRPC(conn *trackedConn, info *ConnInfo) {
	ci := *info
	l.rpc.ServeConn(l.ctx, conn, &ci)
}
