package gossip

import (
	"bufio"
	"bytes"
	"encoding/base64"
	"encoding/binary"
	"errors"
	"io"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/serf/serf"
	"github.com/weft-sched/weft/internal/testutil"
)

// member starts a serf member on a free loopback port.
func member(t *testing.T, id, encrypt, dataDir string) (*serf.Serf, *testutil.LogSink) {
	t.Helper()
	logger, logs := testutil.Logger(t, hclog.Debug)
	s, _, err := Create(Config{NodeID: id, BindAddr: "127.0.0.1", DataDir: dataDir, Fast: true, Encrypt: encrypt, Logger: logger.Named(id)})
	if err != nil {
		t.Fatalf("start %s: %v", id, err)
	}
	t.Cleanup(func() { s.Shutdown() })
	return s, logs
}

func newKey(t *testing.T) string {
	t.Helper()
	k, err := GenerateKey()
	if err != nil {
		t.Fatal(err)
	}
	return k
}

func aliveNames(s *serf.Serf) map[string]bool {
	out := map[string]bool{}
	for _, m := range s.Members() {
		if m.Status == serf.StatusAlive {
			out[m.Name] = true
		}
	}
	return out
}

func TestGenerateKey(t *testing.T) {
	a, b := newKey(t), newKey(t)
	raw, err := base64.StdEncoding.DecodeString(a)
	if err != nil || len(raw) != KeySize {
		t.Fatalf("key %q decodes to %d bytes (%v), want %d", a, len(raw), err, KeySize)
	}
	if a == b {
		t.Fatal("two generated keys are equal")
	}
	if _, err := ParseKey(a); err != nil {
		t.Fatalf("ParseKey of a generated key: %v", err)
	}
}

func TestParseKeyRefusesWithoutEchoingTheKey(t *testing.T) {
	short := base64.StdEncoding.EncodeToString([]byte("sixteen byte key"))
	for _, k := range []string{"", "not base64!", short} {
		_, err := ParseKey(k)
		if err == nil {
			t.Fatalf("ParseKey(%q) passed", k)
		}
		if k != "" && strings.Contains(err.Error(), k) {
			t.Fatalf("error repeats the key: %v", err)
		}
	}
	if _, _, err := Create(Config{NodeID: "x", BindAddr: "127.0.0.1", Encrypt: short, Logger: hclog.NewNullLogger()}); err == nil || !strings.Contains(err.Error(), "encrypt") {
		t.Fatalf("Create with a 16-byte key: %v, want an error naming encrypt", err)
	}
}

func TestJoinNeedsTheKey(t *testing.T) {
	key := newKey(t)
	a, aLogs := member(t, "a", key, t.TempDir())
	b, _ := member(t, "b", key, t.TempDir())
	if _, err := b.Join([]string{Addr(a)}, true); err != nil {
		t.Fatalf("a member with the key cannot join: %v", err)
	}
	testutil.WaitFor(t, 5*time.Second, func() bool { return aliveNames(a)["b"] })

	none, _ := member(t, "no-key", "", t.TempDir())
	if _, err := none.Join([]string{Addr(a)}, true); err == nil {
		t.Fatal("a member without the key joined")
	}
	testutil.WaitFor(t, 5*time.Second, func() bool { return aLogs.Contains("unencrypted gossip stream refused") })
	wrong, _ := member(t, "wrong-key", newKey(t), t.TempDir())
	if _, err := wrong.Join([]string{Addr(a)}, true); err == nil {
		t.Fatal("a member with another key joined")
	}
	for _, s := range []*serf.Serf{a, b} {
		if got := aliveNames(s); len(got) != 2 || got["no-key"] || got["wrong-key"] {
			t.Fatalf("members seen by %s: %v, want only a and b", s.LocalMember().Name, got)
		}
	}
	// The keyless member's plaintext packets are dropped too: it never
	// learns of a or b.
	if got := aliveNames(none); len(got) != 1 {
		t.Fatalf("the keyless member sees %v", got)
	}
}

func TestKeyringFileIsWrittenAndWinsOverEncrypt(t *testing.T) {
	dir := t.TempDir()
	first := newKey(t)
	s, _ := member(t, "a", first, dir)
	path := KeyringFile(dir)
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatalf("no keyring file after starting with a key: %v", err)
	}
	if fi.Mode().Perm() != 0o600 {
		t.Fatalf("keyring file mode %v, want 0600", fi.Mode().Perm())
	}
	s.Shutdown()

	other := newKey(t)
	s, logs := member(t, "a", other, dir)
	resp, err := s.KeyManager().ListKeys()
	if err != nil {
		t.Fatal(err)
	}
	if resp.PrimaryKeys[first] != 1 || resp.Keys[other] != 0 {
		t.Fatalf("keys after a restart with another -encrypt: primary %v, installed %v; want the file's key only", resp.PrimaryKeys, resp.Keys)
	}
	if !logs.Contains("wins over -encrypt") {
		t.Fatal("ignoring -encrypt was not logged")
	}
}

