package rpc

import (
	"fmt"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/yamux"
)

// Limits bounds what one client can hold of a Listener, so that a flood
// from one client leaves every other client served. A client is a source
// IP and, once a TLS handshake has proved one, the role of the peer's
// certificate (clientKey): an agent, the AMs and the CLI on one host are
// three clients, and client traffic never takes a server's or an agent's
// allowance. Zero fields take the defaults of DefaultLimits.
type Limits struct {
	// MaxConnsPerClient bounds the connections one client may hold open
	// at once, of every type (RPC, multiplexed, Raft), once they have
	// finished their handshake. A connection past it is closed.
	MaxConnsPerClient int
	// MaxHandshakesPerClient bounds the connections one source IP may
	// hold open before they have said who they are (the type byte, and
	// with TLS the whole handshake): connections past it are closed as
	// soon as they are accepted.
	MaxHandshakesPerClient int
	// HandshakeTimeout bounds the time from accepting a connection to
	// reading its first whole request: the type byte (and TLS handshake),
	// for a multiplexed connection its first stream, and that request.
	// Every new stream must deliver its first whole request within it too.
	HandshakeTimeout time.Duration
	// IdleTimeout closes a connection (every stream of a multiplexed one)
	// that has had no request in flight and received no new one for this
	// long. A blocking query in flight keeps its connection busy.
	IdleTimeout time.Duration
	// MaxStreamsPerConn bounds the streams served at once on one
	// multiplexed connection; further streams are closed unserved. weft's
	// own clients open at most PoolMaxStreamsPerConn per connection, so a
	// smaller value refuses the streams of busy weft clients.
	MaxStreamsPerConn int
	// RequestMemory bounds the bytes the process holds for requests (see
	// memory.go): callers without a server, agent or router certificate
	// share at most half of it. RequestMemoryPerClient bounds one
	// client's share, RequestMemoryPerConn one connection's. A caller
	// whose request would take its share past a bound is cut off: its
	// connection is closed.
	RequestMemory          int64
	RequestMemoryPerClient int64
	RequestMemoryPerConn   int64
	// RefusedReadAllowance is how many bytes of refused requests a client
	// may make the process read past (and connections of it may be cut
	// off for their memory) before its connections are read slowly;
	// RefusedReadRate is the bytes a second it is then read at, and how
	// fast what it owes is paid off (see refusals.go).
	RefusedReadAllowance int64
	RefusedReadRate      int64
}

// Defaults of Limits. A connection's share fits one request of the
// largest size (MaxRequestSize on the wire and as much decoded) with room
// to spare; a client's, two such connections; the process's, what a
// leader of thousands of agents holds at once, with half kept for them
// and the other servers whatever clients do. A client may be refused two
// requests of the largest size before it is read slowly, and is then read
// at 4 MiB/s: a few percent of a core for TLS and scanning.
const (
	DefaultMaxConnsPerClient      = 100
	DefaultMaxHandshakesPerClient = 32
	DefaultIdleTimeout            = 5*time.Minute + 30*time.Second
	DefaultMaxStreamsPerConn      = 256
	DefaultRequestMemory          = 256 << 20
	DefaultRequestMemoryPerClient = 48 << 20
	DefaultRequestMemoryPerConn   = 24 << 20
	DefaultRefusedReadAllowance   = 2 * MaxRequestSize
	DefaultRefusedReadRate        = 4 << 20
)

// DefaultLimits returns the limits a Listener applies unless told others.
func DefaultLimits() Limits {
	return Limits{
		MaxConnsPerClient:      DefaultMaxConnsPerClient,
		MaxHandshakesPerClient: DefaultMaxHandshakesPerClient,
		HandshakeTimeout:       HandshakeTimeout,
		IdleTimeout:            DefaultIdleTimeout,
		MaxStreamsPerConn:      DefaultMaxStreamsPerConn,
		RequestMemory:          DefaultRequestMemory,
		RequestMemoryPerClient: DefaultRequestMemoryPerClient,
		RequestMemoryPerConn:   DefaultRequestMemoryPerConn,
		RefusedReadAllowance:   DefaultRefusedReadAllowance,
		RefusedReadRate:        DefaultRefusedReadRate,
	}
}

