package gossip

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"net"
	"strings"
	"sync"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/memberlist"
)

// The budget for gossip streams in flight: over all inbound streams and
// replies at once, and over those from any one IP address, the bytes the
// guard holds of first messages still arriving, plus, once one has arrived
// whole, what memberlist will allocate to decode it, until memberlist
// closes the stream. A stream that would exceed either is refused, so a
// flood of streams holds at most pushPullBudget however many connections it
// opens, holds only as much as it has actually sent until its messages are
// whole, and a flood from one address leaves the rest of the budget to
// everyone else.
const (
	pushPullBudget      = 64 << 20
	pushPullBudgetPerIP = 32 << 20
)

// maxStreamsPerAddress bounds the inbound gossip streams one remote IP
// address may hold open at once, from accept to close, so a flood of idle
// connections from one address costs a bounded number of goroutines and
// descriptors. Members open a stream for a push/pull or a probe and close
// it within a TCP timeout; even a whole weft dev pool on one loopback
// address stays far below it.
const maxStreamsPerAddress = 128

// inspectTimeout bounds how long an inbound stream may take to deliver the
// head of its first message (memberlist's own TCP timeout is 10 s).
const inspectTimeout = 10 * time.Second

// guard is memberlist's network transport with every inbound stream, every
// reply read from an outbound stream and every packet inspected before
// memberlist decodes it (inspectStream, inspectPacket); with a keyring,
// the guard opens encrypted messages to inspect what they carry too. It is
// the transport of every weft member, encrypted or not.
type guard struct {
	*memberlist.NetTransport
	keys   *memberlist.Keyring // nil: plaintext gossip
	logger *refusalLog
	budget *budget

	streamCh chan net.Conn
	packetCh chan *memberlist.Packet
	// stopping is closed when Shutdown begins: nothing more is delivered,
	// but what the listeners hand over is still taken (and dropped) until
	// they have stopped, closing listenersDone.
	stopping      chan struct{}
	listenersDone chan struct{}
	once          sync.Once
	wg            sync.WaitGroup

	mu      sync.Mutex
	pending map[net.Conn]struct{} // inbound streams being inspected; nil once stopped
	open    map[string]int        // inbound streams open, per remote IP
}

// newGuard binds memberlist's TCP and UDP listeners on addr:port (port 0
// picks a free one, the same for both) and starts inspecting what arrives.
// keys is the member's keyring (nil: plaintext gossip), the one memberlist
// encrypts and decrypts with.
func newGuard(addr string, port int, keys *memberlist.Keyring, logger hclog.Logger) (*guard, error) {
	std := logger.StandardLogger(&hclog.StandardLoggerOptions{InferLevels: true})
	nc := &memberlist.NetTransportConfig{BindAddrs: []string{addr}, BindPort: port, Logger: std}
	// Binding TCP and UDP on one free port races other processes; retry
	// as memberlist does.
	tries := 1
	if port == 0 {
		tries = 10
	}
	var nt *memberlist.NetTransport
	var err error
	for i := 0; i < tries; i++ {
		if nt, err = memberlist.NewNetTransport(nc); err == nil || !strings.Contains(err.Error(), "address already in use") {
			break
		}
	}
	if err != nil {
		return nil, fmt.Errorf("bind gossip listeners on %s: %w", net.JoinHostPort(addr, fmt.Sprint(port)), err)
	}
	g := &guard{
		NetTransport:  nt,
		keys:          keys,
		logger:        &refusalLog{logger: logger},
		budget:        &budget{limit: pushPullBudget, perIP: pushPullBudgetPerIP, held: map[string]int64{}},
		streamCh:      make(chan net.Conn),
		packetCh:      make(chan *memberlist.Packet),
		stopping:      make(chan struct{}),
		listenersDone: make(chan struct{}),
		pending:       map[net.Conn]struct{}{},
		open:          map[string]int{},
	}
	g.wg.Add(2)
	go g.acceptStreams()
	go g.acceptPackets()
	return g, nil
}

// StreamCh delivers the inbound streams that passed inspection.
func (g *guard) StreamCh() <-chan net.Conn { return g.streamCh }

// PacketCh delivers the packets that passed inspection.
func (g *guard) PacketCh() <-chan *memberlist.Packet { return g.packetCh }

// DialTimeout opens an outbound stream whose reply is inspected before
// memberlist reads it.
func (g *guard) DialTimeout(addr string, timeout time.Duration) (net.Conn, error) {
	conn, err := g.NetTransport.DialTimeout(addr, timeout)
	if err != nil {
		return nil, err
	}
	return &replyConn{Conn: conn, g: g}, nil
}

// DialAddressTimeout is DialTimeout for memberlist's node-aware calls.
func (g *guard) DialAddressTimeout(a memberlist.Address, timeout time.Duration) (net.Conn, error) {
	return g.DialTimeout(a.Addr, timeout)
}

// Shutdown closes the listeners and every stream still being inspected.
func (g *guard) Shutdown() error {
	var err error
	g.once.Do(func() {
		close(g.stopping)
		err = g.NetTransport.Shutdown()
		close(g.listenersDone)
		g.mu.Lock()
		for conn := range g.pending {
			conn.Close()
		}
		g.pending = nil
		g.mu.Unlock()
		g.wg.Wait()
	})
	return err
}

