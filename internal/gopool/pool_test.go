package gopool

import (
	"bytes"
	"fmt"
	"runtime"
	"testing"
	"time"

	"github.com/weft-sched/weft/internal/testutil"
)

// goid returns the calling goroutine's ID, from its stack header.
func goid() string {
	var buf [64]byte
	n := runtime.Stack(buf[:], false)
	f := bytes.Fields(buf[:n])
	return string(f[1]) // "goroutine 42 [running]:"
}

// parked reports whether goroutine id is blocked in a select: a pool
// goroutine waiting for work.
func parked(id string) bool {
	buf := make([]byte, 1<<20)
	all := buf[:runtime.Stack(buf, true)]
	return bytes.Contains(all, []byte("goroutine "+id+" [select"))
}

const maxIdle = 64

// TestPoolReusesItsGoroutines: a request that finds a goroutine
// idle runs on it (keeping the stack it grew), one that finds none gets a
// new one, and idle goroutines are bounded.
func TestPoolReusesItsGoroutines(t *testing.T) {
	p := New(maxIdle, time.Minute)
	ran := make(chan string)
	p.Go(func() { ran <- goid() })
	first := <-ran
	// Idle counts a goroutine as it goes to wait, a moment before it
	// waits: the next request must come once it is parked in its select.
	testutil.WaitFor(t, 5*time.Second, func() bool { return p.Idle() == 1 && parked(first) })
	p.Go(func() { ran <- goid() })
	if again := <-ran; again != first {
		t.Fatalf("the second request ran on goroutine %s, not the idle %s", again, first)
	}
	// Two at once: the idle one takes one, a new goroutine the other.
	testutil.WaitFor(t, 5*time.Second, func() bool { return p.Idle() == 1 })
	release := make(chan struct{})
	p.Go(func() { ran <- goid(); <-release })
	p.Go(func() { ran <- goid(); <-release })
	a, b := <-ran, <-ran
	if a == b {
		t.Fatalf("two requests in flight ran on one goroutine %s", a)
	}
	close(release)
	testutil.WaitFor(t, 5*time.Second, func() bool { return p.Idle() == 2 })
}

func TestPoolBoundsIdleGoroutines(t *testing.T) {
	p := New(maxIdle, time.Minute)
	release := make(chan struct{})
	for range maxIdle + 50 {
		p.Go(func() { <-release }) // all busy: each gets its own goroutine
	}
	close(release)
	// The 50 past the bound exit; the rest wait for work.
	testutil.WaitFor(t, 10*time.Second, func() bool {
		return p.Idle() == maxIdle && workers(p) == maxIdle
	})
}

// TestPoolLetsIdleGoroutinesGo: an idle goroutine ends after the timeout.
func TestPoolLetsIdleGoroutinesGo(t *testing.T) {
	p := New(maxIdle, 50*time.Millisecond)
	done := make(chan struct{})
	p.Go(func() { close(done) })
	<-done
	testutil.WaitFor(t, 10*time.Second, func() bool { return p.Idle() == 0 && workers(p) == 0 })
}

// workers counts the goroutines in p's worker (a stack names the receiver).
func workers(p *Pool) int {
	buf := make([]byte, 1<<22)
	n := runtime.Stack(buf, true)
	return bytes.Count(buf[:n], fmt.Appendf(nil, "(*Pool).worker(%p", p))
}
