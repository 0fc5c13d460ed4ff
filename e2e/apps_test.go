package e2e

import (
	"bytes"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"
)

type containerInfo struct {
	ID            string `json:"id"`
	ExecutionType string `json:"execution_type"`
	AppID         string `json:"app_id"`
	NodeID        string `json:"node_id"`
	State         string `json:"state"`
	ExitCode      *int   `json:"exit_code"`
	Reason        string `json:"reason"`
	IsAM          bool   `json:"is_am"`
	AllocatedAt   int64  `json:"allocated_at"`
	StartedAt     int64  `json:"started_at"`
	FinishedAt    int64  `json:"finished_at"`
}

type appInfo struct {
	ID          string `json:"id"`
	State       string `json:"state"`
	Diagnostics string `json:"diagnostics"`
	AMAttempts  int    `json:"am_attempts"`
	SubmittedAt int64  `json:"submitted_at"`
	FinishedAt  int64  `json:"finished_at"`
}

type nodeInfo struct {
	ID                   string `json:"id"`
	Address              string `json:"address"`
	Status               string `json:"status"`
	RunningGuaranteed    int    `json:"running_guaranteed"`
	RunningOpportunistic int    `json:"running_opportunistic"`
	Queued               int    `json:"queued"`
}

// world is a quorum of three servers plus three agents, every agent joined
// by gossip to s1 only.
type world struct {
	*quorum
	agentIPs []string
	agents   map[string]*proc
}

func startWorld(t *testing.T) *world { return startWorldWith(t, nil) }

// startWorldWith is startWorld with extra flags for some agents (a1, a2,
// a3); later flags override earlier ones.
func startWorldWith(t *testing.T, extra map[string][]string) *world {
	return startWorldOn(t, startQuorum(t), 3, extra)
}

// startWorldOn starts n agents (a1 on 127.0.0.4, a2 on .5, ...; at most
// six; odd ones in /rack0, even ones in /rack1) joined to quorum q, with
// extra flags for some of them.
func startWorldOn(t testing.TB, q *quorum, n int, extra map[string][]string) *world {
	q.waitForLeader("s1", 30*time.Second, "")
	w := &world{quorum: q, agentIPs: []string{"127.0.0.4", "127.0.0.5", "127.0.0.6", "127.0.0.7", "127.0.0.8", "127.0.0.9"}[:n], agents: map[string]*proc{}}
	rpcPort, serfPort := freePort(t, w.agentIPs...), freePort(t, w.agentIPs...)
	join := net.JoinHostPort(q.ips[0], strconv.Itoa(q.serfPort))
	var dirs []string
	for i, ip := range w.agentIPs {
		id := fmt.Sprintf("a%d", i+1)
		dir := filepath.Join(t.TempDir(), id)
		dirs = append(dirs, dir)
		args := []string{"agent", "-node-id", id, "-data-dir", dir, "-bind", ip,
			"-rpc-port", strconv.Itoa(rpcPort), "-serf-port", strconv.Itoa(serfPort), "-join", join,
			"-resources", "memory_mb=2048,vcores=4", "-rack", fmt.Sprintf("/rack%d", i%2),
			// Containers run as the test's user even as root: they write
			// into the test's private temporary directories.
			"-allow-root"}
		if q.sec != nil {
			args = append(args, "-config", q.sec.config("agent", id))
			q.sec.join(strings.Join([]string{q.rpcAddr("s1"), q.rpcAddr("s2"), q.rpcAddr("s3")}, ","), id)
		}
		w.agents[id] = startProc(t, id, append(args, extra[id]...)...)
	}
	amLogsOnFailure(t, dirs)
	waitFor(t, 30*time.Second, fmt.Sprintf("%d READY nodes", n), func() error {
		nodes := w.nodes("s2")
		ready := 0
		for _, node := range nodes {
			if node.Status == "READY" {
				ready++
			}
		}
		if ready != n {
			return fmt.Errorf("nodes %+v", nodes)
		}
		return nil
	})
	return w
}