func (g *guard) acceptStreams() {
	defer g.wg.Done()
	in := g.NetTransport.StreamCh()
	for {
		select {
		case conn := <-in:
			ip := remoteIP(conn)
			if err := g.track(conn, ip); err != nil {
				g.logger.failed("stream", conn.RemoteAddr(), err)
				conn.Close()
				continue
			}
			g.wg.Add(1)
			go func() {
				defer g.wg.Done()
				g.admit(conn, ip)
			}()
		case <-g.listenersDone:
			return
		}
	}
}

// track records conn as open and being inspected. It fails once stopping,
// and with a refusal when ip already holds maxStreamsPerAddress streams.
func (g *guard) track(conn net.Conn, ip string) error {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.pending == nil {
		return net.ErrClosed
	}
	select {
	case <-g.stopping:
		return net.ErrClosed
	default:
	}
	if g.open[ip] >= maxStreamsPerAddress {
		return refuse("%s already holds %d gossip streams open", ip, maxStreamsPerAddress)
	}
	g.open[ip]++
	g.pending[conn] = struct{}{}
	return nil
}

// inspected records that conn's inspection is over.
func (g *guard) inspected(conn net.Conn) {
	g.mu.Lock()
	if g.pending != nil {
		delete(g.pending, conn)
	}
	g.mu.Unlock()
}

// closed records that a stream from ip was closed.
func (g *guard) closed(ip string) {
	g.mu.Lock()
	if g.open[ip]--; g.open[ip] <= 0 {
		delete(g.open, ip)
	}
	g.mu.Unlock()
}

// admit inspects an inbound stream and hands it to memberlist, or closes it.
func (g *guard) admit(conn net.Conn, ip string) {
	conn.SetDeadline(time.Now().Add(inspectTimeout))
	checked, err := g.check(conn)
	g.inspected(conn)
	if err != nil {
		g.logger.failed("stream", conn.RemoteAddr(), err)
		conn.Close()
		g.closed(ip)
		return
	}
	giveBudget := checked.release
	checked.release = func() {
		giveBudget()
		g.closed(ip)
	}
	select {
	case g.streamCh <- checked:
	case <-g.stopping:
		checked.Close()
	}
}

// check reads and inspects the first message of conn and returns a
// connection that replays what was read, holding what it read and what
// memberlist will allocate for it against the budget until it is closed.
func (g *guard) check(conn net.Conn) (*replayConn, error) {
	ip := remoteIP(conn)
	seen := &meteredBuffer{take: func(n int64) bool { return g.budget.take(ip, n) }}
	giveBack := func(extra int64) func() {
		return func() { g.budget.give(ip, seen.taken+extra) }
	}
	br := bufio.NewReader(conn)
	cost, err := inspectStream(&teeScanner{br: br, seen: seen}, g.keys != nil)
	if err == nil && !seen.flush() {
		err = io.ErrShortWrite
	}
	if err == nil && g.keys != nil {
		// What the encrypted message carries, opened into a copy the
		// budget holds while it is inspected.
		n := int64(seen.Len())
		if !g.budget.take(ip, n) {
			err = refuse("more gossip in flight than the budget holds (%d MiB, %d MiB from one address)", pushPullBudget>>20, pushPullBudgetPerIP>>20)
		} else {
			var more int64
			more, err = inspectSealed(seen.Bytes(), g.keys)
			cost += more
			g.budget.give(ip, n)
		}
	}
	if seen.over {
		err = refuse("more gossip in flight than the budget holds (%d MiB, %d MiB from one address)", pushPullBudget>>20, pushPullBudgetPerIP>>20)
	}
	if err != nil {
		giveBack(0)()
		return nil, err
	}
	// memberlist decodes its own copy of the message, plus what the
	// header made it allocate.
	extra := int64(seen.Len()) + cost
	if !g.budget.take(ip, extra) {
		giveBack(0)()
		return nil, refuse("a %d-byte gossip message needs %d bytes more to decode, more than the budget has left (%d MiB, %d MiB from one address)",
			seen.Len(), extra, pushPullBudget>>20, pushPullBudgetPerIP>>20)
	}
	return &replayConn{Conn: conn, r: io.MultiReader(&seen.Buffer, br), release: giveBack(extra)}, nil
}

// meteredBuffer holds the bytes the guard has read of a stream, taking
// them from the budget as they arrive (a few KiB at a time, then the rest
// by flush) and refusing to grow past it.
type meteredBuffer struct {
	bytes.Buffer
	take  func(int64) bool
	taken int64
	over  bool
}

// meterStep is how many bytes a stream may hold beyond what it has taken
// from the budget.
const meterStep = 4 << 10

func (m *meteredBuffer) Write(p []byte) (int, error) {
	n, _ := m.Buffer.Write(p)
	if int64(m.Len())-m.taken >= meterStep && !m.flush() {
		return 0, io.ErrShortWrite
	}
	return n, nil
}

