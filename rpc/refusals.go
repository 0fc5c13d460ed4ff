package rpc

import (
	"sync"
	"sync/atomic"
	"time"
)

// Refused bytes. Request memory bounds what a caller can make a Listener
// hold, but not what it can make it read: a refused request's body is
// still read past to keep its stream in step, and a caller cut off at its
// share of memory reconnects at once. Each refused byte costs the process
// CPU (TLS decryption, yamux framing, msgpack scanning) and holds nothing,
// so a caller with a certificate and a fast link could keep a server's
// cores busy throwing its bytes away, and Raft's heartbeats late.
//
// So every byte a Listener reads past for a refused request, and the
// share of a connection cut off for its memory, is charged to its client
// (clientKey) as debt, which is paid off at RefusedReadRate. While a
// client owes more than RefusedReadAllowance, every connection of it
// waits before it reads from the network until the excess is paid: TCP's
// flow control then slows the sender to the rate the Listener chose. A
// client that is never refused never waits; one refused now and then (a
// too-large job spec, a token that expired) owes at most a request or two
// and does not wait either.

// refusalDebt is what one client owes for refused bytes.
type refusalDebt struct {
	// over says it may owe more than its allowance: every read of every
	// connection of the client looks at it, so a client that owes
	// nothing to wait for costs a read one atomic load.
	over  atomic.Bool
	mu    sync.Mutex
	owed  float64 // bytes, as of at
	at    time.Time
	conns int // connections that hold this debt, under memBudget.mu
}

// refusalPolicy is a Listener's allowance, rate and the most a client may
// owe beyond its allowance (what it can be made to wait, at the rate).
type refusalPolicy struct {
	allowance float64
	rate      float64 // bytes a second
	ceiling   float64 // the most owed
}

// refusalMaxWait bounds how long a client's reads wait at once: what it
// owes is capped at its allowance and this long at the rate.
const refusalMaxWait = 15 * time.Second

func newRefusalPolicy(l Limits) refusalPolicy {
	p := refusalPolicy{allowance: float64(l.RefusedReadAllowance), rate: float64(l.RefusedReadRate)}
	p.ceiling = p.allowance + p.rate*refusalMaxWait.Seconds()
	return p
}

// paidAt brings what d owes up to now. Call it with d.mu held.
func (d *refusalDebt) paidAt(p refusalPolicy, now time.Time) {
	if el := now.Sub(d.at); el > 0 {
		d.owed = max(0, d.owed-el.Seconds()*p.rate)
	}
	d.at = now
}

// charge adds n refused bytes; it reports whether they took the client
// past its allowance (it waits from now on), to log once.
func (d *refusalDebt) charge(p refusalPolicy, n int64, now time.Time) (crossed bool) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.paidAt(p, now)
	before := d.owed
	d.owed = min(d.owed+float64(n), p.ceiling)
	if d.owed > p.allowance {
		d.over.Store(true)
	}
	return before <= p.allowance && d.owed > p.allowance
}

// wait is how long the client's reads must wait, as of now.
func (d *refusalDebt) wait(p refusalPolicy, now time.Time) time.Duration {
	if !d.over.Load() {
		return 0
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	d.paidAt(p, now)
	if d.owed <= p.allowance {
		d.over.Store(false)
		return 0
	}
	return time.Duration((d.owed - p.allowance) / p.rate * float64(time.Second))
}

// paid reports whether d owes nothing as of now.
func (d *refusalDebt) paid(p refusalPolicy, now time.Time) bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.paidAt(p, now)
	return d.owed == 0
}

// refusals is a Listener's debts, by client. A debt lives while a
// connection holds it and, once none does, until it is paid: a client
// cannot shed what it owes by reconnecting.
type refusals struct {
	policy refusalPolicy
	read   atomic.Int64 // refused bytes read, ever
	now    func() time.Time

	mu         sync.Mutex
	debts      map[clientKey]*refusalDebt
	lastWarned time.Time
}

// refusalSweepAt is how many debts are kept before those paid off and
// held by no connection are dropped.
const refusalSweepAt = 1024

func newRefusals(l Limits) *refusals {
	return &refusals{policy: newRefusalPolicy(l), now: time.Now, debts: map[clientKey]*refusalDebt{}}
}

// hold returns key's debt for a new connection of it.
func (r *refusals) hold(key clientKey) *refusalDebt {
	r.mu.Lock()
	defer r.mu.Unlock()
	d := r.debts[key]
	if d == nil {
		if len(r.debts) >= refusalSweepAt {
			now := r.now()
			for k, old := range r.debts {
				if old.conns == 0 && old.paid(r.policy, now) {
					delete(r.debts, k)
				}
			}
		}
		d = &refusalDebt{at: r.now()}
		r.debts[key] = d
	}
	d.conns++
	return d
}

// letGo is hold's counterpart, when the connection closes.
func (r *refusals) letGo(key clientKey, d *refusalDebt) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if d.conns--; d.conns == 0 && d.paid(r.policy, r.now()) && r.debts[key] == d {
		delete(r.debts, key)
	}
}

// shouldWarn rate-limits warnings of clients read slowly to one every
// refusalWarnEvery.
func (r *refusals) shouldWarn() bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	now := r.now()
	if now.Sub(r.lastWarned) < refusalWarnEvery {
		return false
	}
	r.lastWarned = now
	return true
}

// charge adds n refused bytes to d; see refusalDebt.charge.
func (r *refusals) charge(d *refusalDebt, n int64) (crossed bool) {
	if d == nil || n <= 0 {
		return false
	}
	r.read.Add(n)
	return d.charge(r.policy, n, r.now())
}

// throttle waits as long as d's client must before a read, or until done
// is closed.
func (r *refusals) throttle(d *refusalDebt, done <-chan struct{}) {
	if d == nil {
		return
	}
	for d.over.Load() {
		wait := d.wait(r.policy, r.now())
		if wait <= 0 {
			return
		}
		t := time.NewTimer(wait)
		select {
		case <-t.C:
		case <-done:
			t.Stop()
			return
		}
	}
}
