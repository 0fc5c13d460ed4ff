package agent

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/weft-sched/weft/internal/testutil"
	"github.com/weft-sched/weft/rpc"
	"github.com/weft-sched/weft/scheduler"
)

// badIDs are IDs that must never reach a path: traversal, separators, a
// glob, the dot names, nothing.
func badIDs(escape string) []string {
	return []string{"../../x", "a/b", "*", "c-*", "..", ".", "", escape, "/etc", `a\b`}
}

// tree lists every path under root, relative to it.
func tree(t *testing.T, root string) []string {
	t.Helper()
	var out []string
	err := filepath.Walk(root, func(p string, fi os.FileInfo, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, p)
		out = append(out, rel)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	sort.Strings(out)
	return out
}

// An ID that could leave the agent's containers directory is refused at
// every container method with a bad-request error naming the field, and
// nothing is created anywhere: not under the data dir, not beside it, not
// where a traversal would have led.
func TestContainerMethodsRefuseIDsThatAreNotPathElements(t *testing.T) {
	parent := reachableTempDir(t)
	data := filepath.Join(parent, "data")
	escape := fmt.Sprintf("weft-escape-%d", os.Getpid())
	escapeID := "../../../../../../../../../../tmp/" + escape
	t.Cleanup(func() { os.RemoveAll(filepath.Join(os.TempDir(), escape)) })
	_, agents, c := clusterWith(t, 1, func(cfg *Config) { cfg.DataDir = data })
	a := agents[0]

	// One real app, so that there are logs for a pattern to match.
	var sub rpc.AppSubmitResponse
	spec := scheduler.AppSpec{User: "test", DShell: scheduler.DShell{NumContainers: 1, Command: []string{"echo", "secret"}}}
	if err := c.Call(context.Background(), "App.Submit", &rpc.AppSubmitRequest{Spec: spec}, &sub); err != nil {
		t.Fatal(err)
	}
	if app := waitApp(t, c, sub.AppID); app.State != "FINISHED" {
		t.Fatalf("app %+v", app)
	}
	containers := filepath.Join(data, "containers")
	// The AM's container ends a moment after its app: then its secrets go.
	testutil.WaitFor(t, 10*time.Second, func() bool {
		for _, p := range tree(t, containers) {
			if filepath.Base(p) == secretsDir {
				return false
			}
		}
		return true
	})
	before, beforeParent := tree(t, containers), tree(t, parent)

	pool := rpc.NewPool(nil)
	defer pool.Shutdown()
	call := func(method string, req, resp any) error {
		return pool.Call(context.Background(), a.RPCAddr(), method, req, resp)
	}
	refused := func(what, field string, err error) {
		t.Helper()
		if !errors.Is(err, rpc.ErrBadRequest) || !strings.HasPrefix(err.Error(), field+" ") {
			t.Errorf("%s: %v; want a bad request naming %s", what, err, field)
		}
	}
	for _, id := range badIDs(escapeID) {
		valid := rpc.ContainerInfo{ID: "c-900-0", AppID: "app-900", NodeID: a.NodeID(), Resources: oneCore}
		launch := rpc.LaunchSpec{Command: []string{"sh", "-c", "echo pwned > pwned"}}
		for _, tc := range []struct {
			field string
			edit  func(*rpc.ContainerInfo)
		}{
			{"container.id", func(ci *rpc.ContainerInfo) { ci.ID = id }},
			{"container.app_id", func(ci *rpc.ContainerInfo) { ci.AppID = id }},
			{"container.node_id", func(ci *rpc.ContainerInfo) { ci.NodeID = id }},
		} {
			ci := valid
			tc.edit(&ci)
			var resp rpc.ContainerStartResponse
			err := call("Container.Start", &rpc.ContainerStartRequest{Token: ci.ID, Container: ci, Launch: launch}, &resp)
			refused(fmt.Sprintf("Container.Start with %s %q", tc.field, id), tc.field, err)
		}
		var logs rpc.ContainerLogsResponse
		err := call("Container.Logs", &rpc.ContainerLogsRequest{ID: id}, &logs)
		refused(fmt.Sprintf("Container.Logs %q", id), "id", err)
		if len(logs.Data) > 0 {
			t.Errorf("Container.Logs %q returned %q", id, logs.Data)
		}
		refused(fmt.Sprintf("Container.Stop %q", id), "id", call("Container.Stop", &rpc.ContainerIDRequest{ID: id}, &struct{}{}))
		refused(fmt.Sprintf("Container.Promote %q", id), "id", call("Container.Promote", &rpc.ContainerIDRequest{ID: id}, &struct{}{}))
		var st rpc.ContainerStatusResponse
		refused(fmt.Sprintf("Container.Status %q", id), "ids[1]", call("Container.Status", &rpc.ContainerStatusRequest{IDs: []string{"c-1-0", id}}, &st))
	}
	var st rpc.ContainerStatusResponse
	err := call("Container.Start", &rpc.ContainerStartRequest{Token: "c-900-0",
		Container: rpc.ContainerInfo{ID: "c-900-0", AppID: "app-900", NodeID: a.NodeID(), Attempt: -1, Resources: oneCore},
		Launch:    rpc.LaunchSpec{Command: []string{"true"}}}, &st)
	refused("Container.Start with attempt -1", "container.attempt", err)
	var logs rpc.ContainerLogsResponse
	refused("Container.Logs from offset -1", "offset", call("Container.Logs", &rpc.ContainerLogsRequest{ID: "c-1-0", Offset: -1}, &logs))
	refused("Container.Logs of stream ../pid", "stream", call("Container.Logs", &rpc.ContainerLogsRequest{ID: "c-1-0", Stream: "../pid"}, &logs))

	if after := tree(t, containers); strings.Join(after, "\n") != strings.Join(before, "\n") {
		t.Errorf("the containers directory changed:\nbefore %q\nafter  %q", before, after)
	}
	// Serf may write its own files in the data dir; nothing else appears
	// beside it or in it.
	for _, p := range tree(t, parent) {
		if !contains(beforeParent, p) && !strings.HasPrefix(p, filepath.Join("data", "serf")) {
			t.Errorf("%s appeared under %s", p, parent)
		}
	}
	if _, err := os.Lstat(filepath.Join(os.TempDir(), escape)); !os.IsNotExist(err) {
		t.Errorf("%s exists: %v", filepath.Join(os.TempDir(), escape), err)
	}
	if rs := a.mgr.reports(); len(rs) > 2 {
		t.Errorf("the agent recorded containers it refused: %+v", rs)
	}
}

// The manager's path builder refuses what the RPC layer should have: a
// container whose IDs cannot name its directory is not recorded and
// creates nothing.
func TestManagerRefusesIDsItCannotJoin(t *testing.T) {
	m := newTestManager(t, 1000, 10)
	for _, id := range badIDs("../../../x") {
		for _, ci := range []rpc.ContainerInfo{info(id, 100, scheduler.Guaranteed), {ID: "c-1-0", AppID: id, Resources: oneCore}} {
			r := m.start(ci, rpc.LaunchSpec{Command: []string{"sh", "-c", "echo pwned > pwned"}})
			if r.State != "COMPLETED" || r.Reason != "failed" || !strings.Contains(r.Diagnostics, "container.") {
				t.Errorf("start of %+v = %+v; want a refusal naming the field", ci, r)
			}
		}
		if _, err := m.logs(&rpc.ContainerLogsRequest{ID: id}, ""); !errors.Is(err, rpc.ErrBadRequest) {
			t.Errorf("logs of %q = %v; want a bad request", id, err)
		}
	}
	if rs := m.reports(); len(rs) != 0 {
		t.Fatalf("recorded %+v", rs)
	}
	if entries, _ := os.ReadDir(m.dir); len(entries) != 0 {
		t.Fatalf("created %v in the containers directory", entries)
	}
	if _, err := os.Lstat(filepath.Join(filepath.Dir(m.dir), "x")); !os.IsNotExist(err) {
		t.Fatalf("created a directory beside the containers directory: %v", err)
	}
}

// Container.Logs finds a container by its exact ID, in memory or (once the
// agent has forgotten it) on disk, and nothing else: an app ID, a prefix
// or another app's container directory name that is not this ID.
func TestLogsTakeAnExactContainerID(t *testing.T) {
	m := newTestManager(t, 1000, 10)
	m.start(rpc.ContainerInfo{ID: "c-7-0", AppID: "app-7", Resources: oneCore}, rpc.LaunchSpec{Command: []string{"echo", "seven"}})
	waitState(t, m, "c-7-0", scheduler.ContainerCompleted)
	m.ack([]string{"c-7-0"})
	if len(m.reports()) != 0 {
		t.Fatal("the container was not forgotten")
	}
	for _, app := range []string{"", "app-7"} { // found by ID, or under the app a token names
		resp, err := m.logs(&rpc.ContainerLogsRequest{ID: "c-7-0"}, app)
		if err != nil || string(resp.Data) != "seven\n" || !resp.Done {
			t.Fatalf("logs of the forgotten c-7-0 (app %q) = %+v, %v", app, resp, err)
		}
	}
	if _, err := m.logs(&rpc.ContainerLogsRequest{ID: "c-7-0"}, "app-8"); !rpc.IsNotFound(err) {
		t.Errorf("logs of c-7-0 under another app = %v; want not found", err)
	}
	for _, id := range []string{"c-7", "c-7-", "app-7", "c-7-00", "C-7-0"} {
		if _, err := m.logs(&rpc.ContainerLogsRequest{ID: id}, ""); !rpc.IsNotFound(err) {
			t.Errorf("logs of %q = %v; want not found", id, err)
		}
	}
}

// reachableTempDir is a temporary directory any user can enter (t.TempDir
// is private to the test's user).
func reachableTempDir(t *testing.T) string {
	dir, err := os.MkdirTemp("", "weft-runas-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	return dir
}
