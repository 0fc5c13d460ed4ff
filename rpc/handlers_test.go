package rpc

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

// TestHandlerPoolReusesItsGoroutines: a request that finds a goroutine
// idle runs on it (keeping the stack it grew), one that finds none gets a
// new one, and idle goroutines are bounded.
func TestHandlerPoolReusesItsGoroutines(t *testing.T) {
	p := handlerPool{work: make(chan func())}
	ran := make(chan string)
	p.run(func() { ran <- goid() })
	first := <-ran
	testutil.WaitFor(t, 5*time.Second, func() bool { return p.idle.Load() == 1 })
	p.run(func() { ran <- goid() })
	if again := <-ran; again != first {
		t.Fatalf("the second request ran on goroutine %s, not the idle %s", again, first)
	}
	// Two at once: the idle one takes one, a new goroutine the other.
	testutil.WaitFor(t, 5*time.Second, func() bool { return p.idle.Load() == 1 })
	release := make(chan struct{})
	p.run(func() { ran <- goid(); <-release })
	p.run(func() { ran <- goid(); <-release })
	a, b := <-ran, <-ran
	if a == b {
		t.Fatalf("two requests in flight ran on one goroutine %s", a)
	}
	close(release)
	testutil.WaitFor(t, 5*time.Second, func() bool { return p.idle.Load() == 2 })
}

func TestHandlerPoolBoundsIdleGoroutines(t *testing.T) {
	p := handlerPool{work: make(chan func())}
	release := make(chan struct{})
	for range maxIdleHandlers + 50 {
		p.run(func() { <-release }) // all busy: each gets its own goroutine
	}
	close(release)
	// The 50 past the bound exit; the rest wait for work.
	testutil.WaitFor(t, 10*time.Second, func() bool {
		return p.idle.Load() == maxIdleHandlers && workers(&p) == maxIdleHandlers
	})
}

// workers counts the goroutines in p's worker (a stack names the receiver).
func workers(p *handlerPool) int {
	buf := make([]byte, 1<<22)
	n := runtime.Stack(buf, true)
	return bytes.Count(buf[:n], fmt.Appendf(nil, "(*handlerPool).worker(%p", p))
}
