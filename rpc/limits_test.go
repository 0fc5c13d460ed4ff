package rpc

import (
	"context"
	"errors"
	"io"
	"net"
	"net/rpc"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/yamux"
	"github.com/weft-sched/weft/internal/testutil"
)

// holder is a handler that holds each call until released, counting the
// calls it holds.
type holder struct {
	mu      sync.Mutex
	held    int
	release chan struct{}
}

func (h *holder) Hold(ctx context.Context, args *EchoArgs, reply *EchoReply) error {
	h.mu.Lock()
	h.held++
	h.mu.Unlock()
	select {
	case <-h.release:
	case <-ctx.Done():
	}
	reply.Text = args.Text
	return nil
}

func (h *holder) holding() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.held
}

func startLimitedServer(t testing.TB, limits Limits) (*testServer, *holder) {
	t.Helper()
	h := &holder{release: make(chan struct{})}
	ts := startTestServerNamed(t, "a", func(s *Server) { Register(s, "Hold.Hold", CapPublic, h.Hold) }, WithLimits(limits))
	t.Cleanup(func() {
		select {
		case <-h.release:
		default:
			close(h.release)
		}
	})
	return ts, h
}

// dialFrom connects to addr from the loopback address local (127.0.0.x),
// so that one test can be several clients.
func dialFrom(t testing.TB, local, addr string) net.Conn {
	t.Helper()
	d := net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(local)}, Timeout: 5 * time.Second}
	c, err := d.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// dialMux opens a multiplexed session from local to addr.
