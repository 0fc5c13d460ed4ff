package rpc

import (
	"context"
	"errors"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/weft-sched/weft/internal/testutil"
)

func TestCodedErrorsCrossTheWire(t *testing.T) {
	ts := startTestServer(t, "a")
	p := NewPool(nil)
	defer p.Shutdown()
	ctx := context.Background()
	var reply EchoReply
	err := p.Call(ctx, ts.Addr(), "Echo.NotFound", &EchoArgs{Text: "x"}, &reply)
	if !errors.Is(err, ErrNotFound) || err.Error() != "thing x not found" || IsRetryable(err) {
		t.Fatalf("not-found answer = %#v", err)
	}
	err = p.Call(ctx, ts.Addr(), "Echo.NoLeader", &EchoArgs{}, &reply)
	if !IsNoLeader(err) || !IsRetryable(err) || !IsServerError(err) {
		t.Fatalf("no-leader answer = %#v", err)
	}
	err = p.Call(ctx, ts.Addr(), "Echo.Fail", &EchoArgs{Text: "x"}, &reply)
	if ErrorCode(err) != CodeUnknown || err.Error() != "boom: x" || IsRetryable(err) {
		t.Fatalf("uncoded answer = %#v", err)
	}
	err = p.Call(ctx, ts.Addr(), "Echo.Nope", &EchoArgs{}, &reply)
	if ErrorCode(err) != CodeBadRequest || !strings.Contains(err.Error(), `unknown method "Echo.Nope"`) {
		t.Fatalf("unknown method answer = %#v", err)
	}
	// The connection survives all of them.
	if err := p.Call(ctx, ts.Addr(), "Echo.Echo", &EchoArgs{Text: "ok"}, &reply); err != nil || reply.Text != "ok" {
		t.Fatalf("call after errors: %v %+v", err, reply)
	}
}

func TestHandlerPanicIsAnInternalErrorNotACrash(t *testing.T) {
	ts := startTestServer(t, "a")
	p := NewPool(nil)
	defer p.Shutdown()
	var reply EchoReply
	err := p.Call(context.Background(), ts.Addr(), "Echo.Panic", &EchoArgs{}, &reply)
	if !errors.Is(err, ErrInternal) {
		t.Fatalf("panicking handler answered %#v", err)
	}
	if err := p.Call(context.Background(), ts.Addr(), "Echo.Echo", &EchoArgs{Text: "ok"}, &reply); err != nil {
		t.Fatalf("server unusable after a handler panic: %v", err)
	}
}

func TestHandlerContextCarriesTheCallersDeadlineAndConnection(t *testing.T) {
	ts := startTestServer(t, "a")
	p := NewPool(nil)
	defer p.Shutdown()
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	var reply EchoReply
	// The handler blocks until its context ends: the caller's deadline,
	// less a margin, reaches the server, which answers in time.
	if err := p.Call(ctx, ts.Addr(), "Echo.Wait", &EchoArgs{}, &reply); err != nil {
		t.Fatalf("call = %v", err)
	}
	if reply.Text != context.DeadlineExceeded.Error() {
		t.Fatalf("handler's context ended with %q, want the deadline", reply.Text)
	}
	if err := p.Call(context.Background(), ts.Addr(), "Echo.Peer", &EchoArgs{}, &reply); err != nil ||
		!strings.HasPrefix(reply.From, "127.0.0.1:") {
		t.Fatalf("handler saw connection %q (%v)", reply.From, err)
	}
}

// blockingEcho records when its handler's context ends.
type blockingEcho struct {
	started chan struct{}
	ended   chan error
}

func (b *blockingEcho) Block(ctx context.Context, args *EchoArgs, reply *EchoReply) error {
	close(b.started)
	<-ctx.Done()
	b.ended <- ctx.Err()
	return nil
}

func TestCallerGivingUpCancelsTheHandler(t *testing.T) {
	srv := NewServer(nil)
	b := &blockingEcho{started: make(chan struct{}), ended: make(chan error, 1)}
	Register(srv, "Echo.Block", CapPublic, b.Block)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	lis := NewListener(srv, nil, nil)
	go lis.Serve(ln)
	defer func() { ln.Close(); lis.Close() }()

	p := NewPool(nil)
	defer p.Shutdown()
	ctx, cancel := context.WithCancel(context.Background())
	errc := make(chan error, 1)
	go func() { errc <- p.Call(ctx, ln.Addr().String(), "Echo.Block", &EchoArgs{}, &EchoReply{}) }()
	<-b.started
	cancel()
	if err := <-errc; !errors.Is(err, context.Canceled) || IsRetryable(err) {
		t.Fatalf("cancelled call returned %v", err)
	}
	// The stream closed under the handler: its context ends, long before
	// the request's own timeout.
	if err := <-b.ended; !errors.Is(err, context.Canceled) {
		t.Fatalf("handler context ended with %v, want cancellation", err)
	}
}