// any returns the address list of every server, so the CLI rotates past
// a dead one.
func (w *world) any() string {
	var addrs []string
	for _, id := range []string{"s1", "s2", "s3"} {
		addrs = append(addrs, w.rpcAddr(id))
	}
	return strings.Join(addrs, ",")
}

func (w *world) nodes(via string) []nodeInfo {
	var ns []nodeInfo
	cliJSON(w.t, &ns, "node", "list", "-address", w.rpcAddr(via))
	return ns
}

func (w *world) submit(args ...string) string {
	w.t.Helper()
	var resp struct {
		AppID string `json:"app_id"`
	}
	if err := cliJSON(w.t, &resp, append([]string{"app", "submit", "-address", w.any()}, args...)...); err != nil {
		w.t.Fatal(err)
	}
	return resp.AppID
}

func (w *world) app(id string) appInfo {
	var a appInfo
	if err := cliJSON(w.t, &a, "app", "status", id, "-address", w.any()); err != nil {
		w.t.Fatal(err)
	}
	return a
}

func (w *world) containers(app string) []containerInfo {
	var cs []containerInfo
	if err := cliJSON(w.t, &cs, "container", "list", "-app", app, "-address", w.any()); err != nil {
		w.t.Fatal(err)
	}
	return cs
}

func (w *world) waitApp(id string, timeout time.Duration) appInfo {
	w.t.Helper()
	var a appInfo
	waitFor(w.t, timeout, "app "+id+" to end", func() error {
		a = w.app(id)
		switch a.State {
		case "FINISHED", "FAILED", "KILLED":
			return nil
		}
		return fmt.Errorf("app is %s", a.State)
	})
	return a
}

func tasks(cs []containerInfo) []containerInfo {
	var out []containerInfo
	for _, c := range cs {
		if !c.IsAM {
			out = append(out, c)
		}
	}
	return out
}

func exitedZero(c containerInfo) bool {
	return c.State == "COMPLETED" && c.Reason == "exited" && c.ExitCode != nil && *c.ExitCode == 0
}