func TestKeyringFileMustHoldKeys(t *testing.T) {
	dir := t.TempDir()
	if err := os.MkdirAll(filepath.Join(dir, "serf"), 0o755); err != nil {
		t.Fatal(err)
	}
	for content, want := range map[string]string{"[]": "holds no key", "{": "JSON array", `["c2hvcnQ="]`: "key 1"} {
		if err := os.WriteFile(KeyringFile(dir), []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
		_, _, err := Create(Config{NodeID: "a", BindAddr: "127.0.0.1", DataDir: dir, Logger: hclog.NewNullLogger()})
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Fatalf("keyring file %s: %v, want an error saying %q", content, err, want)
		}
	}
}

// TestReplyIsInspected has a member join a peer that answers its push/pull
// with a header declaring a million members (what memberlist alone would
// allocate for): the reply is refused and the member lives on.
func TestReplyIsInspected(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	var sawCost, sawBytes atomic.Int64
	go func() {
		conn, err := ln.Accept()
		if err != nil {
			return
		}
		defer conn.Close()
		// What a real member sends when it joins: a push/pull carrying
		// itself and serf's state. The guard reads the same.
		var seen bytes.Buffer
		cost, err := inspectStream(io.TeeReader(bufio.NewReader(conn), &seen), false)
		if err == nil {
			sawCost.Store(cost)
			sawBytes.Store(int64(seen.Len()))
		}
		conn.Write(msg(t, mlPushPullMsg, pushPullHeader{Nodes: 1<<20 - 1}))
	}()
	s, logs := member(t, "a", "", t.TempDir())
	if _, err := s.Join([]string{ln.Addr().String()}, true); err == nil {
		t.Fatal("join through a peer that answered with a million-member header succeeded")
	}
	// A real push/pull passes the guard whole: one member (the joiner) and
	// serf's state, a few hundred bytes.
	if c, n := sawCost.Load(), sawBytes.Load(); c != nodeSlotCost || n < 100 {
		t.Fatalf("a joining member's push/pull inspected as %d bytes costing %d; want one member and serf's state", n, c)
	}
	testutil.WaitFor(t, 5*time.Second, func() bool { return logs.Contains("refused gossip reply") })
	if got := aliveNames(s); len(got) != 1 || !got["a"] {
		t.Fatalf("members after the refused join: %v", got)
	}
}

func TestShutdownClosesStreamsBeingInspected(t *testing.T) {
	s, _ := member(t, "a", "", t.TempDir())
	conn, err := net.Dial("tcp", Addr(s))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	conn.Write([]byte{mlPushPullMsg}) // and then nothing: the guard waits for the header
	done := make(chan struct{})
	go func() {
		s.Shutdown()
		close(done)
	}()
	testutil.WaitFor(t, inspectTimeout/2, func() bool {
		select {
		case <-done:
			return true
		default:
			return false
		}
	})
}

func TestBudget(t *testing.T) {
	b := &budget{limit: 100, perIP: 40, held: map[string]int64{}}
	steps := []struct {
		take bool
		ip   string
		n    int64
		ok   bool
	}{
		{true, "a", 40, true},
		{true, "a", 1, false}, // a's share is spent
		{true, "a", 0, true},  // costless streams always pass
		{true, "b", 40, true},
		{true, "c", 30, false}, // the total would pass 100
		{true, "c", 20, true},
		{false, "a", 40, true},
		{true, "c", 20, true},
		{true, "c", 1, false},
		{true, "a", 20, true},
	}
	for i, s := range steps {
		if !s.take {
			b.give(s.ip, s.n)
			continue
		}
		if got := b.take(s.ip, s.n); got != s.ok {
			t.Fatalf("step %d: take(%s, %d) = %v, want %v (held %v)", i, s.ip, s.n, got, s.ok, b.held)
		}
	}
	if b.total != 100 || len(b.held) != 3 {
		t.Fatalf("total %d, held %v", b.total, b.held)
	}
}

