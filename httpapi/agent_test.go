package httpapi

import (
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/weft-sched/weft/rpc"
)

// An agent's API serves its health and relays log reads to the servers,
// which check the caller's token.
func TestAgentServesHealthAndLogsThroughTheServers(t *testing.T) {
	ta := newTestAPI(t, apiOpts{acl: true, agents: 1})
	id := ta.submit(1, "sh", "-c", "echo from-the-agent")
	ta.waitApp(id)
	var ctrs []rpc.ContainerInfo
	ta.do("GET", "/v1/app/"+id+"/containers", nil).mustJSON(t, 200, &ctrs)
	var work string
	for _, c := range ctrs {
		if !c.IsAM {
			work = c.ID
		}
	}

	a := ta.agents[0]
	hs := httptest.NewServer(NewAgent(AgentConfig{Servers: CallerFunc(a.CallServers), NodeID: a.NodeID()}))
	defer hs.Close()
	agentAPI := &testAPI{t: t, url: hs.URL, token: ta.token}
	var h Health
	agentAPI.do("GET", "/v1/health", nil).mustJSON(t, 200, &h)
	if h.Role != "agent" || h.NodeID != "n1" {
		t.Fatalf("agent health %+v", h)
	}
	logs := agentAPI.do("GET", "/v1/container/"+work+"/logs", nil)
	if logs.code != 200 || string(logs.body) != "from-the-agent\n" {
		t.Fatalf("logs through the agent: %d %q", logs.code, logs.body)
	}
	agentAPI.do("GET", "/v1/container/c-404-0/logs", nil).errorIs(t, 404, "c-404-0")
	agentAPI.do("GET", "/v1/metrics", nil).errorIs(t, 404, "serves no metrics")
	agentAPI.do("GET", "/v1/apps", nil).errorIs(t, 404, "no route")
	// Its profiles too: the servers check the token (operator:write).
	if p := agentAPI.do("GET", "/debug/pprof/goroutine?debug=1", nil); p.code != 200 || !strings.HasPrefix(string(p.body), "goroutine profile:") {
		t.Fatalf("agent goroutine profile: %d %.100q", p.code, p.body)
	}
	agentAPI.token = ""
	agentAPI.do("GET", "/v1/container/"+work+"/logs", nil).errorIs(t, 403, "permission denied")
	agentAPI.do("GET", "/debug/pprof/goroutine?debug=1", nil).errorIs(t, 403, "lacks operator:write")
}