func dialMux(t testing.TB, local, addr string) *yamux.Session {
	t.Helper()
	c := dialFrom(t, local, addr)
	if _, err := c.Write([]byte{byte(ConnMultiplex)}); err != nil {
		t.Fatal(err)
	}
	s, err := yamux.Client(c, YamuxConfig())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

// streamCall makes one call on a new stream of s.
func streamCall(s *yamux.Session, method string, args *EchoArgs) (*EchoReply, error) {
	st, err := s.Open()
	if err != nil {
		return nil, err
	}
	defer st.Close()
	st.SetDeadline(time.Now().Add(10 * time.Second))
	c := rpc.NewClientWithCodec(NewClientCodec(st))
	var reply EchoReply
	err = c.Call(method, args, &reply)
	return &reply, err
}

// closedByServer reports whether the server closed c (as opposed to c
// going quiet), waiting for at most 10 s.
func closedByServer(c net.Conn) bool {
	c.SetReadDeadline(time.Now().Add(10 * time.Second))
	_, err := io.Copy(io.Discard, c)
	var ne net.Error
	return !(errors.As(err, &ne) && ne.Timeout())
}

// openFrom counts the connections from ip, in their handshake or past it.
func (ts *testServer) openFrom(ip string) int { return ts.lis.openFrom(ip, true) }

// openFrom counts the connections from ip past their handshake, and with
// handshaking those still in it.
func (l *Listener) openFrom(ip string, handshaking bool) int {
	l.clients.mu.Lock()
	defer l.clients.mu.Unlock()
	n := 0
	if handshaking {
		n = l.clients.handshaking[ip]
	}
	for k, open := range l.clients.open {
		if k.ip == ip {
			n += open
		}
	}
	return n
}

func TestConnectionsPastTheClientLimitAreClosed(t *testing.T) {
	ts, _ := startLimitedServer(t, Limits{MaxConnsPerClient: 3, MaxHandshakesPerClient: 2, HandshakeTimeout: time.Minute})
	// Two connections that say nothing hold the address's handshakes: a
	// third is closed at once.
	for i := 0; i < 2; i++ {
		dialFrom(t, "127.0.0.2", ts.Addr())
	}
	testutil.WaitFor(t, 5*time.Second, func() bool { return ts.openFrom("127.0.0.2") == 2 })
	if !closedByServer(dialFrom(t, "127.0.0.2", ts.Addr())) {
		t.Fatal("a connection past the address's handshakes was not closed")
	}
	// Another address's handshakes are its own. Each connection is let
	// through its handshake before the next is dialled: a third arriving
	// while two are still in theirs is closed, as the first part shows.
	var conns []net.Conn
	for i := 0; i < 3; i++ {
		c := dialFrom(t, "127.0.0.4", ts.Addr())
		c.Write([]byte{byte(ConnRPC)})
		conns = append(conns, c)
		testutil.WaitFor(t, 5*time.Second, func() bool { return ts.lis.openFrom("127.0.0.4", false) == i+1 })
	}
	over := dialFrom(t, "127.0.0.4", ts.Addr())
	over.Write([]byte{byte(ConnRPC)})
	if !closedByServer(over) {
		t.Fatal("a fourth connection from one client was not closed")
	}
	// Another client is not affected.
	other := dialFrom(t, "127.0.0.3", ts.Addr())
	other.Write([]byte{byte(ConnRPC)})
	c := rpc.NewClientWithCodec(NewClientCodec(other))
	var reply EchoReply
	if err := c.Call("Echo.Echo", &EchoArgs{Text: "hi"}, &reply); err != nil || reply.Text != "hi" {
		t.Fatalf("another client's call: %v", err)
	}
	// A closed connection gives its place back.
	conns[0].Close()
	testutil.WaitFor(t, 5*time.Second, func() bool { return ts.openFrom("127.0.0.4") == 2 })
	again := dialFrom(t, "127.0.0.4", ts.Addr())
	again.Write([]byte{byte(ConnRPC)})
	c = rpc.NewClientWithCodec(NewClientCodec(again))
	if err := c.Call("Echo.Echo", &EchoArgs{Text: "back"}, &reply); err != nil || reply.Text != "back" {
		t.Fatalf("call on a connection admitted after another closed: %v", err)
	}
}

// Connections that never deliver a whole request are closed after the
// handshake timeout, whatever stage they stop at, and give their place
// back.
func TestConnectionsThatStallBeforeAWholeRequestAreClosed(t *testing.T) {
	ts, _ := startLimitedServer(t, Limits{HandshakeTimeout: 200 * time.Millisecond})
	header := encodeValue(t, map[string]any{"ServiceMethod": "Echo.Echo", "Seq": 1})
	stalls := map[string][]byte{
		"nothing":                  nil,
		"a type byte":              {byte(ConnRPC)},
		"a header and no body":     append([]byte{byte(ConnRPC)}, header...),
		"half a header":            append([]byte{byte(ConnRPC)}, header[:5]...),
		"a multiplexed type byte":  {byte(ConnMultiplex)},
		"an unknown type byte... ": {0x7f},
	}
	for name, sent := range stalls {
		c := dialFrom(t, "127.0.0.2", ts.Addr())
		c.Write(sent)
		if !closedByServer(c) {
			t.Errorf("connection that sent %s was not closed", name)
		}
	}
	// A session that opens a stream and sends nothing on it.
	s := dialMux(t, "127.0.0.2", ts.Addr())
	if _, err := s.Open(); err != nil {
		t.Fatal(err)
	}
	testutil.WaitFor(t, 10*time.Second, s.IsClosed)
	testutil.WaitFor(t, 5*time.Second, func() bool { return ts.openFrom("127.0.0.2") == 0 })
}

// The handshake deadline ends with the first whole request: a connection
// then outlives it, and a stream of a busy session must deliver its own
// first request in time.
func TestHandshakeDeadlineEndsWithTheFirstRequest(t *testing.T) {
	ts, _ := startLimitedServer(t, Limits{HandshakeTimeout: 300 * time.Millisecond})
	c := dialFrom(t, "127.0.0.2", ts.Addr())
	c.Write([]byte{byte(ConnRPC)})
	client := rpc.NewClientWithCodec(NewClientCodec(c))
	var reply EchoReply
	// Echo.Wait answers when the request's own deadline (1 s, past the
	// handshake deadline) passes: the connection is still open then.
	if err := client.Call("Echo.Wait", &EchoArgs{RequestHeader: RequestHeader{Timeout: time.Second}}, &reply); err != nil ||
		reply.Text != context.DeadlineExceeded.Error() {
		t.Fatalf("call past the handshake deadline: %v %q", err, reply.Text)
	}
	if err := client.Call("Echo.Echo", &EchoArgs{Text: "again"}, &reply); err != nil || reply.Text != "again" {
		t.Fatalf("second call: %v", err)
	}

	s := dialMux(t, "127.0.0.2", ts.Addr())
	if _, err := streamCall(s, "Echo.Wait", &EchoArgs{RequestHeader: RequestHeader{Timeout: time.Second}}); err != nil {
		t.Fatalf("first stream: %v", err)
	}
	silent, err := s.Open()
	if err != nil {
		t.Fatal(err)
	}
	if !closedByServer(silent) {
		t.Fatal("a silent stream of a busy session was not closed")
	}
	if s.IsClosed() {
		t.Fatal("the session closed with its silent stream")
	}
	if r, err := streamCall(s, "Echo.Echo", &EchoArgs{Text: "ok"}); err != nil || r.Text != "ok" {
		t.Fatalf("call after a silent stream: %v", err)
	}
}

func TestIdleConnectionsAreClosedAndBusyOnesAreNot(t *testing.T) {
	ts, _ := startLimitedServer(t, Limits{IdleTimeout: 200 * time.Millisecond})
	// A plain connection and a session, each idle after one call.
	c := dialFrom(t, "127.0.0.2", ts.Addr())
	c.Write([]byte{byte(ConnRPC)})
	var reply EchoReply
	if err := rpc.NewClientWithCodec(NewClientCodec(c)).Call("Echo.Echo", &EchoArgs{}, &reply); err != nil {
		t.Fatal(err)
	}
	s := dialMux(t, "127.0.0.2", ts.Addr())
	if _, err := streamCall(s, "Echo.Echo", &EchoArgs{}); err != nil {
		t.Fatal(err)
	}
	if !closedByServer(c) {
		t.Fatal("idle connection not closed")
	}
	testutil.WaitFor(t, 10*time.Second, s.IsClosed)

	// A session with a call in flight is busy, however long the call:
	// Echo.Wait answers when its request's timeout, five idle timeouts,
	// has passed, and the session is still there to carry the answer.
	busy := dialMux(t, "127.0.0.2", ts.Addr())
	r, err := streamCall(busy, "Echo.Wait", &EchoArgs{RequestHeader: RequestHeader{Timeout: 5 * ts.lis.limits.IdleTimeout}})
	if err != nil || r.Text != context.DeadlineExceeded.Error() {
		t.Fatalf("long call on a busy session: %v", err)
	}
	if busy.IsClosed() {
		t.Fatal("a busy session was closed as idle")
	}
}

func TestStreamsPastTheCapAreClosedAndTheSessionGoesOn(t *testing.T) {
	ts, h := startLimitedServer(t, Limits{MaxStreamsPerConn: 4})
	s := dialMux(t, "127.0.0.2", ts.Addr())
	errs := make(chan error, 4)
	for i := 0; i < 4; i++ {
		go func() {
			_, err := streamCall(s, "Hold.Hold", &EchoArgs{})
			errs <- err
		}()
	}
	testutil.WaitFor(t, 5*time.Second, func() bool { return h.holding() == 4 })
	if _, err := streamCall(s, "Echo.Echo", &EchoArgs{Text: "fifth"}); err == nil {
		t.Fatal("a fifth stream was served")
	}
	close(h.release)
	for i := 0; i < 4; i++ {
		if err := <-errs; err != nil {
			t.Fatalf("held call: %v", err)
		}
	}
	// The held streams are done: a new one is served.
	testutil.WaitForNoError(t, 5*time.Second, "a call after the held ones", func() error {
		_, err := streamCall(s, "Echo.Echo", &EchoArgs{Text: "ok"})
		return err
	})
}

// The attack: thousands of streams on a few connections took a
// server to gigabytes (a goroutine and a 64 KiB buffer each). Now streams
// past the cap are closed unserved, and a served stream that has sent
// nothing holds no read buffer.
func TestThousandsOfStreamsStayBounded(t *testing.T) {
	ts, _ := startLimitedServer(t, Limits{})
	const sessions, perSession = 4, 600
	var before runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	goroutines := runtime.NumGoroutine()
	var held []net.Conn
	for i := 0; i < sessions; i++ {
		s := dialMux(t, "127.0.0.2", ts.Addr())
		for j := 0; j < perSession; j++ {
			st, err := s.Open()
			if err != nil {
				break // the server closed the session
			}
			st.Write([]byte{0x82}) // the start of a request
			held = append(held, st)
		}
	}
	var after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&after)
	grew := int64(after.HeapInuse) - int64(before.HeapInuse)
	extra := runtime.NumGoroutine() - goroutines
	t.Logf("%d streams opened on %d connections: heap +%d KiB, goroutines +%d", len(held), sessions, grew>>10, extra)
	if extra > sessions*(DefaultMaxStreamsPerConn+16) {
		t.Errorf("%d goroutines for %d streams capped at %d per connection", extra, len(held), DefaultMaxStreamsPerConn)
	}
	// Before: 2400 × 64 KiB of buffers alone.
	if grew > 64<<20 {
		t.Errorf("heap grew %d MiB", grew>>20)
	}
	// And others are served meanwhile.
	p := NewPool(nil)
	defer p.Shutdown()
	var reply EchoReply
	if err := p.Call(context.Background(), ts.Addr(), "Echo.Echo", &EchoArgs{Text: "hi"}, &reply); err != nil || reply.Text != "hi" {
		t.Fatalf("another client's call: %v", err)
	}
}

