// Package clock is the time source of weft's long-running processes: the
// real clock in production and a fake one that tests advance by hand, so
// that leader duties and the agent's distributed scheduler are driven by
// time without a test ever waiting for it.
//
// Decisions never read a clock: they are pure functions of a time passed
// in (package scheduler, and the Tick(now) state machines of servers and
// agents). Only the loops that drive them hold a Clock.
package clock

import (
	"sort"
	"sync"
	"time"
)

// Clock tells the time and makes timers.
type Clock interface {
	// Now returns the current time.
	Now() time.Time
	// NewTicker returns a ticker that fires every d, dropping ticks a slow
	// reader misses, like time.Ticker.
	NewTicker(d time.Duration) Ticker
	// After returns a channel that receives the time once d has passed.
	After(d time.Duration) <-chan time.Time
}

// Ticker delivers ticks on C until stopped.
type Ticker interface {
	C() <-chan time.Time
	Stop()
}

// Real is the system clock.
type Real struct{}

// Now returns time.Now().
func (Real) Now() time.Time { return time.Now() }

// NewTicker returns a time.Ticker.
func (Real) NewTicker(d time.Duration) Ticker { return realTicker{time.NewTicker(d)} }

// After is time.After.
func (Real) After(d time.Duration) <-chan time.Time { return time.After(d) }

type realTicker struct{ t *time.Ticker }

func (r realTicker) C() <-chan time.Time { return r.t.C }
func (r realTicker) Stop()               { r.t.Stop() }

// Fake is a clock that moves only when Advance is called. Timers and
// tickers fire, in time order, as Advance passes their deadlines. It is safe
// for concurrent use.
type Fake struct {
	mu      sync.Mutex
	now     time.Time
	waiters []*fakeWaiter
}

type fakeWaiter struct {
	at     time.Time
	every  time.Duration // 0 for a one-shot timer
	ch     chan time.Time
	closed bool
}

// NewFake returns a fake clock showing start.
func NewFake(start time.Time) *Fake { return &Fake{now: start} }

// Now returns the fake time.
func (f *Fake) Now() time.Time {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.now
}

// After returns a channel that receives once the clock has advanced by d.
func (f *Fake) After(d time.Duration) <-chan time.Time {
	f.mu.Lock()
	defer f.mu.Unlock()
	w := &fakeWaiter{at: f.now.Add(d), ch: make(chan time.Time, 1)}
	if d <= 0 {
		w.ch <- f.now
		return w.ch
	}
	f.waiters = append(f.waiters, w)
	return w.ch
}

// NewTicker returns a ticker that fires each time the clock passes another
// multiple of d from now.
func (f *Fake) NewTicker(d time.Duration) Ticker {
	if d <= 0 {
		panic("clock: non-positive ticker interval")
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	w := &fakeWaiter{at: f.now.Add(d), every: d, ch: make(chan time.Time, 1)}
	f.waiters = append(f.waiters, w)
	return &fakeTicker{f: f, w: w}
}

type fakeTicker struct {
	f *Fake
	w *fakeWaiter
}

func (t *fakeTicker) C() <-chan time.Time { return t.w.ch }

func (t *fakeTicker) Stop() {
	t.f.mu.Lock()
	defer t.f.mu.Unlock()
	t.w.closed = true
}

// Advance moves the clock forward by d, firing every timer and tick whose
// time comes, in order. A tick nobody has read yet is dropped, as with a
// real ticker.
func (f *Fake) Advance(d time.Duration) {
	f.mu.Lock()
	defer f.mu.Unlock()
	end := f.now.Add(d)
	for {
		sort.SliceStable(f.waiters, func(i, j int) bool { return f.waiters[i].at.Before(f.waiters[j].at) })
		if len(f.waiters) == 0 || f.waiters[0].at.After(end) {
			break
		}
		w := f.waiters[0]
		f.now = w.at
		if !w.closed {
			select {
			case w.ch <- w.at:
			default:
			}
		}
		if w.every > 0 && !w.closed {
			w.at = w.at.Add(w.every)
		} else {
			f.waiters = f.waiters[1:]
		}
	}
	f.now = end
}

// Waiters returns how many timers and tickers are pending: a test can wait
// for a loop to have armed its next timer before it advances the clock.
func (f *Fake) Waiters() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	n := 0
	for _, w := range f.waiters {
		if !w.closed {
			n++
		}
	}
	return n
}
