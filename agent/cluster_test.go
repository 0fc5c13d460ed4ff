package agent

import (
	"context"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/weft-sched/weft/internal/testutil"
	"github.com/weft-sched/weft/internal/tlsutil"
	"github.com/weft-sched/weft/rpc"
	"github.com/weft-sched/weft/scheduler"
	"github.com/weft-sched/weft/server"
)

// weftBin is a weft binary built for the AM containers these tests launch.
var weftBin string

func TestMain(m *testing.M) {
	if mode := os.Getenv(isolationHelperEnv); mode != "" {
		os.Exit(runIsolationHelper(mode))
	}
	// Containers have a /tmp of their own: the files these tests share
	// with the containers they run (the weft binary, markers, tokens)
	// live outside the host's.
	dir, err := os.MkdirTemp("/var/tmp", "weft-agent-test-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	os.Setenv("TMPDIR", dir)
	if weftBin, err = testutil.BuildWeft(dir); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	// AM containers that run as another user (runas_cluster_test.go) must
	// reach the binary.
	if err := os.Chmod(dir, 0o755); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	// The agents of these tests make their cgroups (where the host lets
	// them) under a prefix of this process's, removed at the end.
	cgroupPrefix = fmt.Sprintf("weft-test-%d-", os.Getpid())
	code := m.Run()
	testutil.RemoveCgroups(func(name string) bool { return strings.HasPrefix(name, cgroupPrefix) })
	os.RemoveAll(dir)
	os.Exit(code)
}

type testLog struct {
	t    testing.TB
	done chan struct{}
}

func (w *testLog) Write(p []byte) (int, error) {
	select {
	case <-w.done:
	default:
		w.t.Log(string(p[:len(p)-1]))
	}
	return len(p), nil
}

// cluster starts one server and n agents in this process.
func cluster(t testing.TB, n int) (*server.Server, []*Agent, *rpc.Client) {
	return clusterWith(t, n, nil)
}

// clusterWith is cluster with each agent's configuration passed through
// shape (when not nil) before the agent starts.
func clusterWith(t testing.TB, n int, shape func(*Config)) (*server.Server, []*Agent, *rpc.Client) {
	return clusterTLS(t, n, nil, shape)
}

// clusterTLS is clusterWith with mutual TLS on when pki is not nil: the
// server, each agent and the returned client (a client certificate) get
// certificates of their roles.
func clusterTLS(t testing.TB, n int, pki *testutil.PKI, shape func(*Config)) (*server.Server, []*Agent, *rpc.Client) {
	w := &testLog{t: t, done: make(chan struct{})}
	t.Cleanup(func() { close(w.done) })
	level := hclog.Info
	if _, bench := t.(*testing.B); bench {
		level = hclog.Error // benchmark output shows every log line
	}
	logger := hclog.New(&hclog.LoggerOptions{Output: w, Level: level})
	certFor := func(role rpc.Role) *tlsutil.Configurator {
		if pki == nil {
			return nil
		}
		return pki.Configurator(role)
	}
	srv, err := server.New(&server.Config{NodeID: "s1", DataDir: t.TempDir(), RPCPort: -1, SerfPort: -1,
		BootstrapExpect: 1, SerfFastGossip: true, Logger: logger.Named("s1"), TLS: certFor(rpc.RoleServer)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { srv.Shutdown() })
	var agents []*Agent
	for i := 1; i <= n; i++ {
		cfg := &Config{NodeID: fmt.Sprintf("n%d", i), DataDir: t.TempDir(), RPCPort: -1, SerfPort: -1,
			Join: []string{srv.SerfAddr()}, Resources: scheduler.Resources{MemoryMB: 2048, Vcores: 4},
			OpportunisticQueueLength: -1, SerfFastGossip: true, Executable: weftBin, KillGrace: time.Second,
			// Containers run as the test's user, root or not: the test's
			// directories are private to it (runas_test.go covers the
			// accounts a root agent picks).
			AllowRoot: true,
			Logger:    logger.Named(fmt.Sprintf("n%d", i)), TLS: certFor(rpc.RoleAgent)}
		if shape != nil {
			shape(cfg)
		}
		a, err := New(cfg)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { a.Shutdown() })
		agents = append(agents, a)
	}
	client := rpc.NewClient([]string{srv.RPCAddr()}, rpc.NewTLSPool(nil, certFor(rpc.RoleClient), rpc.RoleServer))
	t.Cleanup(client.Close)
	for _, a := range agents {
		testutil.WaitFor(t, 15*time.Second, func() bool { return a.Epoch() > 0 })
	}
	return srv, agents, client
}

func waitApp(t testing.TB, c *rpc.Client, id string) rpc.AppInfo {
	t.Helper()
	var index uint64
	deadline := time.Now().Add(60 * time.Second)
	for time.Now().Before(deadline) {
		req := &rpc.AppRequest{AppID: id}
		req.MinQueryIndex, req.MaxWait = index, 5*time.Second
		var resp rpc.AppStatusResponse
		if err := c.Call(context.Background(), "App.Status", req, &resp); err != nil {
			t.Fatal(err)
		}
		index = resp.Index
		if scheduler.AppState(resp.App.State).Terminal() {
			return resp.App
		}
	}
	t.Fatalf("app %s did not end", id)
	return rpc.AppInfo{}
}

func TestAppRunsToCompletionInProcess(t *testing.T) {
	_, _, c := cluster(t, 2)
	var sub rpc.AppSubmitResponse
	spec := scheduler.AppSpec{User: "test", DShell: scheduler.DShell{NumContainers: 4, Command: []string{"sh", "-c", "echo task $WEFT_TASK_INDEX $WEFT_CONTAINER_ID on $WEFT_NODE_ID"}}}
	if err := c.Call(context.Background(), "App.Submit", &rpc.AppSubmitRequest{Spec: spec}, &sub); err != nil {
		t.Fatal(err)
	}
	app := waitApp(t, c, sub.AppID)
	if app.State != "FINISHED" || app.AMAttempts != 1 {
		t.Fatalf("app ended %+v", app)
	}
	var list rpc.ContainerListResponse
	if err := c.Call(context.Background(), "Container.List", &rpc.ContainerListRequest{AppID: sub.AppID}, &list); err != nil {
		t.Fatal(err)
	}
	tasks := 0
	indexes := map[int]bool{}
	for _, ci := range list.Containers {
		if ci.IsAM {
			continue
		}
		tasks++
		if ci.State != "COMPLETED" || ci.Reason != "exited" || ci.ExitCode == nil || *ci.ExitCode != 0 {
			t.Fatalf("task container %+v", ci)
		}
		var logs rpc.ContainerLogsResponse
		if err := c.Call(context.Background(), "Container.Logs", &rpc.ContainerLogsRequest{ID: ci.ID}, &logs); err != nil {
			t.Fatal(err)
		}
		var index int
		if _, err := fmt.Sscanf(string(logs.Data), "task %d", &index); err != nil || indexes[index] {
			t.Fatalf("logs of %s = %q: want a task index seen once", ci.ID, logs.Data)
		}
		indexes[index] = true
		if want := fmt.Sprintf("task %d %s on %s\n", index, ci.ID, ci.NodeID); string(logs.Data) != want {
			t.Fatalf("logs of %s = %q, want %q", ci.ID, logs.Data, want)
		}
	}
	if tasks != 4 || !indexes[0] || !indexes[3] {
		t.Fatalf("%d task containers with task indexes %v, want 4: 0 to 3", tasks, indexes)
	}
	// Every resource was given back.
	var nodes rpc.NodeListResponse
	testutil.WaitFor(t, 10*time.Second, func() bool {
		c.Call(context.Background(), "Node.List", &rpc.RequestHeader{}, &nodes)
		for _, n := range nodes.Nodes {
			if !n.AllocatedGuaranteed.IsZero() {
				return false
			}
		}
		return len(nodes.Nodes) == 2
	})
}

func TestKilledAppStopsItsContainers(t *testing.T) {
	_, _, c := cluster(t, 1)
	var sub rpc.AppSubmitResponse
	spec := scheduler.AppSpec{User: "test", DShell: scheduler.DShell{NumContainers: 2, Command: []string{"sleep", "300"}}}
	if err := c.Call(context.Background(), "App.Submit", &rpc.AppSubmitRequest{Spec: spec}, &sub); err != nil {
		t.Fatal(err)
	}
	testutil.WaitFor(t, 30*time.Second, func() bool {
		var st rpc.AppStatusResponse
		c.Call(context.Background(), "App.Status", &rpc.AppRequest{AppID: sub.AppID}, &st)
		return st.App.Containers.Running == 3 // the AM and two tasks
	})
	var wr rpc.WriteResponse
	if err := c.Call(context.Background(), "App.Kill", &rpc.AppRequest{AppID: sub.AppID}, &wr); err != nil {
		t.Fatal(err)
	}
	testutil.WaitFor(t, 30*time.Second, func() bool {
		var list rpc.ContainerListResponse
		c.Call(context.Background(), "Container.List", &rpc.ContainerListRequest{AppID: sub.AppID}, &list)
		for _, ci := range list.Containers {
			if ci.State != "COMPLETED" {
				return false
			}
		}
		return len(list.Containers) == 3
	})
	var st rpc.AppStatusResponse
	c.Call(context.Background(), "App.Status", &rpc.AppRequest{AppID: sub.AppID}, &st)
	if st.App.State != "KILLED" {
		t.Fatalf("app %+v", st.App)
	}
}

// The leader deals its list out: an agent that runs no AM holds one entry
// of it, with its free room and no queue place, and knows how many nodes
// the whole list had (an agent running AMs holds a window of its own: the
// amWorld tests' waitList).
func TestLeaderPushesTheLeastLoadedList(t *testing.T) {
	_, agents, _ := cluster(t, 3)
	for _, a := range agents {
		testutil.WaitFor(t, 15*time.Second, func() bool {
			a.sched.mu.Lock()
			defer a.sched.mu.Unlock()
			list, _ := a.sched.dist.List()
			return len(list) == 1 && a.sched.dist.Candidates() == 3
		})
		for _, n := range a.LeastLoaded() {
			// An idle node, all its resources free; an agent without AMs
			// may start containers there but not queue them.
			if n.QueueSpace != 0 || n.Free.Vcores != 4 || n.Free.MemoryMB != 2048 || n.Address == "" {
				t.Fatalf("list entry %+v", n)
			}
		}
	}
}
