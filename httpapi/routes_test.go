package httpapi

import (
	"os"
	"regexp"
	"testing"

	"github.com/weft-sched/weft/router"
	"github.com/weft-sched/weft/rpc"
	"github.com/weft-sched/weft/server"
)

// wantRoutes is every route a server serves with the capability it asks
// of the caller's token (SPEC §16). A route added without an entry here
// fails: decide who may call it, add it here and to docs/api.md.
var wantRoutes = map[string]rpc.Capability{
	"GET /v1/health":              rpc.CapPublic,
	"GET /v1/metrics":             rpc.CapOperatorRead,
	"GET /v1/status":              rpc.CapOperatorRead,
	"GET /v1/members":             rpc.CapOperatorRead,
	"GET /v1/operator/raft/peers": rpc.CapOperatorRead,
	"GET /v1/nodes":               rpc.CapNodeRead,
	"GET /v1/node/{id}":           rpc.CapNodeRead,
	"POST /v1/node/{id}/drain":    rpc.CapNodeWrite,
	"GET /v1/queues":              rpc.CapQueueRead,
	"PUT /v1/queues":              rpc.CapOperatorWrite,
	"GET /v1/queue/{name}":        rpc.CapQueueRead,
	"GET /v1/apps":                rpc.CapQueueRead,
	"POST /v1/apps":               rpc.CapQueueSubmit,
	"GET /v1/app/{id}":            rpc.CapQueueRead,
	"DELETE /v1/app/{id}":         rpc.CapQueueSubmit,
	"GET /v1/app/{id}/containers": rpc.CapQueueRead,
	"GET /v1/containers":          rpc.CapQueueRead,
	"GET /v1/container/{id}/logs": rpc.CapQueueRead,
	"GET /v1/acl/token/self":      rpc.CapToken,
	"GET /debug/pprof/{profile}":  rpc.CapOperatorWrite,
}

// wantAgentRoutes is wantRoutes for an agent.
var wantAgentRoutes = map[string]rpc.Capability{
	"GET /v1/health":              rpc.CapPublic,
	"GET /v1/metrics":             rpc.CapPublic,
	"GET /v1/container/{id}/logs": rpc.CapQueueRead,
	"GET /debug/pprof/{profile}":  rpc.CapOperatorWrite,
}

func TestEveryRouteDeclaresItsCapability(t *testing.T) {
	check := func(what string, got, want map[string]rpc.Capability) {
		for r, c := range got {
			if w, ok := want[r]; !ok {
				t.Errorf("%s route %s (capability %s) is not expected: decide who may call it and add it", what, r, c)
			} else if c != w {
				t.Errorf("%s route %s asks %s, want %s", what, r, c, w)
			}
		}
		for r := range want {
			if _, ok := got[r]; !ok {
				t.Errorf("%s route %s is expected but not served", what, r)
			}
		}
	}
	check("server", Routes(), wantRoutes)
	check("agent", AgentRoutes(), wantAgentRoutes)
}

// A route asks exactly what the RPC method it calls asks: the method's
// own check is the one that runs.
func TestEveryRouteAsksWhatItsMethodAsks(t *testing.T) {
	srv, err := server.New(&server.Config{NodeID: "s1", DataDir: t.TempDir(), RPCPort: -1, SerfPort: -1})
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Shutdown()
	rt, err := router.New(&router.Config{NodeID: "r1", DataDir: t.TempDir(), RPCPort: -1, SerfPort: -1})
	if err != nil {
		t.Fatal(err)
	}
	defer rt.Shutdown()
	// A federation's routers serve the server's routes (SPEC §18): the
	// same methods, asking the same.
	for _, r := range serverRoutes {
		if c, ok := rt.Capabilities()[r.rpc]; r.rpc != "" && (!ok || c != r.capability) {
			t.Errorf("%s %s calls %s, which routers serve asking %q (want %s)", r.method, r.path, r.rpc, c, r.capability)
		}
	}
	methods := srv.Capabilities()
	for _, rts := range [][]route{serverRoutes, agentRoutes} {
		for _, r := range rts {
			if r.rpc == "" {
				if r.capability != rpc.CapPublic {
					t.Errorf("%s %s calls no method, so it can check no token, yet asks %s", r.method, r.path, r.capability)
				}
				continue
			}
			c, ok := methods[r.rpc]
			if !ok {
				t.Errorf("%s %s calls %s, which servers do not serve", r.method, r.path, r.rpc)
			} else if c != r.capability {
				t.Errorf("%s %s declares %s, but its method %s asks %s", r.method, r.path, r.capability, r.rpc, c)
			}
		}
	}
}

// docs/api.md lists every route with its capability, in a table row
// "| `METHOD PATH` | ... | `capability` |".
func TestTheDocsListEveryRoute(t *testing.T) {
	src, err := os.ReadFile("../docs/api.md")
	if err != nil {
		t.Fatal(err)
	}
	row := regexp.MustCompile("(?m)^\\| `(GET|PUT|POST|DELETE) (/[^`]*)` \\|.*\\| `([a-z:]+)` \\|\\s*$")
	documented := map[string]rpc.Capability{}
	for _, m := range row.FindAllStringSubmatch(string(src), -1) {
		documented[m[1]+" "+m[2]] = rpc.Capability(m[3])
	}
	// The table gives a server's capabilities; an agent's routes are all
	// served by servers too (the prose says where an agent's differ).
	all := Routes()
	for r, c := range AgentRoutes() {
		if _, ok := all[r]; !ok {
			all[r] = c
		}
	}
	for r, c := range all {
		if d, ok := documented[r]; !ok {
			t.Errorf("docs/api.md does not list %s", r)
		} else if d != c {
			t.Errorf("docs/api.md says %s asks %s; it asks %s", r, d, c)
		}
	}
	for r := range documented {
		if _, ok := all[r]; !ok {
			t.Errorf("docs/api.md lists %s, which is not served", r)
		}
	}
}
