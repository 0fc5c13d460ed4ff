package raftnode

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

// layer is Raft's StreamLayer on the shared RPC port: the listener hands
// it connections whose first byte was ConnRaft (inside TLS from a
// certificate of the quorum's role, with TLS on), and Dial writes that byte
// (inside TLS to a peer that proves it has that role, with TLS on).
type layer struct {
	addr      net.Addr
	tls       *tlsutil.Configurator // nil: plaintext
	role      wrpc.Role             // the peers' certificate role
	connCh    chan net.Conn
	handshake time.Duration // the listener's handshake timeout

	closeOnce sync.Once
	closed    chan struct{}
}

var _ raft.StreamLayer = (*layer)(nil)

func newLayer(addr net.Addr, tc *tlsutil.Configurator, role wrpc.Role, handshake time.Duration) *layer {
	return &layer{addr: addr, tls: tc, role: role, handshake: handshake, connCh: make(chan net.Conn), closed: make(chan struct{})}
}

// handoff gives an accepted Raft connection to the transport, bounding
// the messages read from it (raft_frames.go).
func (l *layer) handoff(c net.Conn) {
	c = NewFrameConn(c, MaxMessage, l.handshake)
	select {
	case l.connCh <- c:
	case <-l.closed:
		c.Close()
	}
}

func (l *layer) Accept() (net.Conn, error) {
	select {
	case c := <-l.connCh:
		return c, nil
	case <-l.closed:
		return nil, errors.New("raft layer closed")
	}
}

func (l *layer) Close() error {
	l.closeOnce.Do(func() { close(l.closed) })
	return nil
}

func (l *layer) Addr() net.Addr { return l.addr }

func (l *layer) Dial(address raft.ServerAddress, timeout time.Duration) (net.Conn, error) {
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	var d net.Dialer
	conn, err := d.DialContext(ctx, "tcp", string(address))
	if err != nil {
		return nil, err
	}
	return wrpc.ClientHandshake(ctx, conn, l.tls, l.role, wrpc.ConnRaft)
}
