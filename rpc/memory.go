package rpc

import (
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
)

// Request memory. Everything a Listener holds for requests it has not
// finished with is charged to one budget per process, with a share for
// each connection and each client (source IP and certificate role, see
// clientKey): the buffer a request is read into, the bytes yamux holds for
// a stream until it is read, the decoded request while its handler runs,
// and a fixed estimate of what each open connection and stream costs
// (goroutines, TLS and yamux state). A charge that does not fit fails; the
// caller is then cut off (its connection closed) and every other caller
// goes on being served. Callers without a peer certificate (server, agent
// or router) may hold at most half the process's budget between them, so
// that client traffic never starves the cluster's own. The fixed cost of a
// peer's connections and streams is charged to their own shares only, not
// to the process's: it grows with the cluster (every agent holds a
// connection to a server), which the budget must not cap.

// Estimates of what an open connection and an open stream cost beyond
// the bytes charged for their requests: a TLS connection's record buffers
// and a yamux session's reader and goroutines; a stream's goroutine stack
// and yamux state.
const (
	connOverhead   = 64 << 10
	streamOverhead = 16 << 10
)

// yamuxBufferFactor is what a byte yamux holds for a stream costs: its
// receive buffer grows by doubling, so it may take up to twice the bytes
// it holds.
const yamuxBufferFactor = 2

// memAccount is one budget: bytes in use and the most it may hold.
type memAccount struct {
	used  atomic.Int64
	limit int64
}

// take adds n to the account if it fits.
func (a *memAccount) take(n int64) bool {
	if a.used.Add(n) > a.limit {
		a.used.Add(-n)
		return false
	}
	return true
}

func (a *memAccount) give(n int64) { a.used.Add(-n) }

// memBudget is a Listener's request memory.
type memBudget struct {
	total     memAccount // everyone's
	unproven  memAccount // callers without a peer certificate
	perClient int64
	perConn   int64
	high      atomic.Int64 // the most total has held
	refused   *refusals
	onRefused func(clientKey) // a client has just gone past its allowance of refused bytes

	mu      sync.Mutex
	clients map[clientKey]*clientMemory
}

// clientMemory is one client's share; conns counts the connections that
// hold it (under memBudget.mu).
type clientMemory struct {
	memAccount
	conns int
}

func newMemBudget(l Limits) *memBudget {
	b := &memBudget{perClient: l.RequestMemoryPerClient, perConn: l.RequestMemoryPerConn, clients: map[clientKey]*clientMemory{}, refused: newRefusals(l)}
	b.total.limit = l.RequestMemory
	b.unproven.limit = l.RequestMemory / 2
	return b
}

// open starts the account of a connection from key, charging what an open
// connection costs; cut closes the connection. It fails if that does not
// fit.
func (b *memBudget) open(key clientKey, cut func()) (*connMemory, error) {
	b.mu.Lock()
	cm := b.clients[key]
	if cm == nil {
		cm = &clientMemory{memAccount: memAccount{limit: b.perClient}}
		b.clients[key] = cm
	}
	cm.conns++
	b.mu.Unlock()
	c := &connMemory{memAccount: memAccount{limit: b.perConn}, budget: b, client: cm, key: key, peer: key.peer(), cutConn: cut, debt: b.refused.hold(key)}
	if err := c.takeOverhead(connOverhead); err != nil {
		c.close()
		return nil, err
	}
	return c, nil
}

// used returns the bytes charged now.
func (b *memBudget) used() int64 { return b.total.used.Load() }

// highWater returns the most that has been charged at once.
func (b *memBudget) highWater() int64 { return b.high.Load() }

// connMemory is one connection's account (every stream of it), charged
// together with its client's and the process's. used counts everything
// charged to the connection, overhead the part of it charged to a peer's
// own shares only.
type connMemory struct {
	memAccount
	budget  *memBudget
	client  *clientMemory
	key     clientKey
	peer    bool
	cutConn func()
	debt    *refusalDebt // the client's, for refused bytes
	closed  sync.Once
	// overhead is the fixed cost charged to a peer's own shares only.
	overhead atomic.Int64
}

// errNoMemory marks a charge that did not fit; the error that says so
// names whose share ran out and carries the code the caller is answered
// with (noMemory).
var errNoMemory = errors.New("request memory")

// noMemory is a refused charge: too_large when the caller's own share ran
// out, unavailable (retryable) when the process's did.
func noMemory(code Code, share string, limit int64) error {
	return Errorf(code, "%w: %s of %s is in use; closing the connection", errNoMemory, share, byteSize(limit))
}

// byteSize formats n bytes for people: "24 MiB", "16 KiB", "100 bytes".
func byteSize(n int64) string {
	switch {
	case n >= 1<<20 && n%(1<<20) == 0:
		return fmt.Sprintf("%d MiB", n>>20)
	case n >= 1<<10 && n%(1<<10) == 0:
		return fmt.Sprintf("%d KiB", n>>10)
	}
	return fmt.Sprintf("%d bytes", n)
}

