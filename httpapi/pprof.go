package httpapi

import (
	"net/http/pprof"
	runtimepprof "runtime/pprof"

	"github.com/weft-sched/weft/rpc"
)

// pprofParams are the query parameters net/http/pprof reads: seconds (of
// a CPU profile or trace), debug (text instead of the binary format), gc
// (run a collection before a heap profile).
var pprofParams = []string{"seconds", "debug", "gc"}

// debugProbe is the method profiling asks for: it does nothing but check
// the caller's token (operator:write). On an agent it is relayed to the
// servers, which hold the ACLs, as Container.Logs is.
const debugProbe = "Operator.Debug"

// pprofProfile serves one profile of this process, as net/http/pprof
// does under /debug/pprof/, to a caller whose token grants operator:write:
// a goroutine dump shows function arguments and a heap profile where
// memory was allocated, so profiles go only to whoever may already
// change the cluster. The names: profile (CPU, ?seconds=30), trace,
// cmdline, symbol, and runtime/pprof's (heap, allocs, goroutine, block,
// mutex, threadcreate).
func (a *api) pprofProfile(q *request) error {
	var probe struct{}
	if err := a.call(q, debugProbe, &q.header, &probe); err != nil {
		return err
	}
	switch name := q.r.PathValue("profile"); name {
	case "profile":
		pprof.Profile(q.w, q.r)
	case "trace":
		pprof.Trace(q.w, q.r)
	case "cmdline":
		pprof.Cmdline(q.w, q.r)
	case "symbol":
		pprof.Symbol(q.w, q.r)
	default:
		if runtimepprof.Lookup(name) == nil {
			return rpc.Errorf(rpc.CodeNotFound, "no profile %q; take profile, trace, cmdline, symbol, heap, allocs, goroutine, block, mutex or threadcreate", name)
		}
		pprof.Handler(name).ServeHTTP(q.w, q.r)
	}
	return nil
}
