package httpapi

import (
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"sync"
)

// What one client may hold, and in what order it is checked. A request
// costs the process nothing beyond its headers until its token has been
// checked (Config.Authenticate): no body byte is read and no slot taken
// before. Then it takes a slot among the requests in flight from its
// source address, and a request with a body reserves what reading and
// parsing that body may cost from a byte budget before a byte of it is
// read. A management token's requests have slots and a budget of their
// own, so no other caller's load ever refuses them.

// source is the client a request is counted against: its IP address, or
// for IPv6 its /64, which one host commonly holds whole.
type source = netip.Addr

// sourceOf returns the source of a request from addr, "IP:port".
func sourceOf(addr string) source {
	ap, err := netip.ParseAddrPort(addr)
	if err != nil {
		host, _, _ := net.SplitHostPort(addr)
		a, _ := netip.ParseAddr(host)
		return a.Unmap()
	}
	a := ap.Addr().Unmap()
	if a.Is6() {
		p, _ := a.Prefix(64)
		return p.Addr()
	}
	return a
}

// refusal is an answer given before a request is served: a status and
// one line.
type refusal struct {
	status     int
	msg        string
	retryAfter bool
}

func (r *refusal) Error() string { return r.msg }

// inflight counts the requests being served, per source and for
// management tokens apart.
type inflight struct {
	mu         sync.Mutex
	perSource  map[source]int
	total      int
	management int
	limits     Limits
}

func newInflight(l Limits) *inflight {
	return &inflight{perSource: map[source]int{}, limits: l}
}

// acquire takes a slot for a request from src, or says why not; release
// gives it back.
func (f *inflight) acquire(src source, management bool) (release func(), err *refusal) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if management {
		if f.management >= f.limits.MaxInflightManagement {
			return nil, &refusal{http.StatusTooManyRequests, fmt.Sprintf("more than %d requests with management tokens in flight; retry shortly", f.limits.MaxInflightManagement), true}
		}
		f.management++
		return func() {
			f.mu.Lock()
			f.management--
			f.mu.Unlock()
		}, nil
	}
	switch {
	case f.perSource[src] >= f.limits.MaxInflightPerSource:
		return nil, &refusal{http.StatusTooManyRequests, fmt.Sprintf("more than %d requests in flight from %s; retry shortly", f.limits.MaxInflightPerSource, src), true}
	case f.total >= f.limits.MaxInflight:
		return nil, &refusal{http.StatusTooManyRequests, fmt.Sprintf("more than %d requests in flight on this process; retry shortly", f.limits.MaxInflight), true}
	}
	f.perSource[src]++
	f.total++
	return func() {
		f.mu.Lock()
		defer f.mu.Unlock()
		f.total--
		if f.perSource[src]--; f.perSource[src] == 0 {
			delete(f.perSource, src)
		}
	}, nil
}

// counts returns the requests in flight: all of them, and those of
// management tokens (for tests).
func (f *inflight) counts() (all, management int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.total + f.management, f.management
}

// budget is a byte budget for the request bodies being read and parsed:
// each reserves what it may cost (the route's cost of its size) before a
// byte of it is read, and at most perSource of the budget is one
// source's.
type budget struct {
	mu        sync.Mutex
	total     int64
	perSource int64
	used      int64
	bySource  map[source]int64
	// highWater is the most ever reserved at once (for tests).
	highWater int64
}

func newBudget(total, perSource int64) *budget {
	return &budget{total: total, perSource: perSource, bySource: map[source]int64{}}
}

// reserve takes n bytes for a body from src, or reports false when the
// budget (or src's share of it) has not that much left.
func (b *budget) reserve(src source, n int64) (release func(), ok bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.used+n > b.total || b.bySource[src]+n > b.perSource {
		return nil, false
	}
	b.used += n
	b.bySource[src] += n
	b.highWater = max(b.highWater, b.used)
	return func() {
		b.mu.Lock()
		defer b.mu.Unlock()
		b.used -= n
		if b.bySource[src] -= n; b.bySource[src] == 0 {
			delete(b.bySource, src)
		}
	}, true
}

// high returns the most the budget ever had reserved at once.
func (b *budget) high() int64 {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.highWater
}