// blackHole accepts connections and never answers: a server cut off by a
// partition that drops packets.
func blackHole(t *testing.T) string {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var conns []net.Conn
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			conns = append(conns, c)
			mu.Unlock()
		}
	}()
	t.Cleanup(func() {
		ln.Close()
		mu.Lock()
		for _, c := range conns {
			c.Close()
		}
		mu.Unlock()
	})
	return ln.Addr().String()
}

func TestClientPassesOverAServerThatDoesNotAnswer(t *testing.T) {
	hole := blackHole(t)
	a := startTestServer(t, "a")
	c := NewClient([]string{hole, a.Addr()}, nil)
	c.AttemptTimeout = 200 * time.Millisecond
	defer c.Close()
	var tried []ServerOutcome
	c.OnRetry = func(_ time.Duration, t []ServerOutcome) { tried = t }
	var reply EchoReply
	if err := c.Call(context.Background(), "Echo.Echo", &EchoArgs{Text: "hi"}, &reply); err != nil || reply.From != "a" {
		t.Fatalf("call = %v %+v", err, reply)
	}
	if len(tried) != 1 || tried[0].Addr != hole || Describe(tried[0].Err) != "no answer in time" {
		t.Fatalf("progress said %+v", tried)
	}
}

func TestCallErrorNamesEveryServer(t *testing.T) {
	ln, _ := net.Listen("tcp", "127.0.0.1:0")
	dead := ln.Addr().String()
	ln.Close()
	a := startTestServer(t, "a")
	c := NewClient([]string{dead, a.Addr()}, nil)
	defer c.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	err := c.Call(ctx, "Echo.NoLeader", &EchoArgs{}, &EchoReply{})
	var ce *CallError
	if !errors.As(err, &ce) || !IsNoLeader(err) {
		t.Fatalf("call = %#v", err)
	}
	msg := err.Error()
	if !strings.Contains(msg, dead+": unreachable (") || !strings.Contains(msg, a.Addr()+": knows no leader") {
		t.Fatalf("error does not name each server's state: %s", msg)
	}
}

// idRecorder answers NoLeader on its first call and records the request IDs
// it sees.
type idRecorder struct {
	mu  sync.Mutex
	ids []string
	n   int
}

func (r *idRecorder) Write(ctx context.Context, args *EchoArgs, reply *EchoReply) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.ids = append(r.ids, args.RequestID)
	r.n++
	if r.n == 1 {
		return ErrNoLeader
	}
	return nil
}

func TestRetriesCarryTheSameRequestID(t *testing.T) {
	rec := &idRecorder{}
	var addrs []string
	for i := 0; i < 2; i++ {
		srv := NewServer(hclog.NewNullLogger())
		Register(srv, "Echo.Write", CapPublic, rec.Write)
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		lis := NewListener(srv, nil, nil)
		go lis.Serve(ln)
		t.Cleanup(func() { ln.Close(); lis.Close() })
		addrs = append(addrs, ln.Addr().String())
	}
	c := NewClient(addrs, nil)
	defer c.Close()
	args := &EchoArgs{}
	if err := c.Call(context.Background(), "Echo.Write", args, &EchoReply{}); err != nil {
		t.Fatal(err)
	}
	testutil.WaitFor(t, time.Second, func() bool { rec.mu.Lock(); defer rec.mu.Unlock(); return len(rec.ids) == 2 })
	if rec.ids[0] == "" || rec.ids[0] != rec.ids[1] || len(rec.ids[0]) != 32 {
		t.Fatalf("request IDs seen: %q", rec.ids)
	}
	if err := args.ValidateRequestID(); err != nil {
		t.Fatal(err)
	}
	bad := &RequestHeader{RequestID: "no spaces"}
	if err := bad.ValidateRequestID(); ErrorCode(err) != CodeBadRequest {
		t.Fatalf("bad request ID accepted: %v", err)
	}
}
