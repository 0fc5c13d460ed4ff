package e2e

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// Pausing and overcommit on a real agent with real processes
// (docs/opportunistic.md): a guaranteed arrival stops the opportunistic
// container in its way (its process stopped, or frozen with its cgroup)
// and it goes on when the
// guaranteed work ends, losing nothing; and a node that overcommits runs an
// opportunistic container in the vcore an idle AM holds.
func TestOpportunisticPauseAndOvercommit(t *testing.T) {
	q := startQuorum(t)
	q.sec.agentExtra = "opportunistic {\n  pause = true\n  overcommit = { vcores = 1.0 }\n}\n"
	w := startWorldOn(t, q, 1, nil) // one node: 4 vcores, 2,048 MB

	// An opportunistic task takes the three vcores its AM leaves.
	opp := w.submit("-container-type", "OPPORTUNISTIC", "-enforce-execution-type", "-num-containers", "1", "-vcores", "3",
		"-memory-mb", "256", "--", "sleep", "12")
	var task containerInfo
	waitFor(t, 60*time.Second, "the opportunistic task to run", func() error {
		for _, c := range tasks(w.containers(opp)) {
			if c.State == "RUNNING" {
				task = c
				return nil
			}
		}
		return fmt.Errorf("containers %+v", w.containers(opp))
	})
	pid := containerPID(t, w, "a1", task)

	// A guaranteed app arrives: its AM needs a vcore, so the task pauses.
	guar := w.submit("-num-containers", "1", "-vcores", "2", "-memory-mb", "256", "--", "sleep", "3")
	waitFor(t, 60*time.Second, "the opportunistic task to pause", func() error {
		for _, c := range w.containers(opp) {
			if c.ID == task.ID && c.State == "PAUSED" {
				return nil
			}
		}
		return fmt.Errorf("containers %+v", w.containers(opp))
	})
	if how := stoppedHow(pid); how == "" {
		t.Fatalf("the paused task's process (%d) is in state %q, neither stopped (T) nor frozen with its cgroup", pid, procState(pid))
	} else {
		t.Logf("the paused task's process is %s", how)
	}
	if a := w.waitApp(guar, 120*time.Second); a.State != "FINISHED" {
		t.Fatalf("guaranteed app %+v", a)
	}
	if a := w.waitApp(opp, 120*time.Second); a.State != "FINISHED" {
		t.Fatalf("opportunistic app %+v", a)
	}
	ts := tasks(w.containers(opp))
	if len(ts) != 1 || ts[0].ID != task.ID || !exitedZero(ts[0]) {
		t.Fatalf("opportunistic tasks %+v: want the one container, resumed and exited 0 (no work lost)", ts)
	}

	// Overcommit: a four-vcore opportunistic task on the four-vcore node
	// beside its own AM, which holds a vcore and uses none.
	big := w.submit("-container-type", "OPPORTUNISTIC", "-enforce-execution-type", "-num-containers", "1", "-vcores", "4",
		"-memory-mb", "256", "--", "sleep", "4")
	sawRunning := false
	waitFor(t, 90*time.Second, "the four-vcore task to run beside its AM", func() error {
		for _, c := range tasks(w.containers(big)) {
			if c.State == "RUNNING" {
				sawRunning = true
			}
		}
		if !sawRunning {
			return fmt.Errorf("containers %+v", w.containers(big))
		}
		return nil
	})
	out, _, code := cli(t, "node", "status", "a1", "-address", w.any())
	if code != 0 || !strings.Contains(out, "Used (measured)") || !strings.Contains(out, "Overcommit") {
		t.Fatalf("node status (exit %d) does not show measured use and the overcommit limit:\n%s", code, out)
	}
	if a := w.waitApp(big, 120*time.Second); a.State != "FINISHED" {
		t.Fatalf("overcommitted app %+v", a)
	}
}

// containerPID reads the pid file an agent keeps in a container's
// directory: the process the agent started (the container init, whose
// command runs below it).
func containerPID(t *testing.T, w *world, agent string, c containerInfo) int {
	t.Helper()
	args := w.agents[agent].args
	var dataDir string
	for i, a := range args {
		if a == "-data-dir" && i+1 < len(args) {
			dataDir = args[i+1]
		}
	}
	files, _ := filepath.Glob(filepath.Join(dataDir, "containers", "*", c.ID, "pid"))
	if len(files) != 1 {
		t.Fatalf("pid file of %s under %s: %v", c.ID, dataDir, files)
	}
	b, err := os.ReadFile(files[0])
	pid, _ := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil || pid <= 1 {
		t.Fatalf("pid file %s: %q, %v", files[0], b, err)
	}
	return pid
}

// stoppedHow says how a process is held still: "stopped (T)" by SIGSTOP,
// or "frozen (<its freezer cgroup>)" where its agent pauses with the
// cgroup freezer (v1 freezer.state FROZEN, v2 cgroup.freeze 1); "" if it
// is neither.
func stoppedHow(pid int) string {
	if procState(pid) == "T" {
		return "stopped (T)"
	}
	b, _ := os.ReadFile(fmt.Sprintf("/proc/%d/cgroup", pid))
	for _, line := range strings.Split(string(b), "\n") {
		f := strings.SplitN(line, ":", 3)
		if len(f) != 3 || f[2] == "/" {
			continue
		}
		var file, want string
		switch {
		case f[1] == "freezer":
			file, want = filepath.Join("/sys/fs/cgroup/freezer", f[2], "freezer.state"), "FROZEN"
		case f[0] == "0":
			mounts, _ := os.ReadFile("/proc/self/mounts")
			for _, m := range strings.Split(string(mounts), "\n") {
				if mf := strings.Fields(m); len(mf) > 2 && mf[2] == "cgroup2" {
					file, want = filepath.Join(mf[1], f[2], "cgroup.freeze"), "1"
				}
			}
		}
		if state, err := os.ReadFile(file); file != "" && err == nil && strings.TrimSpace(string(state)) == want {
			return "frozen (" + file + ")"
		}
	}
	return ""
}

// procState is a process's state letter in /proc (R, S, T, ...); "" when
// it is gone.
func procState(pid int) string {
	b, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "stat"))
	if err != nil {
		return ""
	}
	s := string(b)
	f := strings.Fields(s[strings.LastIndexByte(s, ')')+1:])
	if len(f) == 0 {
		return ""
	}
	return f[0]
}
