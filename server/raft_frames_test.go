package server

import (
	"errors"
	"net"
	"testing"
	"time"

	"github.com/weft-sched/weft/internal/raftnode"
	wrpc "github.com/weft-sched/weft/rpc"
)

func TestOversizedRaftMessageIsCutOff(t *testing.T) {
	c := newTestCluster(t)
	s := c.start("s1", 1)
	c.waitForLeader()
	conn, err := net.Dial("tcp", s.RPCAddr())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	// A first message (an AppendEntries of an old term, refused) ends the
	// handshake deadline; then AppendEntries{Term: 1, Entries: [100 ×
	// {Data: <1 MiB>}]}: no length
	// it declares is out of bounds, only the whole. Written until the
	// server closes the connection.
	prefix := []byte{byte(wrpc.ConnRaft), 0, 0x81, 0xa4, 'T', 'e', 'r', 'm', 0x00, 0, 0x82, 0xa4, 'T', 'e', 'r', 'm', 0x01, 0xa7, 'E', 'n', 't', 'r', 'i', 'e', 's', 0xdc, 0x00, 100}
	if _, err := conn.Write(prefix); err != nil {
		t.Fatal(err)
	}
	entry := append([]byte{0x81, 0xa4, 'D', 'a', 't', 'a', 0xc6, 0x00, 0x10, 0x00, 0x00}, make([]byte, 1<<20)...)
	sent := 0
	conn.SetWriteDeadline(time.Now().Add(60 * time.Second))
	for i := 0; i < 100; i++ {
		n, err := conn.Write(entry)
		sent += n
		if err != nil {
			break
		}
	}
	if sent >= 100<<20 {
		t.Fatalf("the server read a %d MiB Raft message", sent>>20)
	}
	t.Logf("connection closed after %d MiB (bound %d MiB)", sent>>20, raftnode.MaxMessage>>20)
	var ping struct{}
	if err := c.call(s, "Status.Ping", &wrpc.RequestHeader{}, &ping); err != nil || !s.IsLeader() {
		t.Fatalf("server after the attack: %v, leader %v", err, s.IsLeader())
	}
}

func TestCommandsPastTheRaftBoundAreRefused(t *testing.T) {
	c := newTestCluster(t)
	s := c.start("s1", 1)
	c.waitForLeader()
	_, _, err := s.apply(t.Context(), make([]byte, raftMaxCommand+1))
	if !errors.Is(err, wrpc.ErrTooLarge) {
		t.Fatalf("apply of a command past the bound: %v", err)
	}
}
