package gopool

import (
	"sync/atomic"
	"time"
)

// Pool runs tasks on goroutines that wait for the next task once one ends.
// A goroutine started per task begins with a small stack that deep code
// (msgpack, the handlers) grows again every time, by copying — at 5,000
// heartbeating nodes a tenth of a server's CPU — while one that goes on to
// the next task keeps the stack it grew. The zero Pool is not ready: use
// New.
type Pool struct {
	work    chan func()
	idle    atomic.Int32
	maxIdle int32
	timeout time.Duration
}

// New returns a pool that keeps at most maxIdle goroutines waiting, each
// for at most idleTimeout.
func New(maxIdle int, idleTimeout time.Duration) *Pool {
	return &Pool{work: make(chan func()), maxIdle: int32(maxIdle), timeout: idleTimeout}
}

// Go runs f on an idle goroutine of the pool, or on a new one: it never
// waits.
func (p *Pool) Go(f func()) {
	select {
	case p.work <- f:
	default:
		go p.worker(f)
	}
}

// Idle returns how many goroutines wait for a task.
func (p *Pool) Idle() int { return int(p.idle.Load()) }

func (p *Pool) worker(f func()) {
	var t *time.Timer
	for {
		f()
		if p.idle.Add(1) > p.maxIdle {
			p.idle.Add(-1)
			return
		}
		if t == nil {
			t = time.NewTimer(p.timeout)
			defer t.Stop()
		} else {
			t.Reset(p.timeout)
		}
		select {
		case f = <-p.work:
			p.idle.Add(-1)
		case <-t.C:
			p.idle.Add(-1)
			return
		}
	}
}
