package httpapi

import (
	"context"
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

// Config is what a server's API needs.
type Config struct {
	// RPC answers the methods the routes call. Required.
	RPC Caller
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

// AgentConfig is what an agent's API needs.
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

// Limits bound what the HTTP API's requests may hold.
type Limits struct {
	// MaxBodyBytes caps a request body [rpc.MaxRequestSize, 8 MiB].
	MaxBodyBytes int64
	// MaxInflight caps the requests served at once (blocking queries and
	// followed logs included); one more is answered 429 [256].
	MaxInflight int
	// MaxFollow caps how long one followed log stays open; the client
	// reconnects from its offset [1 h].
	MaxFollow time.Duration
}

// Defaults of Limits.
const (
	DefaultMaxInflight = 256
	DefaultMaxFollow   = time.Hour
)

func (l Limits) withDefaults() Limits {
	if l.MaxBodyBytes <= 0 {
		l.MaxBodyBytes = rpc.MaxRequestSize
	}
	if l.MaxInflight <= 0 {
		l.MaxInflight = DefaultMaxInflight
	}
	if l.MaxFollow <= 0 {
		l.MaxFollow = DefaultMaxFollow
	}
	return l
}

// api serves one process's routes.
type api struct {
	rpc     Caller
	role    string
	nodeID  string
	metrics http.Handler
	ui      http.Handler
	logger  hclog.Logger
	limits  Limits
	slots   chan struct{}
}

// New returns a server's HTTP API: every route of Routes, /ui/ and a
// redirect from / to /ui/.
func New(c Config) http.Handler {
	a := newAPI(c.RPC, c.Logger, c.Limits)
	a.metrics, a.ui = c.Metrics, c.UI
	if c.Role != "" {
		a.role = c.Role
	}
	return a.handler(serverRoutes)
}

// NewAgent returns an agent's HTTP API: the routes of AgentRoutes.
func NewAgent(c AgentConfig) http.Handler {
	a := newAPI(c.Servers, c.Logger, c.Limits)
	a.metrics, a.nodeID = c.Metrics, c.NodeID
	return a.handler(agentRoutes)
}

func newAPI(caller Caller, logger hclog.Logger, limits Limits) *api {
	if logger == nil {
		logger = hclog.NewNullLogger()
	}
	limits = limits.withDefaults()
	return &api{rpc: caller, role: "server", logger: logger, limits: limits, slots: make(chan struct{}, limits.MaxInflight)}
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

// dispatch answers one path's routes.
func (a *api) dispatch(methods map[string]route) http.Handler {
	var allow []string
	for m := range methods {
		allow = append(allow, m)
	}
	sort.Strings(allow)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		rt, ok := methods[r.Method]
		if !ok {
			w.Header().Set("Allow", strings.Join(allow, ", "))
			writeError(w, http.StatusMethodNotAllowed, fmt.Sprintf("%s takes %s, not %s", r.URL.Path, strings.Join(allow, " or "), r.Method))
			return
		}
		req, err := a.parse(w, r, rt)
		if err != nil {
			a.fail(w, r, err)
			return
		}
		if err := rt.handle(a, req); err != nil {
			a.fail(w, r, err)
		}
	})
}

// guard bounds every request: requests in flight (429 beyond), body size,
// how long the answer may take to write; and contains handler panics.
func (a *api) guard(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case a.slots <- struct{}{}:
			defer func() { <-a.slots }()
		default:
			w.Header().Set("Retry-After", "1")
			writeError(w, http.StatusTooManyRequests, fmt.Sprintf("more than %d requests in flight on this server; retry shortly", a.limits.MaxInflight))
			return
		}
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
		if r.Body != nil {
			r.Body = http.MaxBytesReader(w, r.Body, a.limits.MaxBodyBytes)
		}
		// The longest answer is a blocking query's (or a followed log's,
		// which extends this as it writes).
		http.NewResponseController(w).SetWriteDeadline(time.Now().Add(maxAnswerTime))
		next.ServeHTTP(w, r)
	})
}

// maxAnswerTime bounds how long writing one answer may take.
const maxAnswerTime = rpc.MaxBlockingWait + time.Minute
