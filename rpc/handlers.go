package rpc

import (
	"sync/atomic"
	"time"
)

// handlerPool runs requests on goroutines that outlive one request. A
// goroutine started per request began with a small stack that the codec
// and the handler grew again for every request — at 5,000 heartbeating
// nodes, stack copying was a tenth of a server's CPU — while a goroutine
// that goes on to the next request keeps the stack it grew. The connection's
// own goroutine goes back to reading, so a caller that closes its stream
// still ends its request's context. Idle goroutines wait for work for a
// while, a bounded number of them; a request that finds none idle gets a
// new one.
type handlerPool struct {
	work chan func()
	idle atomic.Int32
}

const (
	// maxIdleHandlers bounds the goroutines waiting for a request.
	maxIdleHandlers = 512
	// handlerIdleTimeout ends a goroutine that had no request for that long.
	handlerIdleTimeout = 30 * time.Second
)

// run runs f on an idle goroutine of the pool, or on a new one.
func (p *handlerPool) run(f func()) {
	select {
	case p.work <- f:
	default:
		go p.worker(f)
	}
}

func (p *handlerPool) worker(f func()) {
	var t *time.Timer
	for {
		f()
		if p.idle.Add(1) > maxIdleHandlers {
			p.idle.Add(-1)
			return
		}
		if t == nil {
			t = time.NewTimer(handlerIdleTimeout)
			defer t.Stop()
		} else {
			t.Reset(handlerIdleTimeout)
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
