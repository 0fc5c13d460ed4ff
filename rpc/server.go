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
}

type method struct {
	capability Capability
	reqType    reflect.Type
	newArgs    func() any
	call       func(ctx context.Context, args any) (any, error)
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
// Registering a name twice, or with no capability, panics, as does a
// request type whose decoding cannot be bounded (see checkDecodeCost): all
// are programming errors.
func Register[Req, Resp any](s *Server, name string, c Capability, fn func(ctx context.Context, req *Req, resp *Resp) error) {
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
	s.methods[name] = &method{
		capability: c,
		reqType:    reqType,
		newArgs:    func() any { return new(Req) },
		call: func(ctx context.Context, args any) (any, error) {
			resp := new(Resp)
			err := fn(ctx, args.(*Req), resp)
			return resp, err
		},
	}
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
		c := serverCalls.Get().(*serverCall)
		c.req = rpc.Request{}
		if err := sc.ReadRequestHeader(&c.req); err != nil {
			c.put()
			return
		}
		m := s.methods[c.req.ServiceMethod]
		var args any
		if m != nil {
			args = m.newArgs()
		}
		if err := sc.ReadRequestBody(args); err != nil {
			if errors.Is(err, ErrTooLarge) {
				s.respond(sc, c, nil, err) // say why, even if the connection closes
			}
			c.put()
			if sc.broken.Load() {
				return
			}
			track.requestBegin()
			track.requestEnd()
			continue
		}
		track.requestBegin()
		if m == nil {
			s.respond(sc, c, nil, Errorf(CodeBadRequest, "unknown method %q", c.req.ServiceMethod))
			c.put()
			track.requestEnd()
			continue
		}
		select {
		case sem <- struct{}{}:
		case <-ctx.Done():
			c.put()
			track.requestEnd()
			return
		}
		c.m, c.args = m, args
		wg.Add(1)
		s.handlers.Go(func() {
			defer wg.Done()
			defer func() { <-sem }()
			reply, err := s.invoke(ctx, c.req.ServiceMethod, c.m, c.args)
			s.respond(sc, c, reply, err)
			c.put()
			track.requestEnd()
		})
	}
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