// flush takes what the buffer holds beyond what it has taken, and reports
// whether the budget had it.
func (m *meteredBuffer) flush() bool {
	if need := int64(m.Len()) - m.taken; need > 0 {
		if !m.take(need) {
			m.over = true
			return false
		}
		m.taken += need
	}
	return true
}

// teeScanner reads a stream through a buffered reader and keeps what it
// reads in seen. It is an io.ByteScanner, so the msgpack decoder reads
// from it byte by byte without reading ahead of the message.
type teeScanner struct {
	br   *bufio.Reader
	seen *meteredBuffer
}

func (t *teeScanner) Read(p []byte) (int, error) {
	n, err := t.br.Read(p)
	if n > 0 {
		if _, werr := t.seen.Write(p[:n]); werr != nil {
			return n, werr
		}
	}
	return n, err
}

func (t *teeScanner) ReadByte() (byte, error) {
	b, err := t.br.ReadByte()
	if err != nil {
		return 0, err
	}
	if _, err := t.seen.Write([]byte{b}); err != nil {
		return 0, err
	}
	return b, nil
}

func (t *teeScanner) UnreadByte() error {
	if err := t.br.UnreadByte(); err != nil {
		return err
	}
	t.seen.Truncate(t.seen.Len() - 1)
	return nil
}

func remoteIP(conn net.Conn) string {
	if a, ok := conn.RemoteAddr().(*net.TCPAddr); ok {
		return a.IP.String()
	}
	return addrString(conn.RemoteAddr())
}

func (g *guard) acceptPackets() {
	defer g.wg.Done()
	in := g.NetTransport.PacketCh()
	for {
		select {
		case p := <-in:
			if err := inspectPacket(p.Buf, g.keys); err != nil {
				g.logger.failed("packet", p.From, err)
				continue
			}
			select {
			case g.packetCh <- p:
			case <-g.stopping:
			}
		case <-g.listenersDone:
			return
		}
	}
}

// replayConn is a connection whose first bytes, read by the guard, are
// read again from r. Closing it gives its bytes back to the budget.
type replayConn struct {
	net.Conn
	r       io.Reader
	release func()
	once    sync.Once
}

func (c *replayConn) Read(p []byte) (int, error) { return c.r.Read(p) }

func (c *replayConn) Close() error {
	c.once.Do(c.release)
	return c.Conn.Close()
}

// replyConn is an outbound stream: the first time memberlist reads the
// reply, the guard inspects it.
type replyConn struct {
	net.Conn
	g       *guard
	mu      sync.Mutex // held while inspecting: memberlist reads from one goroutine
	checked *replayConn
	err     error
}

func (c *replyConn) Read(p []byte) (int, error) {
	c.mu.Lock()
	if c.checked == nil && c.err == nil {
		c.checked, c.err = c.g.check(c.Conn)
		if c.err != nil {
			c.g.logger.failed("reply", c.Conn.RemoteAddr(), c.err)
		}
	}
	checked, err := c.checked, c.err
	c.mu.Unlock()
	if err != nil {
		return 0, err
	}
	return checked.Read(p)
}

// Close closes the connection first, which ends an inspection under way,
// then gives back what the reply held of the budget.
func (c *replyConn) Close() error {
	err := c.Conn.Close()
	c.mu.Lock()
	checked := c.checked
	c.mu.Unlock()
	if checked != nil {
		checked.once.Do(checked.release)
	}
	return err
}

// budget counts bytes held at once, in all and per remote IP.
type budget struct {
	mu    sync.Mutex
	limit int64
	perIP int64
	total int64
	held  map[string]int64
}

func (b *budget) take(ip string, n int64) bool {
	if n == 0 {
		return true
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.total+n > b.limit || b.held[ip]+n > b.perIP {
		return false
	}
	b.total += n
	b.held[ip] += n
	return true
}

func (b *budget) give(ip string, n int64) {
	if n == 0 {
		return
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	b.total -= n
	if b.held[ip] -= n; b.held[ip] == 0 {
		delete(b.held, ip)
	}
}

// refusalLog logs refused gossip at most once a second, counting what it
// did not log, so a flood of refusals does not become a flood of log lines.
// A stream that could not be read (the peer hung up or timed out) is
// logged at debug level only, as memberlist would have met the same.
type refusalLog struct {
	logger     hclog.Logger
	mu         sync.Mutex
	last       time.Time
	suppressed int
}

func (l *refusalLog) failed(what string, from net.Addr, err error) {
	if !isRefusal(err) {
		if err != io.EOF {
			l.logger.Debug("could not read the head of a gossip "+what, "from", addrString(from), "error", err)
		}
		return
	}
	l.mu.Lock()
	now := time.Now()
	if now.Sub(l.last) < time.Second {
		l.suppressed++
		l.mu.Unlock()
		return
	}
	n := l.suppressed
	l.last, l.suppressed = now, 0
	l.mu.Unlock()
	l.logger.Warn("refused gossip "+what+" before decoding it", "from", addrString(from), "error", err, "refused_since_last_line", n)
}

func addrString(a net.Addr) string {
	if a == nil {
		return "unknown"
	}
	return a.String()
}
