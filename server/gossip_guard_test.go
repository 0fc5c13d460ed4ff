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
	"github.com/weft-sched/weft/internal/testutil"
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
// allocates for up to 2^20 (112 MiB a header). The server must refuse
// them before anything is allocated, keep the memory that headers it does
// accept may hold within a fixed budget, and keep serving.
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

	// Headers the guard accepts one by one, sent at once and then left
	// hanging: only what one address's share of the budget allows is held
	// (memberlist waits for the data they announce), the rest is refused.
	const flood = 64
	perHeader := int64(gossip.MaxPushPullNodes) * 128
	var refused atomic.Int32
	header = pushPullHeader(t, gossip.MaxPushPullNodes)
	for i := 0; i < flood; i++ {
		conn := dial()
		conn.Write(header)
		go func() {
			if closedByServer(conn, 30*time.Second) {
				refused.Add(1)
			}
		}()
	}
	mostHeld := int32(16 << 20 / perHeader)
	testutil.WaitFor(t, 10*time.Second, func() bool { return refused.Load() >= flood-mostHeld })

	if grew := totalAlloc() - before; grew > 128<<20 {
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
