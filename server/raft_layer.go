package server

import (
	"context"
	"errors"
	"net"
	"sync"
	"time"

	"github.com/hashicorp/raft"
	"github.com/weft-sched/weft/internal/tlsutil"
	wrpc "github.com/weft-sched/weft/rpc"
)

// raftLayer is Raft's StreamLayer on the shared RPC port: the listener hands
// it connections whose first byte was ConnRaft (inside TLS from a server
// certificate, with TLS on), and Dial writes that byte (inside TLS to a
// peer that proves it is a server, with TLS on).
type raftLayer struct {
	addr      net.Addr
	tls       *tlsutil.Configurator // nil: plaintext
	connCh    chan net.Conn
	handshake time.Duration // the listener's handshake timeout

	closeOnce sync.Once
	closed    chan struct{}
}

var _ raft.StreamLayer = (*raftLayer)(nil)

func newRaftLayer(addr net.Addr, tc *tlsutil.Configurator, handshake time.Duration) *raftLayer {
	return &raftLayer{addr: addr, tls: tc, handshake: handshake, connCh: make(chan net.Conn), closed: make(chan struct{})}
}

// handoff gives an accepted Raft connection to the transport, bounding
// the messages read from it (raft_frames.go).
func (l *raftLayer) handoff(c net.Conn) {
	c = newRaftFrameConn(c, raftMaxMessage, l.handshake)
	select {
	case l.connCh <- c:
	case <-l.closed:
		c.Close()
	}
}

func (l *raftLayer) Accept() (net.Conn, error) {
	select {
	case c := <-l.connCh:
		return c, nil
	case <-l.closed:
		return nil, errors.New("raft layer closed")
	}
}

func (l *raftLayer) Close() error {
	l.closeOnce.Do(func() { close(l.closed) })
	return nil
}

func (l *raftLayer) Addr() net.Addr { return l.addr }

func (l *raftLayer) Dial(address raft.ServerAddress, timeout time.Duration) (net.Conn, error) {
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	var d net.Dialer
	conn, err := d.DialContext(ctx, "tcp", string(address))
	if err != nil {
		return nil, err
	}
	return wrpc.ClientHandshake(ctx, conn, l.tls, wrpc.RoleServer, wrpc.ConnRaft)
}
