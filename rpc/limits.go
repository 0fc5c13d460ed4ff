package rpc

import (
	"net"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/yamux"
)

// Limits bounds what one client can hold of a Listener (SPEC §15), so that
// a flood from one client leaves every other client served. Zero fields
// take the defaults of DefaultLimits.
type Limits struct {
	// MaxConnsPerClient bounds the connections one client IP may hold open
	// at once, of every type (RPC, multiplexed, Raft). Connections past it
	// are closed as soon as they are accepted.
	MaxConnsPerClient int
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
}

// Defaults of Limits (SPEC §15).
const (
	DefaultMaxConnsPerClient = 100
	DefaultIdleTimeout       = 5*time.Minute + 30*time.Second
	DefaultMaxStreamsPerConn = 256
)

// DefaultLimits returns the limits a Listener applies unless told others.
func DefaultLimits() Limits {
	return Limits{
		MaxConnsPerClient: DefaultMaxConnsPerClient,
		HandshakeTimeout:  HandshakeTimeout,
		IdleTimeout:       DefaultIdleTimeout,
		MaxStreamsPerConn: DefaultMaxStreamsPerConn,
	}
}

// WithDefaults returns l with its zero fields taken from DefaultLimits.
func (l Limits) WithDefaults() Limits {
	d := DefaultLimits()
	if l.MaxConnsPerClient <= 0 {
		l.MaxConnsPerClient = d.MaxConnsPerClient
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

// clientCounts counts the open connections of each client IP.
type clientCounts struct {
	mu         sync.Mutex
	open       map[string]int
	refused    int // connections refused, ever
	lastWarned time.Time
}

// admit counts a new connection from ip, or refuses it at the limit.
func (c *clientCounts) admit(ip string, limit int) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.open == nil {
		c.open = map[string]int{}
	}
	if c.open[ip] >= limit {
		c.refused++
		return false
	}
	c.open[ip]++
	return true
}

func (c *clientCounts) release(ip string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.open[ip]--; c.open[ip] <= 0 {
		delete(c.open, ip)
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

// clientIP is the IP a connection comes from, the unit of the per-client
// limit.
func clientIP(addr net.Addr) string {
	if a, ok := addr.(*net.TCPAddr); ok {
		return a.IP.String()
	}
	if host, _, err := net.SplitHostPort(addr.String()); err == nil {
		return host
	}
	return addr.String()
}

// admit applies the per-client limit to a newly accepted connection and
// starts its handshake deadline. It returns the connection to serve, or
// nil if it was refused (and closed).
func (l *Listener) admit(conn net.Conn) net.Conn {
	ip := clientIP(conn.RemoteAddr())
	if !l.clients.admit(ip, l.limits.MaxConnsPerClient) {
		if l.clients.shouldWarn(time.Now()) {
			l.logger.Warn("refusing connections from a client at its connection limit (further refusals logged at most every 10s)",
				"client", ip, "limit", l.limits.MaxConnsPerClient)
		}
		conn.Close()
		return nil
	}
	lc := &limitedConn{Conn: conn, ip: ip, clients: &l.clients, deadline: time.Now().Add(l.limits.HandshakeTimeout)}
	lc.activity = activity{conn: lc, idle: l.limits.IdleTimeout, logger: l.logger}
	conn.SetReadDeadline(lc.deadline)
	return lc
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
}

func (c *limitedConn) Close() error {
	err := c.Conn.Close()
	c.once.Do(func() {
		c.clients.release(c.ip)
		c.activity.stop()
	})
	return err
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
// requests to its connection's activity.
type trackedConn struct {
	net.Conn
	activity *activity
	// stream is set for a multiplexed stream: its first whole request
	// ends its own handshake deadline.
	stream  bool
	started atomic.Bool
}

func (t *trackedConn) requestBegin() {
	if t.stream && !t.started.Swap(true) {
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
func (l *Listener) admitStream(c *streamCap, session *yamux.Session, stream net.Conn, remote net.Addr) bool {
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
