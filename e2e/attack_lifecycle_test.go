package e2e

import (
	"fmt"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// appBlacklist is the part of `weft app status -json` about blacklisting.
type appBlacklist struct {
	MaxFailuresPerNode int      `json:"max_failures_per_node"`
	Blacklist          []string `json:"blacklist"`
	BlacklistIgnored   bool     `json:"blacklist_ignored"`
	Attempts           []struct {
		NodeID string `json:"node_id"`
	} `json:"attempts"`
}

func (w *world) blacklist(id string) appBlacklist {
	w.t.Helper()
	var a appBlacklist
	if err := cliJSON(w.t, &a, "app", "status", id, "-address", w.any()); err != nil {
		w.t.Fatal(err)
	}
	return a
}

// waitingTask is a dshell command that waits for dir/go, then records its
// task's success in dir as done.TASK.CONTAINER.
func waitingTask(dir string) []string {
	return []string{"--", "sh", "-c", fmt.Sprintf(`while [ ! -e %q ]; do sleep 0.1; done; touch %q/done.$WEFT_TASK_INDEX.$WEFT_CONTAINER_ID`,
		filepath.Join(dir, "go"), dir)}
}

// successes lists, per task index, the containers that recorded its
// success in dir.
func successes(t *testing.T, dir string) map[string][]string {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(dir, "done.*"))
	if err != nil {
		t.Fatal(err)
	}
	out := map[string][]string{}
	for _, f := range files {
		parts := strings.SplitN(filepath.Base(f), ".", 3)
		out[parts[1]] = append(out[parts[1]], parts[2])
	}
	return out
}

