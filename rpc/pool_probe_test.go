package rpc

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/weft-sched/weft/internal/testutil"
)

// sessionsTo returns the pool's sessions to addr.
func (p *Pool) sessionsTo(addr string) []*muxSession {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]*muxSession(nil), p.sessions[addr]...)
}

// A call that a live server answers too late does not cost the session:
// the server answers the ping, and the next call goes over the same
// connection.
func TestPoolKeepsASlowServersSession(t *testing.T) {
	release := make(chan struct{})
	ts := startTestServerWith(t, func(s *Server) {
		Register(s, "Echo.Slow", CapPublic, func(ctx context.Context, args *EchoArgs, reply *EchoReply) error {
			<-release
			return nil
		})
	})
	p := NewPool(nil)
	defer p.Shutdown()
	var reply EchoReply
	if err := p.Call(context.Background(), ts.Addr(), "Echo.Echo", &EchoArgs{Text: "a"}, &reply); err != nil {
		t.Fatal(err)
	}
	before := p.sessionsTo(ts.Addr())
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	err := p.Call(ctx, ts.Addr(), "Echo.Slow", &EchoArgs{}, &reply)
	cancel()
	close(release)
	if !errors.Is(err, context.DeadlineExceeded) || !IsRetryable(err) {
		t.Fatalf("slow call returned %v, want a retryable deadline", err)
	}
	testutil.WaitFor(t, 10*time.Second, func() bool { return !before[0].probing.Load() })
	after := p.sessionsTo(ts.Addr())
	if len(before) != 1 || len(after) != 1 || after[0] != before[0] || after[0].session.IsClosed() {
		t.Fatalf("sessions before %v, after the probe %v: want the same one, open", before, after)
	}
	if err := p.Call(context.Background(), ts.Addr(), "Echo.Echo", &EchoArgs{Text: "b"}, &reply); err != nil || reply.Text != "b" {
		t.Fatalf("call after the slow one: %v %+v", err, reply)
	}
	if now := p.sessionsTo(ts.Addr()); len(now) != 1 || now[0] != before[0] {
		t.Fatalf("the next call dialled again: sessions %v", now)
	}
}

// A server that stops answering altogether (here, one that never speaks
// after accepting, as a stopped process or a partition looks) loses its
// session once the ping goes unanswered.
func TestPoolDropsASessionWhosePingGoesUnanswered(t *testing.T) {
	hole := blackHole(t)
	p := NewPool(nil)
	p.probeTimeout = 100 * time.Millisecond
	defer p.Shutdown()
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	if err := p.Call(ctx, hole, "Echo.Echo", &EchoArgs{}, &EchoReply{}); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("call to a black hole returned %v", err)
	}
	testutil.WaitFor(t, 10*time.Second, func() bool { return len(p.sessionsTo(hole)) == 0 })
}

// Sessions that carry no call for the idle timeout are closed; one in
// use is not.
func TestPoolClosesIdleSessions(t *testing.T) {
	idle, busy := startTestServer(t, "idle"), startTestServer(t, "busy")
	p := NewPool(nil)
	p.idleTimeout = 200 * time.Millisecond
	defer p.Shutdown()
	var reply EchoReply
	for _, addr := range []string{idle.Addr(), busy.Addr()} {
		if err := p.Call(context.Background(), addr, "Echo.Echo", &EchoArgs{}, &reply); err != nil {
			t.Fatal(err)
		}
	}
	closed := p.sessionsTo(idle.Addr())[0]
	kept := p.sessionsTo(busy.Addr())[0]
	// Keep busy's session in use while idle's times out.
	testutil.WaitFor(t, 10*time.Second, func() bool {
		if err := p.Call(context.Background(), busy.Addr(), "Echo.Echo", &EchoArgs{}, &reply); err != nil {
			t.Fatal(err)
		}
		return closed.session.IsClosed()
	})
	if len(p.sessionsTo(idle.Addr())) != 0 {
		t.Fatalf("an idle session was closed but is still in the pool")
	}
	if now := p.sessionsTo(busy.Addr()); len(now) != 1 || now[0] != kept || kept.session.IsClosed() {
		t.Fatalf("the session in use was closed or replaced")
	}
	// A closed one is dialled again on demand.
	if err := p.Call(context.Background(), idle.Addr(), "Echo.Echo", &EchoArgs{Text: "again"}, &reply); err != nil || reply.Text != "again" {
		t.Fatalf("call after the idle close: %v", err)
	}
}
