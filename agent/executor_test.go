package agent

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/weft-sched/weft/internal/testutil"
)

func waitDone(t *testing.T, p *process) {
	t.Helper()
	select {
	case <-p.done:
	case <-time.After(10 * time.Second):
		t.Fatalf("process did not exit")
	}
}

// eachStart runs test once for each way an agent starts containers:
// directly, and through the container init in namespaces of their own.
// What a container's life looks like from the agent (exit codes, logs,
// kills, leftovers) must not depend on which.
func eachStart(t *testing.T, test func(t *testing.T, iso isolation)) {
	for _, mode := range []struct {
		name string
		iso  isolation
	}{{"direct", isolation{}}, {"namespaces", namespaced(t)}} {
		t.Run(mode.name, func(t *testing.T) { test(t, mode.iso) })
	}
}

var pathEnv = []string{"PATH=" + os.Getenv("PATH")}

// waitForOutput waits until the container in dir has written want to its
// stdout.
func waitForOutput(t *testing.T, dir, want string) {
	t.Helper()
	testutil.WaitForNoError(t, 10*time.Second, "the container's output", func() error {
		if b, _ := os.ReadFile(filepath.Join(dir, stdoutFile)); !strings.Contains(string(b), want) {
			return fmt.Errorf("stdout so far: %q", b)
		}
		return nil
	})
}

func TestProcessExitCodesAndLogs(t *testing.T) {
	eachStart(t, func(t *testing.T, iso isolation) {
		dir := t.TempDir()
		p, err := iso.startProcess(dir, []string{"sh", "-c", "echo out; echo err >&2; pwd; exit 7"}, pathEnv, noCgroup, nil)
		if err != nil {
			t.Fatal(err)
		}
		waitDone(t, p)
		if p.exitCode == nil || *p.exitCode != 7 {
			t.Fatalf("exit code %v, want 7", p.exitCode)
		}
		out, _ := os.ReadFile(filepath.Join(dir, stdoutFile))
		errOut, _ := os.ReadFile(filepath.Join(dir, stderrFile))
		if string(out) != "out\n"+filepath.Join(dir, workDir)+"\n" || string(errOut) != "err\n" {
			t.Fatalf("stdout %q stderr %q", out, errOut)
		}
		if describeExit(p) != "exit code 7" {
			t.Fatalf("describeExit = %q", describeExit(p))
		}
	})
}

func TestProcessKilledBySignalHasNoExitCode(t *testing.T) {
	eachStart(t, func(t *testing.T, iso isolation) {
		p, err := iso.startProcess(t.TempDir(), []string{"sh", "-c", "kill -USR1 $$"}, pathEnv, noCgroup, nil)
		if err != nil {
			t.Fatal(err)
		}
		waitDone(t, p)
		if p.exitCode != nil {
			t.Fatalf("a command killed by a signal reported exit code %d", *p.exitCode)
		}
		if got := describeExit(p); got != "killed by signal user defined signal 1" {
			t.Fatalf("describeExit = %q", got)
		}
	})
}

func TestProcessEnvironment(t *testing.T) {
	eachStart(t, func(t *testing.T, iso isolation) {
		dir := t.TempDir()
		p, err := iso.startProcess(dir, []string{"sh", "-c", "echo $WEFT_CONTAINER_ID"}, append([]string{"WEFT_CONTAINER_ID=c-1-2"}, pathEnv...), noCgroup, nil)
		if err != nil {
			t.Fatal(err)
		}
		waitDone(t, p)
		if out, _ := os.ReadFile(filepath.Join(dir, stdoutFile)); string(out) != "c-1-2\n" {
			t.Fatalf("stdout %q", out)
		}
	})
}

func TestStartFailure(t *testing.T) {
	eachStart(t, func(t *testing.T, iso isolation) {
		if _, err := iso.startProcess(t.TempDir(), []string{"/nonexistent/binary"}, nil, noCgroup, nil); err == nil {
			t.Fatal("started a missing binary")
		}
		if _, err := iso.startProcess(t.TempDir(), []string{"no-such-command-on-the-path"}, pathEnv, noCgroup, nil); err == nil {
			t.Fatal("started a missing command")
		}
		if _, err := iso.startProcess(t.TempDir(), nil, nil, noCgroup, nil); err == nil {
			t.Fatal("started an empty command")
		}
	})
}

func alive(pid int) bool { return syscall.Kill(pid, 0) == nil }

func TestKillReachesTheWholeProcessGroup(t *testing.T) {
	eachStart(t, func(t *testing.T, iso isolation) {
		dir := t.TempDir()
		// The shell starts a background child and records its pid, then waits.
		p, err := iso.startProcess(dir, []string{"sh", "-c", "sleep 300 & echo $! > child; wait"}, pathEnv, noCgroup, nil)
		if err != nil {
			t.Fatal(err)
		}
		childFile := filepath.Join(dir, workDir, "child")
		var child int
		testutil.WaitFor(t, 10*time.Second, func() bool {
			if b, err := os.ReadFile(childFile); err == nil && strings.HasSuffix(string(b), "\n") {
				child, _ = strconv.Atoi(strings.TrimSpace(string(b)))
			}
			return child != 0
		})
		child = hostPID(t, p, child)
		if !alive(child) {
			t.Fatalf("background child not running (pid %d)", child)
		}
		p.kill(5 * time.Second)
		if p.exitCode != nil {
			t.Fatalf("a signalled process reported exit code %d", *p.exitCode)
		}
		// The child is reaped by init; poll until it is gone.
		testutil.WaitForNoError(t, 10*time.Second, "the background child gone", func() error {
			if alive(child) {
				return fmt.Errorf("pid %d is alive", child)
			}
			return nil
		})
	})
}

func TestKillEscalatesToSIGKILLAfterGrace(t *testing.T) {
	eachStart(t, func(t *testing.T, iso isolation) {
		dir := t.TempDir()
		p, err := iso.startProcess(dir, []string{"sh", "-c", "trap '' TERM; echo ready; while :; do sleep 1; done"}, pathEnv, noCgroup, nil)
		if err != nil {
			t.Fatal(err)
		}
		waitForOutput(t, dir, "ready\n")
		p.kill(200 * time.Millisecond)
		if !p.status.Signaled() || p.status.Signal() != syscall.SIGKILL {
			t.Fatalf("process ended with %v, want SIGKILL", p.status)
		}
	})
}

func TestKillLeftovers(t *testing.T) {
	eachStart(t, func(t *testing.T, iso isolation) {
		root := t.TempDir()
		dir := filepath.Join(root, "app-1", "c-1-0")
		p, err := iso.startProcess(dir, []string{"sleep", "300"}, pathEnv, noCgroup, nil)
		if err != nil {
			t.Fatal(err)
		}
		if n := killLeftovers(root); n != 1 {
			t.Fatalf("killed %d leftover groups, want 1", n)
		}
		waitDone(t, p)
		if _, err := os.Stat(filepath.Join(dir, pidFile)); !os.IsNotExist(err) {
			t.Fatalf("pid file not removed")
		}
	})
}