// WithDefaults returns l with its zero fields taken from DefaultLimits.
func (l Limits) WithDefaults() Limits {
	d := DefaultLimits()
	if l.MaxConnsPerClient <= 0 {
		l.MaxConnsPerClient = d.MaxConnsPerClient
	}
	if l.MaxHandshakesPerClient <= 0 {
		l.MaxHandshakesPerClient = d.MaxHandshakesPerClient
	}
	if l.HandshakeTimeout <= 0 {
		l.HandshakeTimeout = d.HandshakeTimeout
	}
	if l.IdleTimeout <= 0 {
		l.IdleTimeout = d.IdleTimeout
	}
	if l.MaxStreamsPerConn <= 0 {
		l.MaxStreamsPerConn = d.MaxStreamsPerConn
	}
	if l.RequestMemory <= 0 {
		l.RequestMemory = d.RequestMemory
	}
	if l.RequestMemoryPerClient <= 0 {
		l.RequestMemoryPerClient = d.RequestMemoryPerClient
	}
	if l.RequestMemoryPerConn <= 0 {
		l.RequestMemoryPerConn = d.RequestMemoryPerConn
	}
	if l.RefusedReadAllowance <= 0 {
		l.RefusedReadAllowance = d.RefusedReadAllowance
	}
	if l.RefusedReadRate <= 0 {
		l.RefusedReadRate = d.RefusedReadRate
	}
	return l
}

// ListenerOption configures a Listener.
type ListenerOption func(*Listener)

// WithLimits makes a Listener apply limits instead of DefaultLimits.
func WithLimits(limits Limits) ListenerOption {
	return func(l *Listener) { l.limits = limits.WithDefaults() }
}

// WithRaftRole lets only peers with a certificate of role open Raft on
// the listener (with TLS on); RoleServer unless said otherwise. A router
// passes RoleRouter: a server's certificate must not vote among routers.
func WithRaftRole(role Role) ListenerOption {
	return func(l *Listener) { l.raftRole = role }
}

// serverStreamCloseTimeout frees a stream this side closed when the peer
// never acknowledges the close (yamux's default holds it 5 minutes).
const serverStreamCloseTimeout = 30 * time.Second

// serverYamuxConfig is YamuxConfig for the accepting side.
func (l *Listener) serverYamuxConfig() *yamux.Config {
	c := YamuxConfig()
	c.StreamCloseTimeout = serverStreamCloseTimeout
	return c
}

// clientKey is who a connection comes from, the unit of the per-client
// limits: its source IP and, once a TLS handshake has proved one, the role
// of its certificate (empty without TLS, or for a peer without a
// certificate).
type clientKey struct {
	ip   string
	role Role
}

// peer reports whether the client holds a certificate of the cluster's
// own processes (server, agent, router).
func (k clientKey) peer() bool {
	return k.role == RoleServer || k.role == RoleAgent || k.role == RoleRouter
}

func (k clientKey) String() string {
	if k.role == "" {
		return k.ip
	}
	return fmt.Sprintf("%s (%s certificate)", k.ip, k.role)
}

// clientCounts counts the connections of each source IP still in their
// handshake, and those of each client past it.
type clientCounts struct {
	mu          sync.Mutex
	handshaking map[string]int
	open        map[clientKey]int
	refused     int // connections refused, ever
	lastWarned  time.Time
}

// admit counts a new connection from ip as in its handshake, or refuses
// it at the limit.
func (c *clientCounts) admit(ip string, limit int) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.handshaking == nil {
		c.handshaking, c.open = map[string]int{}, map[clientKey]int{}
	}
	if c.handshaking[ip] >= limit {
		c.refused++
		return false
	}
	c.handshaking[ip]++
	return true
}

// identify moves lc from its IP's handshakes to its client's connections,
// or refuses it (false) when the client is at its limit or lc has closed.
func (c *clientCounts) identify(lc *limitedConn, key clientKey, limit int) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	if lc.released || lc.identified {
		return !lc.released
	}
	if c.open[key] >= limit {
		c.refused++
		return false
	}
	decrement(c.handshaking, lc.ip)
	c.open[key]++
	lc.key, lc.identified = key, true
	return true
}

// release gives lc's place back.
func (c *clientCounts) release(lc *limitedConn) {
	c.mu.Lock()
	defer c.mu.Unlock()
	lc.released = true
	if lc.identified {
		decrement(c.open, lc.key)
	} else {
		decrement(c.handshaking, lc.ip)
	}
}

func decrement[K comparable](m map[K]int, k K) {
	if m[k]--; m[k] <= 0 {
		delete(m, k)
	}
}

// shouldWarn rate-limits warnings about refused connections to one every
// refusalWarnEvery, so that a flood does not flood the log too.
func (c *clientCounts) shouldWarn(now time.Time) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	if now.Sub(c.lastWarned) < refusalWarnEvery {
		return false
	}
	c.lastWarned = now
	return true
}

const refusalWarnEvery = 10 * time.Second

