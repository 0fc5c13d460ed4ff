package rpc

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/rpc"
	"reflect"
	"runtime/debug"
	"sort"
	"sync"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/weft-sched/weft/internal/gopool"
	"github.com/weft-sched/weft/internal/metrics"
)

// Server dispatches msgpack RPC requests (net/rpc framing: a request
// header naming "Service.Method", then the body) to handlers registered
// with Register. Each request is handled with a context that carries the
// connection it came on (ConnInfoFrom), ends when the connection closes,
// and has the deadline its caller asked for (RequestHeader.Timeout).
// Errors reach the caller with their code (see Error); a handler that
// panics is logged and answered with ErrInternal, and the process goes on.
// Register every method before serving.
type Server struct {
	logger      hclog.Logger
	methods     map[string]*method
	maxInflight int
	handlers    *gopool.Pool
	// Authorize, if set, runs before every handler with the method's
	// declared capability; an error is the answer and the handler does not
	// run. The context it returns (for example with the caller's resolved
	// ACL) is the handler's. Set it before serving.
	Authorize func(ctx context.Context, method string, c Capability, args any) (context.Context, error)
	// AuthorizeHeader, if set, checks the credential a request's header
	// carries (an ACL or a workload token; "" when the header has none)
	// for a method whose capability asks for a token, before the body is
	// read: see ServeConn. It checks what it can without the body (the
	// token is valid, and holds the method-wide part of an ACL
	// capability). The context it returns is the one Authorize gets. Set
	// it before serving.
	AuthorizeHeader func(ctx context.Context, method string, c Capability, token string) (context.Context, error)
}

type method struct {
	capability Capability
	maxBody    int // bytes of the body on the wire; see MaxBody
	reqType    reflect.Type
	newArgs    func() any
	call       func(ctx context.Context, args any) (any, error)
}

// DefaultMaxBody bounds a request body on the wire unless its method says
// otherwise (MaxBody): above every request weft sends to a method that
// does not, far below what a method that takes whole queue trees or
// heartbeats of thousands of containers needs.
const DefaultMaxBody = 16 << 10

// Bounds for MaxBody, from weft's own largest requests: MaxSpecBody for an
// app spec or a whole queue tree (App.Submit of a MapReduce job of 10,000
// splits is 1.1 MB, Queue.Apply of 1,000 queues 280 KB), MaxListBody for
// requests that list up to thousands of names or counters (Container.Status
// of 10,000 IDs is 130 KB, AM.Finish with 1,024 counters 75 KB).
// Heartbeats (10,000 containers are 2.6 MB) and AM.Allocate (reduce asks
// with thousands of feeders) take MaxRequestSize.
const (
	MaxSpecBody = 4 << 20
	MaxListBody = 1 << 20
)

// MethodOption changes how Register serves a method.
type MethodOption func(*method)

// MaxBody lets the method's request body take up to n bytes on the wire
// (at most MaxRequestSize), and decode to up to decodeBudget(n). The
// bound holds for a caller that proved its credential before the body:
// its certificate's role for a method whose capability asks for one, its
// token (in the request header, checked by AuthorizeHeader) for a method
// whose capability asks for a token; another caller gets DefaultMaxBody.
// A public method takes no more than DefaultMaxBody.
func MaxBody(n int) MethodOption {
	return func(m *method) { m.maxBody = min(n, MaxRequestSize) }
}

// decodeBudget is what a body of at most maxBody bytes may decode to: a
// struct decoded from an empty map takes far more than its one byte, and
// a weft request's decoded size is a few times its encoded one.
func decodeBudget(maxBody int) int64 {
	return min(8*int64(maxBody), MaxRequestSize)
}

// Handlers run on a pool of goroutines that outlive one request
// (internal/gopool): a goroutine per request grew its stack again, by
// copying, for every request.
const (
	maxIdleHandlers    = 512
	handlerIdleTimeout = 30 * time.Second
)

// DefaultMaxInflight bounds the requests of one connection (or multiplexed
// stream) handled at once; further requests wait to be read.
const DefaultMaxInflight = 64

// NewServer returns a server with no methods.
func NewServer(logger hclog.Logger) *Server {
	if logger == nil {
		logger = hclog.NewNullLogger()
	}
	return &Server{logger: logger, methods: map[string]*method{}, maxInflight: DefaultMaxInflight, handlers: gopool.New(maxIdleHandlers, handlerIdleTimeout)}
}