// take charges n bytes, or says which share has no room for them. A nil
// account charges nothing: a connection the Listener did not accept (a
// test's, or the in-process path's) is not accounted.
func (c *connMemory) take(n int64) error {
	if c == nil || n <= 0 {
		return nil
	}
	b := c.budget
	if !c.memAccount.take(n) {
		return noMemory(CodeTooLarge, "this connection's share", c.limit)
	}
	if !c.client.take(n) {
		c.memAccount.give(n)
		return noMemory(CodeTooLarge, "the share of "+c.key.String(), c.client.limit)
	}
	if !c.peer && !b.unproven.take(n) {
		c.client.give(n)
		c.memAccount.give(n)
		return noMemory(CodeUnavailable, "the share of callers without a server, agent or router certificate", b.unproven.limit)
	}
	if !b.total.take(n) {
		if !c.peer {
			b.unproven.give(n)
		}
		c.client.give(n)
		c.memAccount.give(n)
		return noMemory(CodeUnavailable, "the process's budget", b.total.limit)
	}
	for used := b.total.used.Load(); ; {
		high := b.high.Load()
		if used <= high || b.high.CompareAndSwap(high, used) {
			break
		}
	}
	return nil
}

// takeOverhead charges n bytes of a connection's or stream's fixed cost:
// as take, except that a peer's are charged to its own shares only.
func (c *connMemory) takeOverhead(n int64) error {
	if c == nil || !c.peer {
		return c.take(n)
	}
	if !c.memAccount.take(n) {
		return noMemory(CodeTooLarge, "this connection's share", c.limit)
	}
	if !c.client.take(n) {
		c.memAccount.give(n)
		return noMemory(CodeTooLarge, "the share of "+c.key.String(), c.client.limit)
	}
	c.overhead.Add(n)
	return nil
}

// giveOverhead gives back n bytes takeOverhead charged.
func (c *connMemory) giveOverhead(n int64) {
	if c == nil || !c.peer {
		c.give(n)
		return
	}
	c.overhead.Add(-n)
	c.memAccount.give(n)
	c.client.give(n)
}

// cut closes the connection: its caller asked for more than its share,
// which its client owes as refused bytes (it would send as much again on
// the connection it opens next).
func (c *connMemory) cut() {
	if c != nil && c.cutConn != nil {
		c.refuseShare()
		c.cutConn()
	}
}

// refuseShare charges the connection's whole share as refused bytes.
func (c *connMemory) refuseShare() {
	if c != nil {
		c.refuse(c.limit)
	}
}

// refuse charges n bytes read past for a refused request to the client's
// debt (refusals.go).
func (c *connMemory) refuse(n int64) {
	if c == nil {
		return
	}
	b := c.budget
	if b.refused.charge(c.debt, n) && b.onRefused != nil {
		b.onRefused(c.key)
	}
}

// throttle waits as long as the connection's client must before it is
// read from again, or until done is closed.
func (c *connMemory) throttle(done <-chan struct{}) {
	if c != nil {
		c.budget.refused.throttle(c.debt, done)
	}
}

// give returns n bytes taken before.
func (c *connMemory) give(n int64) {
	if c == nil || n <= 0 {
		return
	}
	c.memAccount.give(n)
	c.client.give(n)
	if !c.peer {
		c.budget.unproven.give(n)
	}
	c.budget.total.give(n)
}

// close gives back the connection's own cost and its place in its
// client's share. Call it once everything else it was charged for has
// been given back.
func (c *connMemory) close() {
	c.closed.Do(func() {
		c.giveOverhead(c.overhead.Load())
		c.give(c.used.Load())
		b := c.budget
		b.mu.Lock()
		defer b.mu.Unlock()
		if c.client.conns--; c.client.conns == 0 && b.clients[c.key] == c.client {
			delete(b.clients, c.key)
		}
		b.refused.letGo(c.key, c.debt)
	})
}

// yamux frame header (github.com/hashicorp/yamux's spec.md): version,
// type, flags, stream ID, length; only a data frame has a body, of length
// bytes.
const yamuxTypeDataFrame = 0

// yamuxMeter sits under a yamux session and charges the bytes of every
// data frame as they arrive, until a stream reads them (consumed): what
// yamux holds for streams nobody has read yet, whether they are being
// served, waiting to be accepted, or closed by this side. Bytes never
// read (a stream closed with data in it) stay charged until the session
// ends (close). A frame that does not fit ends the session.
type yamuxMeter struct {
	mem   *connMemory
	onCut func(error)  // told why the session is being ended
	held  atomic.Int64 // charged and not given back

	hdr  [yamuxHeaderSize]byte // the frame header being read
	hdrN int
	body uint32 // data bytes of the current frame still to come
}

// count charges the data bytes among p, bytes just read off the
// connection.
func (m *yamuxMeter) count(p []byte) error {
	var data int64
	for len(p) > 0 {
		if m.body > 0 {
			k := min(uint32(len(p)), m.body)
			m.body -= k
			data += int64(k)
			p = p[k:]
			continue
		}
		k := copy(m.hdr[m.hdrN:], p)
		m.hdrN += k
		p = p[k:]
		if m.hdrN == yamuxHeaderSize {
			m.hdrN = 0
			if m.hdr[1] == yamuxTypeDataFrame {
				m.body = uint32(m.hdr[8])<<24 | uint32(m.hdr[9])<<16 | uint32(m.hdr[10])<<8 | uint32(m.hdr[11])
			}
		}
	}
	if data == 0 {
		return nil
	}
	if err := m.mem.take(yamuxBufferFactor * data); err != nil {
		m.mem.refuseShare()
		if m.onCut != nil {
			m.onCut(err)
		}
		return err
	}
	m.held.Add(yamuxBufferFactor * data)
	return nil
}

// consumed gives back n bytes a stream has read.
func (m *yamuxMeter) consumed(n int) {
	if n <= 0 {
		return
	}
	c := int64(yamuxBufferFactor * n)
	m.held.Add(-c)
	m.mem.give(c)
}

// close gives back what streams never read, once the session has ended.
func (m *yamuxMeter) close() {
	m.mem.give(m.held.Swap(0))
}
