package server

import (
	"errors"
	"net"
	"sync"
	"time"

	"github.com/hashicorp/raft"
	wrpc "github.com/weft-sched/weft/rpc"
)

// raftLayer is Raft's StreamLayer on the shared RPC port: the listener hands
// it connections whose first byte was ConnRaft, and Dial writes that byte.
type raftLayer struct {
	addr      net.Addr
	connCh    chan net.Conn
	handshake time.Duration // the listener's handshake timeout

	closeOnce sync.Once
	closed    chan struct{}
}

var _ raft.StreamLayer = (*raftLayer)(nil)

func newRaftLayer(addr net.Addr, handshake time.Duration) *raftLayer {
	return &raftLayer{addr: addr, handshake: handshake, connCh: make(chan net.Conn), closed: make(chan struct{})}
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
	conn, err := net.DialTimeout("tcp", string(address), timeout)
	if err != nil {
		return nil, err
	}
	if _, err := conn.Write([]byte{byte(wrpc.ConnRaft)}); err != nil {
		conn.Close()
		return nil, err
	}
	return conn, nil
}