// Register makes fn answer the method name ("Service.Method"), for callers
// with capability c (see Capability; every method declares one). fn gets
// the request's context, the decoded request and a zero response to fill.
// Its request body takes at most DefaultMaxBody bytes unless an option
// says otherwise (MaxBody). Registering a name twice, or with no
// capability, panics, as does a request type whose decoding cannot be
// bounded (see checkDecodeCost) and a public method with a larger body:
// all are programming errors.
func Register[Req, Resp any](s *Server, name string, c Capability, fn func(ctx context.Context, req *Req, resp *Resp) error, opts ...MethodOption) {
	if _, dup := s.methods[name]; dup {
		panic("rpc: method registered twice: " + name)
	}
	if c == "" {
		panic("rpc: method registered without a capability: " + name)
	}
	reqType := reflect.TypeFor[Req]()
	if _, err := planFor(reqType); err != nil {
		panic(fmt.Sprintf("rpc: %s: %v", name, err)) // its decoding could not be bounded
	}
	m := &method{
		capability: c,
		maxBody:    DefaultMaxBody,
		reqType:    reqType,
		newArgs:    func() any { return new(Req) },
		call: func(ctx context.Context, args any) (any, error) {
			resp := new(Resp)
			err := fn(ctx, args.(*Req), resp)
			return resp, err
		},
	}
	for _, o := range opts {
		o(m)
	}
	if c == CapPublic && m.maxBody > DefaultMaxBody {
		panic("rpc: a public method may not take a body larger than DefaultMaxBody: " + name)
	}
	s.methods[name] = m
}

// Methods returns the registered method names, sorted.
func (s *Server) Methods() []string {
	out := make([]string, 0, len(s.methods))
	for name := range s.methods {
		out = append(out, name)
	}
	sort.Strings(out)
	return out
}

// RequestType returns the type a method's request decodes into, or nil if
// no such method is registered.
func (s *Server) RequestType(name string) reflect.Type {
	if m := s.methods[name]; m != nil {
		return m.reqType
	}
	return nil
}

// Capabilities returns every registered method's capability.
func (s *Server) Capabilities() map[string]Capability {
	out := make(map[string]Capability, len(s.methods))
	for name, m := range s.methods {
		out[name] = m.capability
	}
	return out
}

// ConnInfo describes the connection a request arrived on, with the peer's
// verified identity when it came over TLS (RequireRole checks it).
type ConnInfo struct {
	RemoteAddr net.Addr
	// LocalAddr is this end's address (nil in process).
	LocalAddr net.Addr
	// TLS is true for a connection that came over TLS; Role and CommonName
	// are then those of the peer's verified certificate.
	TLS bool
	// Role is the role the peer's certificate holds in this region; empty
	// without TLS or for a peer without a certificate.
	Role Role
	// CommonName is the subject common name of the peer's certificate.
	CommonName string
	// HTTP is true for a request that came through the HTTP API (Call):
	// its client holds no certificate, so methods that ask a certificate
	// role or a workload token are refused to it.
	HTTP bool
	// peer caches PeerUID's answer for the connection (shared by its
	// streams' copies).
	peer *peerUID
}

// peerUID is what PeerUID found of a connection's peer.
type peerUID struct {
	once sync.Once
	uid  uint32
	ok   bool
}

// PeerUID returns the uid of the process at the other end of the
// connection, as find tells it from the connection's two addresses (the
// kernel's socket table, on an agent), looked up once a connection; false
// for a peer find does not know (on another host), and for a call made in
// process.
func (ci *ConnInfo) PeerUID(find func(remote, local net.Addr) (uint32, bool)) (uint32, bool) {
	if ci == nil || ci.peer == nil || ci.RemoteAddr == nil || ci.LocalAddr == nil {
		return 0, false
	}
	ci.peer.once.Do(func() { ci.peer.uid, ci.peer.ok = find(ci.RemoteAddr, ci.LocalAddr) })
	return ci.peer.uid, ci.peer.ok
}

type connInfoKey struct{}

// ConnInfoFrom returns the connection a request arrived on, or nil for a
// call made in process.
func ConnInfoFrom(ctx context.Context) *ConnInfo {
	ci, _ := ctx.Value(connInfoKey{}).(*ConnInfo)
	return ci
}

// maxRequestTimeout caps the deadline a caller may ask for: the longest
// blocking query plus the time to forward it.
const maxRequestTimeout = MaxBlockingWait + MaxBlockingWait/16 + DefaultCallTimeout

// requestTimeout is the deadline a request asks for.
func requestTimeout(args any) time.Duration {
	h, ok := args.(interface{ Header() *RequestHeader })
	if !ok {
		return DefaultCallTimeout
	}
	hdr := h.Header()
	t := hdr.Timeout
	if t <= 0 {
		t = hdr.callTimeout()
	}
	return min(t, maxRequestTimeout)
}

