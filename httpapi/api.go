package httpapi

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"runtime/debug"
	"sort"
	"strings"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/weft-sched/weft/rpc"
)

// Caller answers RPC methods: rpc.Server.Call on a server (in process),
// an rpc.Client to the servers on an agent.
type Caller interface {
	Call(ctx context.Context, method string, args, reply any) error
}

// CallerFunc is a function that is a Caller.
type CallerFunc func(ctx context.Context, method string, args, reply any) error

// Call calls f.
func (f CallerFunc) Call(ctx context.Context, method string, args, reply any) error {
	return f(ctx, method, args, reply)
}

// AuthFunc checks, before anything of a request is read past its headers,
// what of capability c its token grants without the request, for a route
// calling method: refused (rpc.ErrPermissionDenied), or allowed and
// whether the token is a management token. It is the process's own check
// (server.Server.Authenticate, router.Router.Authenticate); the method
// checks everything again once it has the request.
type AuthFunc func(ctx context.Context, method, token string, c rpc.Capability) (management bool, err error)

// Config is what a server's API needs.
type Config struct {
	// RPC answers the methods the routes call. Required.
	RPC Caller
	// Authenticate checks each request's token before its body is read
	// or it takes a slot. Required.
	Authenticate AuthFunc
	// Metrics serves GET /v1/metrics (Prometheus text); nil answers 404.
	Metrics http.Handler
	// UI serves the web UI under /ui/; nil answers 404.
	UI http.Handler
	// Logger receives the API's log lines. Default: none.
	Logger hclog.Logger
	// Limits bound what requests may hold; zero fields take the defaults.
	Limits Limits
	// Role names the process in /v1/health: "server" (the default) or
	// "router" (a federation's router serves the same routes).
	Role string
}

// AgentConfig is what an agent's API needs. An agent holds no ACL state
// and its routes read no body, so it checks no token before serving: its
// routes relay the token to the servers with the call.
type AgentConfig struct {
	// Servers answers Container.Logs: the agent holds no ACL state, so
	// the servers check the caller's token and relay the read (they mint
	// the container token the agent's RPC port asks for). Required.
	Servers Caller
	// NodeID names the agent in /v1/health.
	NodeID string
	// Metrics serves GET /v1/metrics; nil answers 404.
	Metrics http.Handler
	// Logger receives the API's log lines. Default: none.
	Logger hclog.Logger
	// Limits bound what requests may hold; zero fields take the defaults.
	Limits Limits
}

// Limits bound what the HTTP API's requests may hold. Each is per
// process unless it says otherwise.
type Limits struct {
	// MaxBodyBytes, when set, lowers every route's body cap (the caps
	// are per route: MaxQueueConfigBody and the like).
	MaxBodyBytes int64
	// MaxInflightPerSource caps the requests one source address (an IPv6
	// /64) has served at once, blocking queries and followed logs
	// included; one more is answered 429 [64]. MaxInflight caps them
	// for all sources together [2048], and MaxInflightManagement those
	// of management tokens, which count toward neither [64].
	MaxInflightPerSource  int
	MaxInflight           int
	MaxInflightManagement int
	// BodyBudget bounds what the request bodies being read and parsed may
	// cost together, BodyBudgetPerSource what those of one source may;
	// management tokens have a BodyBudgetPerSource of their own. A body
	// whose cost does not fit is answered 503 [160 MiB, 80 MiB].
	BodyBudget          int64
	BodyBudgetPerSource int64
	// MaxConnsPerSource caps the connections one source may hold open,
	// before any token is seen; more are closed at once [64].
	MaxConnsPerSource int
	// MaxFollow caps how long one followed log stays open; the client
	// reconnects from its offset [1 h].
	MaxFollow time.Duration
}

// Defaults of Limits.
const (
	DefaultMaxInflightPerSource  = 64
	DefaultMaxInflight           = 2048
	DefaultMaxInflightManagement = 64
	DefaultBodyBudget            = 160 << 20
	DefaultBodyBudgetPerSource   = 80 << 20
	DefaultMaxConnsPerSource     = 64
	DefaultMaxFollow             = time.Hour
)

