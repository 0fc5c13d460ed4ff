package rpc

import (
	"errors"
	"io"
	"net"
	"net/rpc"
	"sync"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/yamux"
)

// Listener serves a TCP port by the first byte of each connection:
// ConnRPC and ConnMultiplex are served by an RPC server, ConnRaft is handed
// to Raft (when a Raft handoff is set), anything else is closed with a
// logged reason. Malformed requests close only their own connection.
type Listener struct {
	rpc    *rpc.Server
	logger hclog.Logger
	raft   func(net.Conn)

	mu     sync.Mutex
	conns  map[net.Conn]struct{}
	closed bool
	wg     sync.WaitGroup
}

// NewListener returns a Listener for rpcServer. raft, if not nil, receives
// connections whose first byte is ConnRaft.
func NewListener(rpcServer *rpc.Server, logger hclog.Logger, raft func(net.Conn)) *Listener {
	if logger == nil {
		logger = hclog.NewNullLogger()
	}
	return &Listener{rpc: rpcServer, logger: logger, raft: raft, conns: map[net.Conn]struct{}{}}
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
		go l.handle(conn)
	}
}

// Close closes every connection being served. Close the net.Listener too.
func (l *Listener) Close() {
	l.mu.Lock()
	l.closed = true
	conns := l.conns
	l.conns = map[net.Conn]struct{}{}
	l.mu.Unlock()
	for c := range conns {
		c.Close()
	}
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
	conn.SetReadDeadline(time.Now().Add(HandshakeTimeout))
	var b [1]byte
	if _, err := io.ReadFull(conn, b[:]); err != nil {
		l.logger.Debug("connection closed before its type byte", "remote", conn.RemoteAddr(), "error", err)
		conn.Close()
		return
	}
	conn.SetReadDeadline(time.Time{})
	t := ConnType(b[0])
	switch {
	case t == ConnRaft && l.raft != nil:
		l.raft(conn)
	case t == ConnRPC || t == ConnMultiplex:
		if !l.track(conn) {
			conn.Close()
			return
		}
		defer l.untrack(conn)
		if t == ConnRPC {
			l.serveRPC(conn)
		} else {
			l.serveMultiplex(conn)
		}
	default:
		l.logger.Warn("closing connection with unknown type byte", "remote", conn.RemoteAddr(), "byte", b[0])
		conn.Close()
	}
}

func (l *Listener) serveMultiplex(conn net.Conn) {
	session, err := yamux.Server(conn, YamuxConfig())
	if err != nil {
		l.logger.Warn("cannot start yamux session", "remote", conn.RemoteAddr(), "error", err)
		conn.Close()
		return
	}
	defer session.Close()
	for {
		stream, err := session.Accept()
		if err != nil {
			if !session.IsClosed() && !l.isClosed() {
				l.logger.Debug("multiplexed session ended", "remote", conn.RemoteAddr(), "error", err)
			}
			return
		}
		go l.serveRPC(stream)
	}
}

// serveRPC serves msgpack RPC on one connection or stream until it closes.
func (l *Listener) serveRPC(conn net.Conn) {
	remote := conn.RemoteAddr()
	codec := NewServerCodec(conn, func(err error) {
		l.logger.Warn("dropping RPC connection", "remote", remote, "error", err)
	})
	l.rpc.ServeCodec(codec)
}