// ServeConn serves requests on one connection (or multiplexed stream) until
// it closes or ctx ends. A request that cannot be decoded closes the
// connection with a logged reason; it never takes the process down.
//
// Each request's header is read first, and the caller's credential
// checked before its body is read. A caller without the certificate role
// the method's capability asks for (or calling a method that does not
// exist) is answered with the reason and its body stepped over without
// being kept. A method that takes more than DefaultMaxBody (MaxBody), and
// whose capability asks for a token, takes it only from a caller whose
// header carries a token that AuthorizeHeader accepts; from any other
// (an older client sends its token in the body only) it takes
// DefaultMaxBody. Every request's token is then checked once its body is
// decoded (Authorize), as before.
func (s *Server) ServeConn(ctx context.Context, conn io.ReadWriteCloser, info *ConnInfo) {
	ctx, cancel := context.WithCancel(context.WithValue(ctx, connInfoKey{}, info))
	defer cancel()
	var remote any
	if info != nil {
		remote = info.RemoteAddr
	}
	sc := NewServerCodec(conn, func(err error) {
		s.logger.Warn("dropping RPC connection", "remote", remote, "error", err)
	})
	stop := context.AfterFunc(ctx, func() { conn.Close() }) // unblocks the reader when the server stops
	defer stop()
	track, _ := conn.(requestTracker)
	if track == nil {
		track = noTracker{}
	}
	var wg sync.WaitGroup
	sem := make(chan struct{}, s.maxInflight)
	defer func() {
		cancel()
		wg.Wait()
		sc.Close()
	}()
	for {
		c, next := s.readRequest(ctx, sc, track)
		if c == nil {
			if next {
				continue
			}
			return
		}
		track.requestBegin()
		select {
		case sem <- struct{}{}:
		case <-ctx.Done():
			sc.rd.mem.give(c.cost)
			c.put()
			track.requestEnd()
			return
		}
		wg.Add(1)
		s.handlers.Go(func() {
			defer wg.Done()
			defer func() { <-sem }()
			reply, err := s.invoke(c.ctx, c.req.ServiceMethod, c.m, c.args)
			s.respond(sc, c, reply, err)
			sc.rd.mem.give(c.cost)
			c.put()
			track.requestEnd()
		})
	}
}

// readRequest reads the next request off sc: its header, then, if the
// caller may send it, its body (see ServeConn). It returns the request to
// handle; or nil and whether the connection goes on, when the request was
// answered here (refused) or the connection must end.
func (s *Server) readRequest(ctx context.Context, sc *ServerCodec, track requestTracker) (_ *serverCall, next bool) {
	mem := sc.rd.mem
	c := serverCalls.Get().(*serverCall)
	c.req = rpc.Request{}
	if err := sc.ReadRequestHeader(&c.req); err != nil {
		c.put()
		if errors.Is(err, errNoMemory) {
			mem.cut()
		}
		return nil, false
	}
	m := s.methods[c.req.ServiceMethod]
	reqCtx, limit, unproven, err := s.admitBody(ctx, c.req.ServiceMethod, m, sc.token)
	if err != nil {
		track.requestBegin()
		s.respond(sc, c, nil, err)
		c.put()
		track.requestEnd()
		return nil, sc.discardBody(MaxRequestSize) == nil
	}
	args := m.newArgs()
	cost, err := sc.readBody(args, limit, MaxRequestSize, decodeBudget(limit))
	if err == nil {
		err = matchCredential(c.req.ServiceMethod, sc.token, args)
	} else if !errors.Is(err, ErrTooLarge) && !errors.Is(err, errNoMemory) {
		c.put() // not answered: the connection ends, or the request was malformed
		return nil, !sc.broken.Load()
	}
	if err == nil {
		c.m, c.args, c.ctx, c.cost = m, args, reqCtx, cost
		return c, true
	}
	var skipped *skippedBody
	if errors.As(err, &skipped) && unproven != nil {
		err = unproven // the body was larger than an unproven caller may send: say why that bound held
	}
	mem.give(cost)
	s.respond(sc, c, nil, err) // say why, even if the connection closes
	c.put()
	if errors.Is(err, errNoMemory) {
		mem.cut()
	}
	if skipped != nil && sc.skipBody() != nil || sc.broken.Load() {
		return nil, false
	}
	track.requestBegin()
	track.requestEnd()
	return nil, true
}