func TestAgentsRunAppsThroughFailures(t *testing.T) {
	w := startWorld(t)

	// Six members alive in s3's view too: three servers, three agents
	// (joined to s1 only; gossip brings them to s3, eventually).
	waitFor(t, 30*time.Second, "s3 to see six members alive", func() error {
		var members []member
		if err := cliJSON(t, &members, "members", "-address", w.rpcAddr("s3")); err != nil {
			return err
		}
		roles := map[string]int{}
		for _, m := range members {
			if m.Status == "alive" {
				roles[m.Role]++
			}
		}
		if roles["server"] != 3 || roles["agent"] != 3 {
			return fmt.Errorf("members: %+v", members)
		}
		return nil
	})

	t.Run("six sleep containers finish", func(t *testing.T) {
		w.t = t
		id := w.submit("-num-containers", "6", "--", "sleep", "1")
		if a := w.waitApp(id, 60*time.Second); a.State != "FINISHED" {
			t.Fatalf("app %+v", a)
		}
		ts := tasks(w.containers(id))
		if len(ts) != 6 {
			t.Fatalf("%d task containers, want 6", len(ts))
		}
		first := int64(0)
		for _, c := range ts {
			if !exitedZero(c) {
				t.Fatalf("task %+v", c)
			}
			if first == 0 || c.StartedAt < first {
				first = c.StartedAt
			}
		}
		t.Logf("submit to first task container running: %s", time.Duration(first-w.app(id).SubmittedAt).Round(time.Millisecond))
	})

	t.Run("a killed agent's containers are lost and the app finishes elsewhere", func(t *testing.T) {
		w.t = t
		id := w.submit("-num-containers", "6", "--", "sleep", "4")
		var victim string
		waitFor(t, 60*time.Second, "six running tasks", func() error {
			cs := w.containers(id)
			running, am := 0, ""
			hosts := map[string]int{}
			for _, c := range cs {
				if c.IsAM {
					am = c.NodeID
				} else if c.State == "RUNNING" {
					running++
					hosts[c.NodeID]++
				}
			}
			if running != 6 {
				return fmt.Errorf("%d running", running)
			}
			for _, n := range []string{"a1", "a2", "a3"} {
				if n != am && hosts[n] > 0 {
					victim = n
				}
			}
			if victim == "" {
				return fmt.Errorf("every task shares the AM's node")
			}
			return nil
		})
		w.agents[victim].kill()
		waitFor(t, 30*time.Second, victim+" marked DOWN", func() error {
			for _, n := range w.nodes("s2") {
				if n.ID == victim && n.Status == "DOWN" {
					return nil
				}
			}
			return fmt.Errorf("not down yet")
		})
		a := w.waitApp(id, 90*time.Second)
		if a.State != "FINISHED" {
			t.Fatalf("app %+v", a)
		}
		lost, ok := 0, 0
		for _, c := range tasks(w.containers(id)) {
			switch {
			case c.NodeID == victim:
				if c.Reason != "lost" {
					t.Fatalf("container on the killed node ended %s, want lost", c.Reason)
				}
				lost++
			case exitedZero(c):
				ok++
			}
		}
		if lost == 0 || ok != 6 {
			t.Fatalf("%d lost, %d exited 0; want some lost and 6 finished", lost, ok)
		}
	})

	t.Run("a leader kill neither stops an app nor doubles its containers", func(t *testing.T) {
		w.t = t
		// 16 tasks on the two surviving agents (7 slots each beside the AM)
		// run in waves, so the new leader has to place some of them.
		id := w.submit("-num-containers", "16", "--", "sleep", "2")
		waitFor(t, 60*time.Second, "the first wave running", func() error {
			running := 0
			for _, c := range tasks(w.containers(id)) {
				if c.State == "RUNNING" {
					running++
				}
			}
			if running < 4 {
				return fmt.Errorf("%d running", running)
			}
			return nil
		})
		leader := w.waitForLeader("s2", 10*time.Second, "")
		killedAt := time.Now()
		w.procs[leader].kill()
		a := w.waitApp(id, 120*time.Second)
		if a.State != "FINISHED" {
			t.Fatalf("app %+v", a)
		}
		ts := tasks(w.containers(id))
		if len(ts) != 16 {
			t.Fatalf("%d task containers for 16 tasks: the failover started extra ones", len(ts))
		}
		var after []int64
		for _, c := range ts {
			if !exitedZero(c) {
				t.Fatalf("task %+v", c)
			}
			if c.StartedAt > killedAt.UnixNano() {
				after = append(after, c.StartedAt)
			}
		}
		if len(after) == 0 {
			t.Fatalf("no container started after the leader was killed; the test did not exercise the new leader")
		}
		sort.Slice(after, func(i, j int) bool { return after[i] < after[j] })
		t.Logf("leader %s killed; next container start after %s", leader, time.Duration(after[0]-killedAt.UnixNano()).Round(time.Millisecond))
	})
}

// amLogsOnFailure logs the tail of every dshell AM's log under the agents'
// data dirs when the test has failed: AMs log to their container's stderr.
func amLogsOnFailure(t testing.TB, dirs []string) {
	t.Cleanup(func() {
		if !t.Failed() {
			return
		}
		for _, d := range dirs {
			files, _ := filepath.Glob(filepath.Join(d, "containers", "*", "*", "stderr"))
			for _, f := range files {
				if b, err := os.ReadFile(f); err == nil && bytes.Contains(b, []byte("weft.dshell")) {
					t.Logf("---- AM log %s (last 4 KiB) ----\n%s", f, tail(b, 4096))
				}
			}
		}
	})
}
