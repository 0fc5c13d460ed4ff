package server

import (
	"bytes"
	"errors"
	"io"
	"net"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hashicorp/go-msgpack/v2/codec"
	"github.com/hashicorp/serf/serf"
	"github.com/weft-sched/weft/internal/gossip"
	wrpc "github.com/weft-sched/weft/rpc"
)

// pushPullHeader is a memberlist push/pull stream's first message as an
// attacker writes it: the type byte 6, then the header in msgpack.
func pushPullHeader(t *testing.T, nodes int) []byte {
	t.Helper()
	buf := bytes.NewBuffer([]byte{6})
	var h codec.MsgpackHandle
	header := struct {
		Nodes        int
		UserStateLen int
		Join         bool
	}{Nodes: nodes}
	if err := codec.NewEncoder(buf, &h).Encode(header); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

func totalAlloc() uint64 {
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return m.TotalAlloc
}

// TestCraftedPushPullHeadersNeitherCrashNorSwell sends the attack
// (SPEC §15): push/pull headers that declare far more members than they
// carry, over real TCP to a running server's serf port. memberlist v0.5
// allocated for 2^30 members at once (the process died); v0.6 still
// allocates for up to 2^20 (112 MiB a header) before reading any. The
// server must refuse them, allocate nothing for what headers it accepts
// declare until it has arrived, and keep serving.
func TestCraftedPushPullHeadersNeitherCrashNorSwell(t *testing.T) {
	c := newTestCluster(t)
	s1 := c.start("s1", 1)
	c.start("s2", 0, s1.SerfAddr())
	c.waitForLeader()
	c.waitForVoters("s1", "s2")

	// The attacker comes from another address than the servers, as it
	// would off loopback.
	attacker := net.Dialer{LocalAddr: &net.TCPAddr{IP: net.IPv4(127, 0, 0, 2)}}
	dial := func() net.Conn {
		conn, err := attacker.Dial("tcp", s1.SerfAddr())
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { conn.Close() })
		return conn
	}
	runtime.GC()
	before := totalAlloc()

	// The 33-byte message.
	bomb := pushPullHeader(t, 1<<30)
	if len(bomb) != 33 {
		t.Fatalf("crafted header is %d bytes, want the issue's 33", len(bomb))
	}
	conn := dial()
	conn.Write(bomb)
	assertClosedByServer(t, conn)

	// Headers memberlist v0.6 alone would accept, many at once.
	var wg sync.WaitGroup
	var leftOpen atomic.Int32
	header := pushPullHeader(t, 1<<20-1)
	for i := 0; i < 32; i++ {
		conn := dial()
		wg.Add(1)
		go func() {
			defer wg.Done()
			conn.Write(header)
			if !closedByServer(conn, 5*time.Second) {
				leftOpen.Add(1)
			}
		}()
	}
	wg.Wait()
	if n := leftOpen.Load(); n > 0 {
		t.Fatalf("%d of 32 connections declaring 2^20-1 members were left open", n)
	}

	// Headers the guard accepts, sent at once and then left hanging:
	// memberlist never sees a message before all of it has arrived, so
	// nothing is allocated for what they declare (memberlist alone would
	// allocate 3.5 MiB for each). One address may hold 128 streams open;
	// the next is closed at once (which also says the server has taken
	// all 128).
	header = pushPullHeader(t, gossip.MaxPushPullNodes)
	for i := 0; i < 128; i++ {
		dial().Write(header)
	}
	if conn := dial(); !closedByServer(conn, 5*time.Second) {
		t.Fatal("a 129th stream from one address was left open")
	}

	if grew := totalAlloc() - before; grew > 32<<20 {
		t.Fatalf("the server allocated %d MiB under the attack", grew>>20)
	}
	if err := c.call(s1, "Status.Ping", &wrpc.RequestHeader{}, &struct{}{}); err != nil {
		t.Fatalf("server unusable after the attack: %v", err)
	}
	// Its gossip still works, the attack still hanging: a new server joins
	// through it.
	c.start("s3", 0, s1.SerfAddr())
	c.waitForVoters("s1", "s2", "s3")
	for _, m := range c.servers["s2"].serf.Members() {
		if m.Name == "s1" && m.Status != serf.StatusAlive {
			t.Fatalf("s2 sees s1 %s after the attack", m.Status)
		}
	}
}

// closedByServer reports whether the server closed conn (EOF or reset)
// within wait; false if it was still open, or closed by the test.
func closedByServer(conn net.Conn, wait time.Duration) bool {
	conn.SetReadDeadline(time.Now().Add(wait))
	_, err := io.ReadAll(conn)
	var ne net.Error
	return !(errors.As(err, &ne) && ne.Timeout()) && !errors.Is(err, net.ErrClosed)
}