// admitBody decides, from a request's header alone, whether its body may
// be read and how many bytes of it may be kept: the context the request is
// served with, the body's bound, and the refusal (nil if admitted). When
// the bound is DefaultMaxBody only because the header proved no token,
// unproven is the answer to give if the body turns out longer.
func (s *Server) admitBody(ctx context.Context, name string, m *method, token string) (_ context.Context, limit int, unproven, refusal error) {
	if m == nil {
		return ctx, DefaultMaxBody, nil, Errorf(CodeBadRequest, "unknown method %q", name)
	}
	start := metrics.Start()
	if err := requireCapabilityRole(ctx, m.capability); err != nil {
		err = fmt.Errorf("%s: %w", name, err)
		observe(name, start, &err)
		return ctx, m.maxBody, nil, err
	}
	if !m.capability.asksToken() || m.maxBody <= DefaultMaxBody {
		return ctx, m.maxBody, nil, nil
	}
	var why error
	if s.AuthorizeHeader != nil {
		authCtx, err := s.AuthorizeHeader(ctx, name, m.capability, token)
		if err == nil {
			return authCtx, m.maxBody, nil, nil
		}
		why = err
	}
	// No token proved: perhaps an older client, whose token is in the
	// body only. The body is kept small, and the request checked once it
	// is read, as every request is: a caller is refused with the same
	// answer whether or not its header named the token.
	if token == "" || why == nil {
		why = Errorf(CodeTooLarge, "%s: the request body is larger than the %s this method takes from a caller whose request header carries no token (AuthToken; a client older than this server sends it in the body only)",
			name, byteSize(DefaultMaxBody))
	} else {
		why = fmt.Errorf("%w (the request's body, over %s, was not read)", why, byteSize(DefaultMaxBody))
	}
	return ctx, DefaultMaxBody, why, nil
}

// matchCredential checks that a request whose header named a credential
// carries the same one in its body: the header's was checked before the
// body was read, the body's is the one handlers use.
func matchCredential(name, token string, args any) error {
	if token == "" || credentialOf(args) == token {
		return nil
	}
	return Errorf(CodeBadRequest, "%s: the request's token differs from the one in its header (AuthToken)", name)
}

// serverCall is one request being served: its header, its response
// header, and what dispatch found for it. They are pooled, so that a
// request's headers cost no allocation; one is put back once its answer
// has been written.
type serverCall struct {
	req  rpc.Request
	resp rpc.Response
	m    *method
	args any
	ctx  context.Context // the request's, before invoke adds its deadline
	cost int64           // what the decoded request is charged to request memory
}

var serverCalls = sync.Pool{New: func() any { return new(serverCall) }}

func (c *serverCall) put() {
	*c = serverCall{}
	serverCalls.Put(c)
}

// requestTracker is told when a whole request has arrived on a connection
// and when it has been answered (rpc/limits.go: handshake deadlines and
// idle timeouts).
type requestTracker interface {
	requestBegin()
	requestEnd()
}

type noTracker struct{}

func (noTracker) requestBegin() {}
func (noTracker) requestEnd()   {}

// invoke runs one handler under the request's deadline, turning a panic
// into ErrInternal.
func (s *Server) invoke(ctx context.Context, name string, m *method, args any) (reply any, err error) {
	defer observe(name, metrics.Start(), &err) // runs last: sees the panic's ErrInternal too
	ctx, cancel := context.WithTimeout(ctx, requestTimeout(args))
	defer cancel()
	defer func() {
		if r := recover(); r != nil {
			s.logger.Error("RPC handler panicked; answering with an internal error", "method", name,
				"panic", fmt.Sprint(r), "stack", string(debug.Stack()))
			reply, err = nil, fmt.Errorf("%s: %w", name, ErrInternal)
		}
	}()
	if err := requireCapabilityRole(ctx, m.capability); err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	if s.Authorize != nil {
		if ctx, err = s.Authorize(ctx, name, m.capability, args); err != nil {
			return nil, err
		}
	}
	reply, err = m.call(ctx, args)
	if err != nil && errors.Is(err, context.DeadlineExceeded) && ErrorCode(err) == CodeUnknown {
		err = fmt.Errorf("%s: %w", name, ErrTimeout)
	}
	return reply, err
}

// observe records a request to a registered method (never an unknown
// name: those are answered before invoke) with its answer's code.
func observe(name string, t metrics.Timer, err *error) {
	code := "ok"
	if *err != nil {
		code = string(ErrorCode(*err))
	}
	metrics.RPC(name, code, t)
}

func (s *Server) respond(sc *ServerCodec, c *serverCall, reply any, err error) {
	c.resp = rpc.Response{ServiceMethod: c.req.ServiceMethod, Seq: c.req.Seq}
	if err != nil {
		c.resp.Error = encodeError(err)
		reply = struct{}{}
	}
	if werr := sc.WriteResponse(&c.resp, reply); werr != nil {
		s.logger.Debug("could not write RPC response", "method", c.req.ServiceMethod, "error", werr)
	}
}
