package rpc

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strings"
	"sync"
	"testing"
	"time"
)

func TestPoolReusesStreamsConcurrently(t *testing.T) {
	ts := startTestServer(t, "a")
	p := NewPool(nil)
	defer p.Shutdown()
	var wg sync.WaitGroup
	errs := make(chan error, 200)
	for i := 0; i < 200; i++ {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			var reply EchoReply
			text := strings.Repeat("x", i)
			if err := p.Call(context.Background(), ts.Addr(), "Echo.Echo", &EchoArgs{Text: text}, &reply); err != nil {
				errs <- err
			} else if reply.Text != text {
				errs <- &mismatch{text, reply.Text}
			}
		}(i)
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	p.mu.Lock()
	n := len(p.sessions[ts.Addr()])
	p.mu.Unlock()
	if want := 200/PoolMaxStreamsPerConn + 1; n > want {
		t.Fatalf("pool holds %d sessions to one server, want at most %d", n, want)
	}
}

type mismatch struct{ want, got string }

func (m *mismatch) Error() string { return "reply " + m.got + " for " + m.want }

func TestClientRotatesPastDeadServers(t *testing.T) {
	a := startTestServer(t, "a")
	// An address nobody listens on.
	ln, _ := net.Listen("tcp", "127.0.0.1:0")
	dead := ln.Addr().String()
	ln.Close()

	c := NewClient([]string{dead, a.Addr()}, nil)
	defer c.Close()
	var reply EchoReply
	if err := c.Call(context.Background(), "Echo.Echo", &EchoArgs{Text: "hi"}, &reply); err != nil || reply.From != "a" {
		t.Fatalf("call = %v, %+v", err, reply)
	}
	// Sticks to the live server.
	if addr, _ := c.current(); addr != a.Addr() {
		t.Fatalf("client did not stick to the live server: %s", addr)
	}
	// Server answers are not retried elsewhere.
	if err := c.Call(context.Background(), "Echo.Fail", &EchoArgs{Text: "x"}, &reply); err == nil || IsRetryable(err) {
		t.Fatalf("server error = %v", err)
	}
}

func TestClientFailsFastWhenAllServersAreDown(t *testing.T) {
	ln, _ := net.Listen("tcp", "127.0.0.1:0")
	dead := ln.Addr().String()
	ln.Close()
	c := NewClient([]string{dead}, nil)
	defer c.Close()
	start := time.Now()
	err := c.Call(context.Background(), "Echo.Echo", &EchoArgs{}, &EchoReply{})
	if err == nil || IsServerError(err) {
		t.Fatalf("want a connection error, got %v", err)
	}
	if time.Since(start) > c.RetryBudget {
		t.Fatalf("client spent its whole retry budget on unreachable servers")
	}
}

func TestClientRetriesNoLeaderOnOtherServers(t *testing.T) {
	a, b := startTestServer(t, "a"), startTestServer(t, "b")
	c := NewClient([]string{a.Addr(), b.Addr()}, nil)
	c.RetryBudget = 300 * time.Millisecond
	defer c.Close()
	err := c.Call(context.Background(), "Echo.NoLeader", &EchoArgs{}, &EchoReply{})
	if !IsNoLeader(err) {
		t.Fatalf("want ErrNoLeader after the retry budget, got %v", err)
	}
}

func TestErrorHelpers(t *testing.T) {
	if !IsRetryable(&TransportError{Addr: "x", Method: "m", Err: &net.OpError{Op: "dial"}}) {
		t.Fatal("connection error not retryable")
	}
	for _, e := range []error{ErrNoLeader, ErrNotReady, ErrTimeout, ErrUnavailable} {
		wire := decodeError(encodeError(fmt.Errorf("context: %w", e)))
		if !errors.Is(wire, e) || !IsRetryable(wire) {
			t.Fatalf("%v over the wire not recognised: %#v", e, wire)
		}
	}
	if !IsNoLeader(decodeError(encodeError(ErrNotReady))) {
		t.Fatal("not-ready is not a no-leader condition")
	}
	if IsRetryable(nil) || IsRetryable(decodeError(encodeError(Errorf(CodeBadRequest, "invalid queue configuration: x")))) {
		t.Fatal("non-retryable error called retryable")
	}
	got := decodeError(encodeError(Errorf(CodeNotFound, "queue root.x not found; queues are: root")))
	if !IsNotFound(got) || got.Message != "queue root.x not found; queues are: root" {
		t.Fatalf("not-found over the wire: %#v", got)
	}
	// An error without a code, or text that merely looks like one, stays
	// uncoded and keeps its whole message.
	for _, s := range []string{"boom", "[Not a code] x", "[] x"} {
		if e := decodeError(s); e.Code != CodeUnknown || e.Message != s {
			t.Fatalf("decodeError(%q) = %#v", s, e)
		}
	}
	if c := ErrorCode(context.DeadlineExceeded); c != CodeTimeout {
		t.Fatalf("deadline code %s", c)
	}
}

// Clients with Spread given the same server list start at random servers,
// so a cluster's agents spread over the servers; a client keeps its
// current server when the list is replaced by one that still holds it.
// Without Spread a client starts at the first.
func TestClientsSpreadOverTheServers(t *testing.T) {
	servers := []string{"10.0.0.1:8030", "10.0.0.2:8030", "10.0.0.3:8030"}
	seen := map[string]int{}
	for range 300 {
		c := NewClient(nil, nil)
		c.Spread = true
		c.SetServers(servers)
		cur, _ := c.current()
		seen[cur]++
		c.SetServers([]string{"10.0.0.9:8030", servers[2], servers[1], servers[0]})
		if again, _ := c.current(); again != cur {
			t.Fatalf("a new list that holds %s moved the client to %s", cur, again)
		}
	}
	for _, s := range servers {
		// Each is picked with probability 1/3: 300 clients all missing
		// one has probability 3·(2/3)^300, about 10^-53.
		if seen[s] == 0 {
			t.Fatalf("no client of 300 started at %s: %v", s, seen)
		}
	}
	if cur, _ := NewClient(servers, nil).current(); cur != servers[0] {
		t.Fatalf("a client without Spread started at %s", cur)
	}
}