// gossipMsg is a memberlist message: its type byte, then v in msgpack.
func gossipMsg(t *testing.T, prefix []byte, v any) []byte {
	t.Helper()
	buf := bytes.NewBuffer(append([]byte(nil), prefix...))
	var h codec.MsgpackHandle
	if err := codec.NewEncoder(buf, &h).Encode(v); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// serfQuery is serf's query message, as an attacker writes it.
type serfQuery struct {
	LTime       uint64
	ID          uint32
	Addr        []byte
	Port        uint16
	SourceNode  string
	Filters     [][]byte
	Flags       uint32
	RelayFactor uint8
	Timeout     time.Duration
	Name        string
	Payload     []byte
}

// TestMalformedGossipCannotCrashAServer sends a plaintext server the
// messages that made memberlist v0.6 or serf v0.10 index past the end of a
// slice, each of which took the process down (a query would take down
// every member it was relayed to): they are refused before anything
// decodes them, and the server keeps serving.
func TestMalformedGossipCannotCrashAServer(t *testing.T) {
	c := newTestCluster(t)
	s1 := c.start("s1", 1)
	s2 := c.start("s2", 0, s1.SerfAddr())
	c.waitForLeader()
	c.waitForVoters("s1", "s2")

	udp, err := net.ListenUDP("udp", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
	if err != nil {
		t.Fatal(err)
	}
	defer udp.Close()
	target, err := net.ResolveUDPAddr("udp", s1.SerfAddr())
	if err != nil {
		t.Fatal(err)
	}
	me := udp.LocalAddr().(*net.UDPAddr)
	send := func(b []byte) {
		if _, err := udp.WriteToUDP(b, target); err != nil {
			t.Fatal(err)
		}
	}
	query := []byte{8, 4} // a memberlist user message holding a serf query
	// A query with an empty filter: serf reads the filter's first byte.
	send(gossipMsg(t, query, serfQuery{LTime: 1 << 20, ID: 1, Filters: [][]byte{{}}, Name: "q", Timeout: 5 * time.Second}))
	// A key query without a payload: serf reads past its type byte.
	send(gossipMsg(t, query, serfQuery{LTime: 1<<20 + 1, ID: 2, Name: "_serf_install-key", Timeout: 5 * time.Second}))
	// An alive message for s2, newer than s2's, with three protocol
	// versions where memberlist reads six.
	s2Port := uint16(s2.serf.Memberlist().LocalNode().Port)
	send(gossipMsg(t, []byte{4}, struct {
		Incarnation uint32
		Node        string
		Addr        []byte
		Port        uint16
		Meta        []byte
		Vsn         []uint8
	}{Incarnation: 1 << 30, Node: "s2", Addr: []byte{127, 0, 0, 1}, Port: s2Port, Vsn: []uint8{1, 5, 2}}))
	// Then a good query, which serf answers after it has handled every
	// packet and query above: which s1 has, if it answers.
	send(gossipMsg(t, query, serfQuery{LTime: 1<<20 + 2, ID: 3, Addr: me.IP.To4(), Port: uint16(me.Port), SourceNode: "probe",
		Name: "_serf_conflict", Payload: []byte("s2"), Timeout: 5 * time.Second}))
	udp.SetReadDeadline(time.Now().Add(10 * time.Second))
	if _, _, err := udp.ReadFromUDP(make([]byte, 64<<10)); err != nil {
		t.Fatalf("no answer to the query sent after the malformed packets: %v", err)
	}

	// A push/pull carrying a member with three protocol versions where
	// memberlist reads six.
	conn, err := net.Dial("tcp", s1.SerfAddr())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	pp := gossipMsg(t, []byte{6}, struct {
		Nodes        int
		UserStateLen int
		Join         bool
	}{Nodes: 1, Join: true})
	conn.Write(gossipMsg(t, pp, struct {
		Name  string
		Addr  []byte
		Port  uint16
		State int
		Vsn   []uint8
	}{Name: "evil", Addr: []byte{127, 0, 0, 9}, Port: 9, Vsn: []uint8{1, 5, 2}}))
	if !closedByServer(conn, 5*time.Second) {
		t.Fatal("the push/pull was left open")
	}

	if err := c.call(s1, "Status.Ping", &wrpc.RequestHeader{}, &struct{}{}); err != nil {
		t.Fatalf("server unusable after the malformed gossip: %v", err)
	}
	if !c.logs.Contains("refused gossip") {
		t.Fatal("no refusal was logged")
	}
	for _, m := range s1.serf.Members() {
		if m.Name == "evil" || m.Name == "s2" && m.Status != serf.StatusAlive {
			t.Fatalf("s1's members after the malformed gossip: %+v", m)
		}
	}
}