func (l Limits) withDefaults() Limits {
	set := func(v *int, d int) {
		if *v <= 0 {
			*v = d
		}
	}
	set(&l.MaxInflightPerSource, DefaultMaxInflightPerSource)
	set(&l.MaxInflight, DefaultMaxInflight)
	set(&l.MaxInflightManagement, DefaultMaxInflightManagement)
	set(&l.MaxConnsPerSource, DefaultMaxConnsPerSource)
	if l.BodyBudget <= 0 {
		l.BodyBudget = DefaultBodyBudget
	}
	if l.BodyBudgetPerSource <= 0 {
		l.BodyBudgetPerSource = DefaultBodyBudgetPerSource
	}
	if l.MaxFollow <= 0 {
		l.MaxFollow = DefaultMaxFollow
	}
	return l
}

// api serves one process's routes.
type api struct {
	rpc     Caller
	auth    AuthFunc
	role    string
	nodeID  string
	metrics http.Handler
	ui      http.Handler
	logger  hclog.Logger
	limits  Limits
	slots   *inflight
	// bodies is the budget of the bodies being read, mgmtBodies that of
	// management tokens' requests.
	bodies, mgmtBodies *budget
}

// New returns a server's HTTP API: every route of Routes, /ui/ and a
// redirect from / to /ui/.
func New(c Config) http.Handler {
	if c.Authenticate == nil {
		panic("httpapi: a server's API needs Config.Authenticate")
	}
	a := newAPI(c.RPC, c.Authenticate, c.Logger, c.Limits)
	a.metrics, a.ui = c.Metrics, c.UI
	if c.Role != "" {
		a.role = c.Role
	}
	return a.handler(serverRoutes)
}

// NewAgent returns an agent's HTTP API: the routes of AgentRoutes.
func NewAgent(c AgentConfig) http.Handler {
	a := newAPI(c.Servers, nil, c.Logger, c.Limits)
	a.metrics, a.nodeID = c.Metrics, c.NodeID
	return a.handler(agentRoutes)
}

func newAPI(caller Caller, auth AuthFunc, logger hclog.Logger, limits Limits) *api {
	if logger == nil {
		logger = hclog.NewNullLogger()
	}
	limits = limits.withDefaults()
	return &api{rpc: caller, auth: auth, role: "server", logger: logger, limits: limits, slots: newInflight(limits),
		bodies:     newBudget(limits.BodyBudget, limits.BodyBudgetPerSource),
		mgmtBodies: newBudget(limits.BodyBudgetPerSource, limits.BodyBudgetPerSource)}
}

// handler builds the mux: one entry per path, which picks the route by
// HTTP method, so that every answer, 404 and 405 included, is JSON.
func (a *api) handler(routes []route) http.Handler {
	mux := http.NewServeMux()
	byPath := map[string]map[string]route{}
	var paths []string
	for _, rt := range routes {
		if byPath[rt.path] == nil {
			byPath[rt.path] = map[string]route{}
			paths = append(paths, rt.path)
		}
		byPath[rt.path][rt.method] = rt
	}
	for _, p := range paths {
		mux.Handle(p, a.dispatch(byPath[p]))
	}
	if a.ui != nil {
		mux.Handle("/ui/", a.ui)
		mux.Handle("GET /{$}", http.RedirectHandler("/ui/", http.StatusFound))
	}
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		writeError(w, http.StatusNotFound, fmt.Sprintf("no route %s %s; see docs/api.md for the routes", r.Method, r.URL.Path))
	})
	return a.guard(mux)
}

// dispatch answers one path's routes; HEAD is answered as GET is, without
// the body.
func (a *api) dispatch(methods map[string]route) http.Handler {
	var allow []string
	for m := range methods {
		allow = append(allow, m)
		if m == http.MethodGet {
			allow = append(allow, http.MethodHead)
		}
	}
	sort.Strings(allow)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		rt, ok := methods[r.Method]
		if !ok && r.Method == http.MethodHead {
			rt, ok = methods[http.MethodGet]
		}
		if !ok {
			w.Header().Set("Allow", strings.Join(allow, ", "))
			writeError(w, http.StatusMethodNotAllowed, fmt.Sprintf("%s takes %s, not %s", r.URL.Path, orList(allow), r.Method))
			return
		}
		req, err := a.parse(w, r, rt)
		if err != nil {
			a.refuse(w, r, err)
			return
		}
		release, err := a.admit(req, rt)
		if err != nil {
			a.refuse(w, r, err)
			return
		}
		defer release()
		if err := rt.handle(a, req); err != nil {
			a.fail(w, r, err)
		}
	})
}