// clientIP is the IP a connection comes from.
func clientIP(addr net.Addr) string {
	if a, ok := addr.(*net.TCPAddr); ok {
		return a.IP.String()
	}
	if host, _, err := net.SplitHostPort(addr.String()); err == nil {
		return host
	}
	return addr.String()
}

// admit applies the per-IP limit on handshakes to a newly accepted
// connection and starts its handshake deadline. It returns the connection
// to serve, or nil if it was refused (and closed).
func (l *Listener) admit(conn net.Conn) net.Conn {
	ip := clientIP(conn.RemoteAddr())
	if !l.clients.admit(ip, l.limits.MaxHandshakesPerClient) {
		if l.clients.shouldWarn(time.Now()) {
			l.logger.Warn("refusing connections from an address at its limit of connections in their handshake (further refusals logged at most every 10s)",
				"client", ip, "limit", l.limits.MaxHandshakesPerClient)
		}
		conn.Close()
		return nil
	}
	lc := &limitedConn{Conn: conn, ip: ip, clients: &l.clients, deadline: time.Now().Add(l.limits.HandshakeTimeout), done: make(chan struct{})}
	lc.activity = activity{conn: lc, idle: l.limits.IdleTimeout, logger: l.logger}
	conn.SetReadDeadline(lc.deadline)
	return lc
}

// identify counts an admitted connection, whose handshake has just said
// who its peer is, under its client; unless it carries Raft it also opens
// its account of request memory (nil for Raft). It fails, and the caller
// closes the connection, when the client is at its connection limit or its
// share of memory has no room for one more connection.
func (l *Listener) identify(conn net.Conn, info *ConnInfo, t ConnType) (*connMemory, error) {
	lc := limitedConnOf(conn)
	if lc == nil {
		return nil, nil // served directly, not accepted: not counted
	}
	key := clientKey{ip: lc.ip, role: info.Role}
	if !l.clients.identify(lc, key, l.limits.MaxConnsPerClient) {
		return nil, fmt.Errorf("%s holds %d connections, its limit (rpc_max_conns_per_client)", key, l.limits.MaxConnsPerClient)
	}
	if t == ConnRaft {
		return nil, nil
	}
	mem, err := l.mem.open(key, func() { lc.Close() })
	if err != nil {
		return nil, err
	}
	lc.mem = mem
	return mem, nil
}

// handshakeDeadline is when an admitted connection's handshake ends (the
// type byte, any TLS handshake, the first whole request).
func handshakeDeadline(conn net.Conn) time.Time {
	if lc := limitedConnOf(conn); lc != nil {
		return lc.deadline
	}
	return time.Now().Add(HandshakeTimeout)
}

// limitedConn is an admitted connection: closing it gives its client's
// slot back.
type limitedConn struct {
	net.Conn
	deadline time.Time // of the handshake
	ip       string
	clients  *clientCounts
	once     sync.Once
	activity activity
	mem      *connMemory   // set once identified, unless it carries Raft
	done     chan struct{} // closed by Close

	// Under clients.mu: which count holds the connection.
	key        clientKey
	identified bool
	released   bool
}

func (c *limitedConn) Close() error {
	err := c.Conn.Close()
	c.once.Do(func() {
		close(c.done)
		c.clients.release(c)
		c.activity.stop()
	})
	return err
}

// Read reads once the client has paid off what refused requests made it
// owe beyond its allowance (refusals.go).
func (c *limitedConn) Read(p []byte) (int, error) {
	c.mem.throttle(c.done)
	return c.Conn.Read(p)
}

// NetConn returns the accepted connection, as tls.Conn does.
func (c *limitedConn) NetConn() net.Conn { return c.Conn }

// limitedConnOf finds the admitted connection under conn (which may be
// wrapped, in TLS for instance), or nil.
func limitedConnOf(conn net.Conn) *limitedConn {
	for conn != nil {
		if lc, ok := conn.(*limitedConn); ok {
			return lc
		}
		u, ok := conn.(interface{ NetConn() net.Conn })
		if !ok {
			return nil
		}
		conn = u.NetConn()
	}
	return nil
}

// activity follows the requests of one connection (all the streams of a
// multiplexed one): the first whole request ends the handshake deadline;
// from then on the connection is closed once it has had no request in
// flight and no new request for the idle timeout.
type activity struct {
	conn   net.Conn // the accepted connection
	idle   time.Duration
	logger hclog.Logger
	onIdle func() // closes what is idle; conn.Close if nil

	mu       sync.Mutex
	started  bool
	stopped  bool
	inflight int
	last     time.Time
	timer    *time.Timer
}

func (a *activity) requestBegin() {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.inflight++
	a.last = time.Now()
	if !a.started && !a.stopped {
		a.started = true
		a.conn.SetReadDeadline(time.Time{}) // the handshake is over
		a.timer = time.AfterFunc(a.idle, a.checkIdle)
	}
}

