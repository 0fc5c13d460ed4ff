package agent

import (
	"encoding/binary"
	"net"
	"os"
	"strings"
	"testing"
)

// The kernel's socket table names the uid at the other end of a local
// connection: this test's own, for a connection it made; nobody's for an
// address no socket of this host has.
func TestPeerUIDOfALocalConnection(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	accepted := make(chan net.Conn, 1)
	go func() {
		c, err := ln.Accept()
		if err == nil {
			accepted <- c
		}
	}()
	client, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer client.Close()
	server := <-accepted
	defer server.Close()
	uid, ok := peerUID(server.RemoteAddr(), server.LocalAddr())
	if !ok || uid != uint32(os.Getuid()) {
		t.Fatalf("peer uid %d (%v), want %d", uid, ok, os.Getuid())
	}
	if _, ok := peerUID(&net.TCPAddr{IP: net.IPv4(10, 255, 255, 1), Port: 1}, server.LocalAddr()); ok {
		t.Fatal("a uid for an address no socket of this host has")
	}
}

func TestFindSocketUIDReadsTheKernelsFormat(t *testing.T) {
	agentAddr := &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1), Port: 8049}
	caller := &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1), Port: 40000}
	// The kernel prints the address's 32-bit words in host byte order.
	want := "7F000001:9C40"
	if binary.NativeEndian.Uint16([]byte{1, 0}) == 1 {
		want = "0100007F:9C40"
	}
	if got := procAddr(caller); got != want {
		t.Fatalf("procAddr = %s, want %s", got, want)
	}
	v6 := &net.TCPAddr{IP: net.ParseIP("::1"), Port: 8049}
	if got := procAddr(v6); len(got) != 32+5 || !strings.HasSuffix(got, ":1F71") {
		t.Fatalf("procAddr(::1) = %s", got)
	}
	// Two sockets of one connection, as /proc/net/tcp shows them: the
	// agent's (uid 0) and the caller's (uid 70011).
	table := "  sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode\n" +
		"   0: " + procAddr(agentAddr) + " " + procAddr(caller) + " 01 00000000:00000000 00:00000000 00000000     0        0 1 1\n" +
		"   1: " + procAddr(caller) + " " + procAddr(agentAddr) + " 01 00000000:00000000 00:00000000 00000000 70011        0 2 1\n"
	uid, ok := findSocketUID(strings.NewReader(table), caller, agentAddr)
	if !ok || uid != 70011 {
		t.Fatalf("caller's uid %d (%v), want 70011", uid, ok)
	}
	if _, ok := findSocketUID(strings.NewReader(table), &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1), Port: 40001}, agentAddr); ok {
		t.Fatal("found a socket that is not in the table")
	}
}