// SIGTERM of an agent is how a node is upgraded or rebooted: it must fail
// no app. An agent running two tasks of a four-task dshell app is stopped
// gracefully on a secure cluster: its containers end node_stopped, the AM
// runs the two tasks again elsewhere without counting a failure, and the
// app FINISHES with each task's success recorded exactly once. Then the
// agent running an app's AM (max_am_attempts 1) is stopped: the attempt
// was taken away, not failed, so a new one runs and the app finishes.
// (Before node_stopped, the first app ended "FAILED: 2 of 4 containers
// failed: task 0 (killed, exit code none)".)
func TestGracefulAgentStopFailsNoApp(t *testing.T) {
	w := startWorld(t)
	dir := t.TempDir()
	id := w.submit(append([]string{"-num-containers", "4", "-max-am-attempts", "1"}, waitingTask(dir)...)...)
	var victim string
	waitFor(t, 60*time.Second, "four running tasks, two on a node without the AM", func() error {
		hosts, am, running := map[string]int{}, "", 0
		for _, c := range w.containers(id) {
			switch {
			case c.IsAM:
				am = c.NodeID
			case c.State == "RUNNING":
				running++
				hosts[c.NodeID]++
			}
		}
		victim = ""
		for _, n := range []string{"a1", "a2", "a3"} {
			if n != am && hosts[n] == 2 {
				victim = n
			}
		}
		if running != 4 || victim == "" {
			return fmt.Errorf("%d running, by node %v, AM on %s", running, hosts, am)
		}
		return nil
	})
	if err := w.agents[victim].stop(syscall.SIGTERM, 30*time.Second); err != nil {
		t.Fatalf("%s exited with %v after SIGTERM", victim, err)
	}
	if err := os.WriteFile(filepath.Join(dir, "go"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	a := w.waitApp(id, 90*time.Second)
	if a.State != "FINISHED" || a.AMAttempts != 1 {
		t.Fatalf("app after SIGTERM of %s: %+v; want FINISHED by its first AM", victim, a)
	}
	stopped, exited := 0, 0
	for _, c := range tasks(w.containers(id)) {
		switch {
		case c.NodeID == victim && c.Reason == "node_stopped" && c.ExitCode == nil:
			stopped++
		case c.NodeID != victim && exitedZero(c):
			exited++
		default:
			t.Errorf("task container %+v: want node_stopped on %s or exited 0 elsewhere", c, victim)
		}
	}
	if stopped != 2 || exited != 4 {
		t.Fatalf("%d containers node_stopped on %s, %d exited 0 elsewhere; want 2 and 4", stopped, victim, exited)
	}
	done := successes(t, dir)
	for _, task := range []string{"0", "1", "2", "3"} {
		if len(done[task]) != 1 {
			t.Errorf("task %s recorded its success %d times (%v), want once", task, len(done[task]), done[task])
		}
	}
	if len(done) != 4 {
		t.Fatalf("successes recorded %v, want one for each of tasks 0 to 3", done)
	}

	// An AM on the stopping node: its attempt does not count.
	dir2 := t.TempDir()
	id2 := w.submit(append([]string{"-num-containers", "2", "-max-am-attempts", "1"}, waitingTask(dir2)...)...)
	var amNode string
	waitFor(t, 60*time.Second, "the second app's AM and tasks running", func() error {
		running := 0
		for _, c := range w.containers(id2) {
			if c.IsAM && c.State == "RUNNING" {
				amNode = c.NodeID
			} else if c.State == "RUNNING" {
				running++
			}
		}
		if amNode == "" || running != 2 {
			return fmt.Errorf("AM on %q, %d tasks running", amNode, running)
		}
		return nil
	})
	if err := w.agents[amNode].stop(syscall.SIGTERM, 30*time.Second); err != nil {
		t.Fatalf("%s exited with %v after SIGTERM", amNode, err)
	}
	if err := os.WriteFile(filepath.Join(dir2, "go"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	a2 := w.waitApp(id2, 90*time.Second)
	if a2.State != "FINISHED" || a2.AMAttempts != 2 {
		t.Fatalf("app whose AM's node was stopped (max_am_attempts 1): %+v; want FINISHED by a second attempt", a2)
	}
	for _, c := range w.containers(id2) {
		if c.IsAM && c.NodeID == amNode && c.Reason != "node_stopped" {
			t.Fatalf("the first AM's container ended %q, want node_stopped", c.Reason)
		}
	}
}

// A black-hole node — one whose container starts all fail, that every
// placement prefers — must not make an AM hammer it: a one-task app's AM
// backs off, blacklists the node after max_failures_per_node (3) failures
// there (one of four READY nodes: the blacklist is in force), and the app
// finishes on another node. The hole is a real agent
// (a0) that cannot run the command (no PATH), with room for tasks but not
// for an AM, and the ID that wins every tie of an idle cluster. (Before,
// the app failed after three containers on a0; an unreachable node drew
// thousands.)
func TestABlackHoleNodeIsBlacklisted(t *testing.T) {
	w := startWorld(t)
	ip := "127.0.0.8"
	rpcPort, serfPort := freePort(t, ip), freePort(t, ip)
	args := []string{"agent", "-node-id", "a0", "-data-dir", filepath.Join(t.TempDir(), "a0"), "-bind", ip,
		"-rpc-port", strconv.Itoa(rpcPort), "-serf-port", strconv.Itoa(serfPort),
		"-join", net.JoinHostPort(w.ips[0], strconv.Itoa(w.serfPort)),
		"-resources", "memory_mb=200,vcores=1000", "-rack", "/rack0", "-allow-root", "-config", w.sec.config("agent", "a0")}
	w.sec.join(w.any(), "a0")
	env := slices.DeleteFunc(os.Environ(), func(kv string) bool { return strings.HasPrefix(kv, "PATH=") })
	w.agents["a0"] = startProcEnv(t, "a0", append(env, "PATH=/nonexistent"), args...)
	waitFor(t, 30*time.Second, "a0 READY", func() error {
		for _, n := range w.nodes("s1") {
			if n.ID == "a0" && n.Status == "READY" {
				return nil
			}
		}
		return fmt.Errorf("nodes %+v", w.nodes("s1"))
	})

	id := w.submit("-num-containers", "1", "--", "sh", "-c", "exit 0")
	a := w.waitApp(id, 90*time.Second)
	if a.State != "FINISHED" {
		t.Fatalf("one-task app with a black hole in the cluster: %+v", a)
	}
	onHole, elsewhere := 0, 0
	for _, c := range tasks(w.containers(id)) {
		switch {
		case c.NodeID == "a0":
			onHole++
			if c.Reason != "failed" {
				t.Errorf("container on a0 %+v: want failed", c)
			}
		case exitedZero(c):
			elsewhere++
		}
	}
	// a0 wins every placement until it is blacklisted: exactly three.
	if onHole != 3 || elsewhere != 1 {
		t.Fatalf("%d containers on a0, %d exited 0 elsewhere; want 3 on a0 (then blacklisted), and 1 elsewhere", onHole, elsewhere)
	}
	b := w.blacklist(id)
	if !slices.Equal(b.Blacklist, []string{"a0"}) || b.BlacklistIgnored || b.MaxFailuresPerNode != 3 {
		t.Fatalf("app's blacklist %+v after %d failures on a0: want [a0], in force, max_failures_per_node 3", b, onHole)
	}
	t.Logf("one-task app: %d containers on the black hole, then blacklisted %v; finished after %s", onHole, b.Blacklist,
		time.Duration(a.FinishedAt-a.SubmittedAt).Round(time.Millisecond))
}