// TestBudgetHoldsWhatArrived: with a key, memberlist buffers a stream's
// whole ciphertext before it can authenticate it, so the guard reads it
// first. A stream that declares the largest ciphertext and sends none holds
// nothing; streams that send part of it hold what they sent, up to one
// address's share of the budget, past which they are refused; another
// address is served meanwhile, and closing them gives everything back.
func TestBudgetHoldsWhatArrived(t *testing.T) {
	logger, logs := testutil.Logger(t, hclog.Info)
	g, err := newGuard("127.0.0.1", 0, testKeyring(t), logger)
	if err != nil {
		t.Fatal(err)
	}
	defer g.Shutdown()
	addr := net.JoinHostPort("127.0.0.1", strconv.Itoa(g.GetAutoBindPort()))
	var conns []net.Conn
	from := func(ip net.IP) net.Conn {
		d := net.Dialer{LocalAddr: &net.TCPAddr{IP: ip}}
		conn, err := d.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { conn.Close() })
		conns = append(conns, conn)
		return conn
	}
	held := func(ip string) int64 {
		g.budget.mu.Lock()
		defer g.budget.mu.Unlock()
		return g.budget.held[ip]
	}
	head := binary.BigEndian.AppendUint32([]byte{mlEncryptMsg}, MaxEncryptedStream)
	attacker := net.IPv4(127, 0, 0, 2)

	for i := 0; i < 8; i++ {
		from(attacker).Write(head)
	}
	// They hold at most the bytes they sent, not what they declared.
	testutil.WaitFor(t, 5*time.Second, func() bool {
		g.mu.Lock()
		defer g.mu.Unlock()
		return g.open[attacker.String()] == 8
	})
	if h := held(attacker.String()); h > int64(8*len(head)) {
		t.Fatalf("streams that sent %d bytes in all hold %d", 8*len(head), h)
	}

	const part = 1 << 20
	const flood = pushPullBudgetPerIP/part + 8
	var refused atomic.Int32
	for i := 0; i < flood; i++ {
		conn := from(attacker)
		go func() {
			conn.Write(append(head, make([]byte, part)...))
			conn.SetReadDeadline(time.Now().Add(inspectTimeout))
			_, err := io.ReadAll(conn)
			var ne net.Error
			if !(errors.As(err, &ne) && ne.Timeout()) {
				refused.Add(1)
			}
		}()
	}
	testutil.WaitFor(t, 10*time.Second, func() bool { return refused.Load() >= flood-pushPullBudgetPerIP/part })
	if h := held(attacker.String()); h > pushPullBudgetPerIP {
		t.Fatalf("one address holds %d bytes, past its share", h)
	}
	if !logs.Contains("more gossip in flight than the budget holds") {
		t.Fatal("the refusals were not logged")
	}

	// Another address's whole message passes meanwhile.
	from(net.IPv4(127, 0, 0, 1)).Write(append(binary.BigEndian.AppendUint32([]byte{mlEncryptMsg}, 16), make([]byte, 16)...))
	select {
	case conn := <-g.StreamCh():
		conn.Close()
	case <-time.After(5 * time.Second):
		t.Fatal("a stream from another address was not served")
	}
	for _, c := range conns {
		c.Close()
	}
	testutil.WaitFor(t, 5*time.Second, func() bool {
		g.budget.mu.Lock()
		defer g.budget.mu.Unlock()
		return g.budget.total == 0
	})
}

// TestStreamsPerAddressAreCapped: idle connections from one address are
// refused past maxStreamsPerAddress, and another address is served
// meanwhile; once they close, the address may open streams again.
func TestStreamsPerAddressAreCapped(t *testing.T) {
	logger, logs := testutil.Logger(t, hclog.Info)
	g, err := newGuard("127.0.0.1", 0, nil, logger)
	if err != nil {
		t.Fatal(err)
	}
	defer g.Shutdown()
	addr := net.JoinHostPort("127.0.0.1", strconv.Itoa(g.GetAutoBindPort()))
	from := func(ip net.IP) net.Conn {
		d := net.Dialer{LocalAddr: &net.TCPAddr{IP: ip}}
		conn, err := d.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { conn.Close() })
		return conn
	}
	attacker := net.IPv4(127, 0, 0, 2)
	var idle []net.Conn
	for i := 0; i < maxStreamsPerAddress; i++ {
		idle = append(idle, from(attacker))
	}
	testutil.WaitFor(t, 5*time.Second, func() bool {
		g.mu.Lock()
		defer g.mu.Unlock()
		return g.open[attacker.String()] == maxStreamsPerAddress
	})
	extra := from(attacker)
	extra.SetReadDeadline(time.Now().Add(inspectTimeout / 2))
	if _, err := io.ReadAll(extra); err != nil {
		t.Fatalf("a stream past the cap was not closed at once: %v", err)
	}
	if !logs.Contains("already holds 128 gossip streams open") {
		t.Fatal("the refusal was not logged")
	}

	ping := msg(t, 0, struct{ SeqNo uint32 }{1})
	from(net.IPv4(127, 0, 0, 1)).Write(ping)
	select {
	case conn := <-g.StreamCh():
		conn.Close()
	case <-time.After(5 * time.Second):
		t.Fatal("a stream from another address was not served")
	}

	for _, c := range idle {
		c.Close()
	}
	testutil.WaitFor(t, 5*time.Second, func() bool {
		g.mu.Lock()
		defer g.mu.Unlock()
		return len(g.open) == 0
	})
	from(attacker).Write(ping)
	select {
	case conn := <-g.StreamCh():
		conn.Close()
	case <-time.After(5 * time.Second):
		t.Fatal("the address was not served again after its streams closed")
	}
}