// admit lets a request in, in this order, or says why not: its token
// (before anything else of it is read), a slot among the requests in
// flight from its source (or of management tokens), and, for a route that
// reads a body, the body's size against the route's cap and what reading
// and parsing it may cost against the byte budget. release gives back
// what it took.
func (a *api) admit(q *request, rt route) (release func(), err error) {
	management := false
	if a.auth != nil {
		if management, err = a.auth(q.r.Context(), rt.rpc, q.header.AuthToken, rt.capability); err != nil {
			return nil, err
		}
	}
	src := sourceOf(q.r.RemoteAddr)
	freeSlot, refused := a.slots.acquire(src, management)
	if refused != nil {
		return nil, refused
	}
	limit := min(rt.maxBody, a.maxBody())
	declared := q.r.ContentLength
	switch {
	case rt.maxBody == 0 && declared > 0:
		freeSlot()
		return nil, &refusal{status: http.StatusRequestEntityTooLarge, msg: fmt.Sprintf("%s %s takes no request body", rt.method, rt.path)}
	case rt.maxBody == 0 || declared == 0:
		if declared != 0 {
			closeAfter(q.w, q.r) // a body of no declared length: never read, nor read past
		}
		return freeSlot, nil
	case declared > limit:
		freeSlot()
		return nil, rpc.Errorf(rpc.CodeTooLarge, "request body is larger than %d bytes (%d); nothing was changed", limit, declared)
	case declared < 0:
		declared = limit // sent in chunks: it may be as large as the cap
	}
	bodies := a.bodies
	if management {
		bodies = a.mgmtBodies
	}
	freeBody, ok := bodies.reserve(src, rt.cost(declared))
	if !ok {
		freeSlot()
		return nil, &refusal{status: http.StatusServiceUnavailable, retryAfter: true,
			msg: fmt.Sprintf("this process is reading as many request bodies as its memory budget allows (a body of %d bytes here may cost %d); retry shortly", declared, rt.cost(declared))}
	}
	q.bodyLimit = limit
	return func() { freeBody(); freeSlot() }, nil
}

// maxBody is Limits.MaxBodyBytes, or no lower cap than a route's.
func (a *api) maxBody() int64 {
	if a.limits.MaxBodyBytes > 0 {
		return a.limits.MaxBodyBytes
	}
	return 1<<63 - 1
}

// refuse answers a request that was not let in. Its body, if any, has not
// been read and will not be: the connection is closed after the answer
// rather than read past it.
func (a *api) refuse(w http.ResponseWriter, r *http.Request, err error) {
	if r.ContentLength != 0 {
		closeAfter(w, r)
	}
	var ref *refusal
	if errors.As(err, &ref) {
		if ref.retryAfter {
			w.Header().Set("Retry-After", "1")
		}
		writeError(w, ref.status, ref.msg)
		return
	}
	a.fail(w, r, err)
}

// closeAfter closes an HTTP/1 connection after the answer to a request
// whose body is not read: rather than read the body to reach the next
// request. (Over HTTP/2 an unread body ends with its stream, and
// "Connection: close" would end every other stream of the connection.)
func closeAfter(w http.ResponseWriter, r *http.Request) {
	if r.ProtoMajor == 1 {
		w.Header().Set("Connection", "close")
	}
}

// orList joins words as "A, B or C".
func orList(words []string) string {
	if len(words) < 2 {
		return strings.Join(words, "")
	}
	return strings.Join(words[:len(words)-1], ", ") + " or " + words[len(words)-1]
}

// guard bounds every request: how long the answer may take to write; and
// contains handler panics. What a request may hold is bounded by admit,
// after its token is checked; before, by the listener (connections per
// source, header timeout and size).
func (a *api) guard(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		defer func() {
			if v := recover(); v != nil {
				if v == http.ErrAbortHandler {
					panic(v)
				}
				a.logger.Error("HTTP handler panicked; answering with an internal error", "path", r.URL.Path,
					"panic", fmt.Sprint(v), "stack", string(debug.Stack()))
				writeError(w, http.StatusInternalServerError, "internal error; it was logged on the server")
			}
		}()
		// The longest answer is a blocking query's (or a followed log's,
		// which extends this as it writes).
		http.NewResponseController(w).SetWriteDeadline(time.Now().Add(maxAnswerTime))
		next.ServeHTTP(w, r)
	})
}

// maxAnswerTime bounds how long writing one answer may take.
const maxAnswerTime = rpc.MaxBlockingWait + time.Minute