// One client floods the server (connections that stall, sessions full of
// streams, oversized requests); another client's calls are all served.
func TestOneClientsFloodLeavesOthersServed(t *testing.T) {
	ts, _ := startLimitedServer(t, Limits{MaxConnsPerClient: 20, MaxHandshakesPerClient: 8, HandshakeTimeout: 2 * time.Second, MaxStreamsPerConn: 16})
	stop := make(chan struct{})
	var flood sync.WaitGroup
	header := encodeValue(t, map[string]any{"ServiceMethod": "Echo.Echo", "Seq": 1})
	overBudget := append(header, arrayOf("items", 600000, []byte{0x80})...) // 600 kB that decode to 9.6 MB
	overBytes := append(header, 0x81, 0xa5, 'i', 't', 'e', 'm', 's', 0xdd, 0x7f, 0xff, 0xff, 0xff, 0x80)
	for w := 0; w < 4; w++ {
		flood.Add(1)
		go func(w int) {
			defer flood.Done()
			d := net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP("127.0.0.2")}, Timeout: time.Second}
			for i := 0; ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				c, err := d.Dial("tcp", ts.Addr())
				if err != nil {
					continue
				}
				switch (i + w) % 4 {
				case 0: // stall after the type byte
					c.Write([]byte{byte(ConnRPC)})
					go func() { <-stop; c.Close() }()
				case 1: // a session opening streams past the cap
					c.Write([]byte{byte(ConnMultiplex)})
					if s, err := yamux.Client(c, YamuxConfig()); err == nil {
						for j := 0; j < 40; j++ {
							if st, err := s.Open(); err == nil {
								st.Write([]byte{0x82})
							}
						}
						go func() { <-stop; s.Close() }()
					}
				case 2: // a request over the decoded-size budget
					c.Write([]byte{byte(ConnRPC)})
					c.Write(overBudget)
					go func() { <-stop; c.Close() }()
				case 3: // a request declaring 2 G items
					c.Write([]byte{byte(ConnRPC)})
					c.Write(overBytes)
					go func() { <-stop; c.Close() }()
				}
			}
		}(w)
	}
	defer func() {
		close(stop)
		flood.Wait()
	}()
	// The flood reaches the flooder's connection limit.
	testutil.WaitFor(t, 30*time.Second, func() bool {
		ts.lis.clients.mu.Lock()
		defer ts.lis.clients.mu.Unlock()
		return ts.lis.clients.refused > 0
	})

	p := NewPool(nil)
	defer p.Shutdown()
	for i := 0; i < 50; i++ {
		var reply EchoReply
		text := strings.Repeat("x", i)
		if err := p.Call(context.Background(), ts.Addr(), "Echo.Echo", &EchoArgs{Text: text}, &reply); err != nil || reply.Text != text {
			t.Fatalf("call %d of the other client during the flood: %v", i, err)
		}
		if n := ts.openFrom("127.0.0.2"); n > 20+8 {
			t.Fatalf("the flooding client holds %d connections, limit 20 (and 8 in their handshake)", n)
		}
	}
}
