package rpc

import (
	"context"
	"sync"
	"testing"
)

// barrier answers once n calls are waiting in it, so that n calls are
// certainly in flight at once.
type barrier struct {
	mu      sync.Mutex
	n       int
	waiting int
	release chan struct{}
}

func (b *barrier) Wait(ctx context.Context, args *EchoArgs, reply *EchoReply) error {
	b.mu.Lock()
	b.waiting++
	if b.waiting == b.n {
		close(b.release)
	}
	ch := b.release
	b.mu.Unlock()
	select {
	case <-ch:
	case <-ctx.Done():
		return ctx.Err()
	}
	return nil
}

func (b *barrier) reset() {
	b.mu.Lock()
	b.waiting, b.release = 0, make(chan struct{})
	b.mu.Unlock()
}

// idleCounts returns the idle and open streams of each session to addr.
func (p *Pool) idleCounts(addr string) (idle, open []int) {
	p.mu.Lock()
	sessions := append([]*muxSession(nil), p.sessions[addr]...)
	p.mu.Unlock()
	for _, s := range sessions {
		s.mu.Lock()
		idle, open = append(idle, len(s.idle)), append(open, s.open)
		s.mu.Unlock()
	}
	return idle, open
}

// A burst of concurrent calls leaves its streams idle for the next burst,
// which opens none; and a session never keeps more idle streams than
// maxIdleStreams, nor more open than PoolMaxStreamsPerConn.
func TestPoolKeepsIdleStreamsForBursts(t *testing.T) {
	const burst = 40 // more than the 16 idle streams the pool used to keep
	bar := &barrier{n: burst}
	ts := startTestServerWith(t, func(s *Server) { Register(s, "Barrier.Wait", CapPublic, bar.Wait) })
	p := NewPool(nil)
	defer p.Shutdown()
	run := func() {
		bar.reset()
		var wg sync.WaitGroup
		for range burst {
			wg.Add(1)
			go func() {
				defer wg.Done()
				if err := p.Call(context.Background(), ts.Addr(), "Barrier.Wait", &EchoArgs{}, &EchoReply{}); err != nil {
					t.Error(err)
				}
			}()
		}
		wg.Wait()
	}
	run()
	if got := p.streamsOpened.Load(); got != burst {
		t.Fatalf("first burst opened %d streams, want %d", got, burst)
	}
	run()
	if got := p.streamsOpened.Load(); got != burst {
		t.Fatalf("after a second burst the pool has opened %d streams, want still %d (the idle ones reused)", got, burst)
	}
	idle, open := p.idleCounts(ts.Addr())
	total := 0
	for i := range idle {
		if idle[i] > maxIdleStreams || open[i] > PoolMaxStreamsPerConn {
			t.Fatalf("session %d: %d idle, %d open; bounds %d idle, %d open", i, idle[i], open[i], maxIdleStreams, PoolMaxStreamsPerConn)
		}
		total += idle[i]
	}
	if total != burst {
		t.Fatalf("%d idle streams after the bursts, want %d", total, burst)
	}
}

// The idle bound holds: a stream released to a session that already
// keeps maxIdleStreams idle is closed, and its place freed.
func TestPoolIdleBound(t *testing.T) {
	ts := startTestServer(t, "a")
	p := NewPool(nil)
	defer p.Shutdown()
	if err := p.Call(context.Background(), ts.Addr(), "Echo.Echo", &EchoArgs{}, &EchoReply{}); err != nil {
		t.Fatal(err)
	}
	p.mu.Lock()
	s := p.sessions[ts.Addr()][0]
	p.mu.Unlock()
	open := func() *clientStream {
		conn, err := s.session.Open()
		if err != nil {
			t.Fatal(err)
		}
		return newClientStream(conn, s)
	}
	var held []*clientStream
	for {
		st, reserved := s.take()
		if st == nil && !reserved {
			break // the session is full
		}
		if st == nil {
			st = open()
		}
		held = append(held, st)
	}
	if len(held) != PoolMaxStreamsPerConn {
		t.Fatalf("took %d streams from a session, want PoolMaxStreamsPerConn (%d)", len(held), PoolMaxStreamsPerConn)
	}
	// One stream past the session's cap, as a race could leave.
	s.mu.Lock()
	s.open++
	s.mu.Unlock()
	held = append(held, open())
	for _, st := range held {
		s.release(st)
	}
	idle, opened := p.idleCounts(ts.Addr())
	if idle[0] != maxIdleStreams || opened[0] != maxIdleStreams {
		t.Fatalf("after releasing %d streams: %d idle, %d open; want both %d", len(held), idle[0], opened[0], maxIdleStreams)
	}
	last := held[len(held)-1]
	if _, err := last.Write([]byte{0}); err == nil {
		t.Fatal("the stream released past the idle bound is still open")
	}
}
