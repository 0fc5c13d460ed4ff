package server

import (
	"errors"
	"io"
	"net"
	"time"

	"github.com/hashicorp/yamux"
	wrpc "github.com/weft-sched/weft/rpc"
)

// acceptLoop accepts connections on the RPC port and dispatches each by
// its first byte.
func (s *Server) acceptLoop() {
	defer s.wg.Done()
	for {
		conn, err := s.listener.Accept()
		if err != nil {
			if s.isShutdown() {
				return
			}
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() {
				continue
			}
			s.logger.Error("accept failed", "error", err)
			time.Sleep(10 * time.Millisecond) // back off a hot error loop (e.g. out of file descriptors)
			continue
		}
		go s.handleConn(conn)
	}
}

func (s *Server) track(c net.Conn) bool {
	s.connsMu.Lock()
	defer s.connsMu.Unlock()
	if s.shutdown {
		return false
	}
	s.conns[c] = struct{}{}
	return true
}

func (s *Server) untrack(c net.Conn) {
	s.connsMu.Lock()
	delete(s.conns, c)
	s.connsMu.Unlock()
}

// handleConn reads the connection type byte (within HandshakeTimeout) and
// hands the connection to RPC, Raft or yamux. An unknown byte closes it.
func (s *Server) handleConn(conn net.Conn) {
	conn.SetReadDeadline(time.Now().Add(wrpc.HandshakeTimeout))
	var b [1]byte
	if _, err := io.ReadFull(conn, b[:]); err != nil {
		s.logger.Debug("connection closed before its type byte", "remote", conn.RemoteAddr(), "error", err)
		conn.Close()
		return
	}
	conn.SetReadDeadline(time.Time{})
	switch wrpc.ConnType(b[0]) {
	case wrpc.ConnRaft:
		s.raftLayer.handoff(conn)
	case wrpc.ConnRPC, wrpc.ConnMultiplex:
		if !s.track(conn) {
			conn.Close()
			return
		}
		defer s.untrack(conn)
		if wrpc.ConnType(b[0]) == wrpc.ConnRPC {
			s.serveRPC(conn)
		} else {
			s.serveMultiplex(conn)
		}
	default:
		s.logger.Warn("closing connection with unknown type byte", "remote", conn.RemoteAddr(), "byte", b[0])
		conn.Close()
	}
}

func (s *Server) serveMultiplex(conn net.Conn) {
	session, err := yamux.Server(conn, wrpc.YamuxConfig())
	if err != nil {
		s.logger.Warn("cannot start yamux session", "remote", conn.RemoteAddr(), "error", err)
		conn.Close()
		return
	}
	defer session.Close()
	for {
		stream, err := session.Accept()
		if err != nil {
			if !session.IsClosed() && !s.isShutdown() {
				s.logger.Debug("multiplexed session ended", "remote", conn.RemoteAddr(), "error", err)
			}
			return
		}
		go s.serveRPC(stream)
	}
}

// serveRPC serves msgpack RPC on one connection or stream until it closes.
func (s *Server) serveRPC(conn net.Conn) {
	remote := conn.RemoteAddr()
	codec := wrpc.NewServerCodec(conn, func(err error) {
		s.logger.Warn("dropping RPC connection", "remote", remote, "error", err)
	})
	s.rpcServer.ServeCodec(codec)
}
