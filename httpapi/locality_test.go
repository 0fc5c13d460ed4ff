package httpapi

import (
	"testing"

	"github.com/weft-sched/weft/rpc"
)

// A dshell app submitted over HTTP with nodes and relax_locality = false
// runs every task container on the named node: the keys reach the spec,
// the AM's ask carries them, and the scheduler holds the ask to them.
func TestSubmittedLocalityHoldsTheContainers(t *testing.T) {
	ta := newTestAPI(t, apiOpts{agents: 2})
	var resp rpc.AppSubmitResponse
	ta.do("POST", "/v1/apps", []byte(`{"user": "tester", "dshell": {"command": ["true"], "num_containers": 4,
		"resources": {"memory_mb": 64, "vcores": 1}, "nodes": ["n2"], "relax_locality": false}}`)).mustJSON(t, 200, &resp)
	if app := ta.waitApp(resp.AppID); app.State != "FINISHED" {
		t.Fatalf("app ended %+v", app)
	}
	var cs []rpc.ContainerInfo
	ta.do("GET", "/v1/app/"+resp.AppID+"/containers", nil).mustJSON(t, 200, &cs)
	tasks := 0
	for _, c := range cs {
		if c.IsAM {
			continue
		}
		tasks++
		if c.NodeID != "n2" {
			t.Errorf("task container %s ran on %s, want n2", c.ID, c.NodeID)
		}
	}
	if tasks != 4 {
		t.Fatalf("%d task containers, want 4: %+v", tasks, cs)
	}
}