func (a *activity) requestEnd() {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.inflight--
	a.last = time.Now()
}

// checkIdle closes the connection if it has been idle for the timeout, and
// otherwise looks again when it could first have been.
func (a *activity) checkIdle() {
	a.mu.Lock()
	if a.stopped {
		a.mu.Unlock()
		return
	}
	since := time.Since(a.last)
	if a.inflight > 0 || since < a.idle {
		a.timer.Reset(max(a.idle-since, time.Millisecond))
		a.mu.Unlock()
		return
	}
	a.stopped = true
	onIdle := a.onIdle
	a.mu.Unlock()
	a.logger.Debug("closing idle connection", "remote", a.conn.RemoteAddr(), "idle_timeout", a.idle)
	if onIdle != nil {
		onIdle()
	} else {
		a.conn.Close()
	}
}

func (a *activity) setOnIdle(f func()) {
	a.mu.Lock()
	a.onIdle = f
	a.mu.Unlock()
}

func (a *activity) stop() {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.stopped = true
	if a.timer != nil {
		a.timer.Stop()
	}
}

// trackedConn is a connection or stream served by ServeConn, reporting its
// requests to its connection's activity and charging what it holds to
// the connection's request memory.
type trackedConn struct {
	net.Conn
	activity *activity
	mem      *connMemory // nil: not accounted
	// stream is set for a multiplexed stream: its first whole request
	// ends its own handshake deadline. Reading from it gives back what
	// meter charged for the bytes yamux held.
	stream   *yamux.Stream
	meter    *yamuxMeter
	started  atomic.Bool
	unshrunk int // bytes read from stream since yamux last let go of its buffer
}

// shrinkAfter is how many bytes a stream reads between the times yamux is
// told to let go of its receive buffer: it keeps the buffer, as large as
// the largest burst the stream ever received (up to twice that), for the
// stream's whole life otherwise. Streams of small requests thus give back
// a buffer of at most about 2×shrinkAfter, and allocate a new one only
// every shrinkAfter bytes.
const shrinkAfter = 16 << 10

// Read reads from the connection or stream; a stream's read gives back
// what the meter charged for the bytes, and has yamux let go of its
// receive buffer once it is empty (see shrinkAfter).
func (t *trackedConn) Read(p []byte) (int, error) {
	if t.stream == nil {
		return t.Conn.Read(p)
	}
	if t.unshrunk >= shrinkAfter {
		t.stream.Shrink() // frees the buffer if empty, as it is when this read is about to wait
	}
	n, err := t.stream.Read(p)
	t.meter.consumed(n)
	t.unshrunk += n
	if n < len(p) && t.unshrunk >= shrinkAfter {
		t.stream.Shrink() // the read took all the buffer held
		t.unshrunk = 0
	}
	return n, err
}

func (t *trackedConn) requestMemory() *connMemory { return t.mem }

func (t *trackedConn) requestBegin() {
	if t.stream != nil && !t.started.Swap(true) {
		t.Conn.SetReadDeadline(time.Time{})
	}
	t.activity.requestBegin()
}

func (t *trackedConn) requestEnd() { t.activity.requestEnd() }

// streamCap counts the streams served at once on one multiplexed
// connection.
type streamCap struct {
	open    atomic.Int32
	refused atomic.Int32
	running sync.WaitGroup // the streams being served
}

// activityOf returns the activity of the admitted connection under conn;
// a connection that was not admitted (served directly) gets its own.
func (l *Listener) activityOf(conn net.Conn) *activity {
	if lc := limitedConnOf(conn); lc != nil {
		return &lc.activity
	}
	return &activity{conn: conn, idle: l.limits.IdleTimeout, logger: l.logger}
}

// admitStream counts a newly accepted stream against the per-connection
// cap, or closes it unserved. A client that keeps opening streams past the
// cap faster than closed ones go away loses its whole session.
func (l *Listener) admitStream(c *streamCap, session *yamux.Session, stream *yamux.Stream, remote net.Addr) bool {
	limit := int32(l.limits.MaxStreamsPerConn)
	if c.open.Add(1) <= limit {
		return true
	}
	c.open.Add(-1)
	stream.Close()
	if c.refused.Add(1) == 1 {
		l.logger.Warn("closing streams past the per-connection stream limit", "remote", remote, "limit", limit)
	}
	if session.NumStreams() > 2*int(limit) {
		l.logger.Warn("closing a multiplexed connection that keeps opening streams past its limit", "remote", remote,
			"streams", session.NumStreams(), "limit", limit)
		session.Close()
	}
	return false
}
