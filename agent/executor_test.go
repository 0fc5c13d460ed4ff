package agent

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

func waitDone(t *testing.T, p *process) {
	t.Helper()
	select {
	case <-p.done:
	case <-time.After(10 * time.Second):
		t.Fatalf("process did not exit")
	}
}

func TestProcessExitCodesAndLogs(t *testing.T) {
	dir := t.TempDir()
	p, err := startProcess(dir, []string{"sh", "-c", "echo out; echo err >&2; pwd; exit 7"}, []string{"PATH=" + os.Getenv("PATH")}, -1, nil)
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
}

func TestProcessEnvironment(t *testing.T) {
	dir := t.TempDir()
	p, err := startProcess(dir, []string{"sh", "-c", "echo $WEFT_CONTAINER_ID"}, []string{"WEFT_CONTAINER_ID=c-1-2", "PATH=" + os.Getenv("PATH")}, -1, nil)
	if err != nil {
		t.Fatal(err)
	}
	waitDone(t, p)
	if out, _ := os.ReadFile(filepath.Join(dir, stdoutFile)); string(out) != "c-1-2\n" {
		t.Fatalf("stdout %q", out)
	}
}

func TestStartFailure(t *testing.T) {
	if _, err := startProcess(t.TempDir(), []string{"/nonexistent/binary"}, nil, -1, nil); err == nil {
		t.Fatal("started a missing binary")
	}
	if _, err := startProcess(t.TempDir(), nil, nil, -1, nil); err == nil {
		t.Fatal("started an empty command")
	}
}

func alive(pid int) bool { return syscall.Kill(pid, 0) == nil }

func TestKillReachesTheWholeProcessGroup(t *testing.T) {
	dir := t.TempDir()
	// The shell starts a background child and records its pid, then waits.
	p, err := startProcess(dir, []string{"sh", "-c", "sleep 300 & echo $! > child; wait"}, []string{"PATH=" + os.Getenv("PATH")}, -1, nil)
	if err != nil {
		t.Fatal(err)
	}
	childFile := filepath.Join(dir, workDir, "child")
	var child int
	deadline := time.Now().Add(10 * time.Second)
	for child == 0 && time.Now().Before(deadline) {
		if b, err := os.ReadFile(childFile); err == nil && strings.HasSuffix(string(b), "\n") {
			child, _ = strconv.Atoi(strings.TrimSpace(string(b)))
		}
		time.Sleep(10 * time.Millisecond)
	}
	if child == 0 || !alive(child) {
		t.Fatalf("background child not running (pid %d)", child)
	}
	p.kill(5 * time.Second)
	if p.exitCode != nil {
		t.Fatalf("a signalled process reported exit code %d", *p.exitCode)
	}
	// The child is reaped by init; poll until it is gone.
	deadline = time.Now().Add(10 * time.Second)
	for alive(child) {
		if time.Now().After(deadline) {
			t.Fatalf("background child %d survived the kill", child)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func TestKillEscalatesToSIGKILLAfterGrace(t *testing.T) {
	dir := t.TempDir()
	p, err := startProcess(dir, []string{"sh", "-c", "trap '' TERM; echo ready; while :; do sleep 1; done"}, []string{"PATH=" + os.Getenv("PATH")}, -1, nil)
	if err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		if b, _ := os.ReadFile(filepath.Join(dir, stdoutFile)); string(b) == "ready\n" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("process never got ready")
		}
		time.Sleep(10 * time.Millisecond)
	}
	p.kill(200 * time.Millisecond)
	ws := p.cmd.ProcessState.Sys().(syscall.WaitStatus)
	if !ws.Signaled() || ws.Signal() != syscall.SIGKILL {
		t.Fatalf("process ended with %v, want SIGKILL", ws)
	}
}

func TestKillLeftovers(t *testing.T) {
	root := t.TempDir()
	dir := filepath.Join(root, "app-1", "c-1-0")
	p, err := startProcess(dir, []string{"sleep", "300"}, []string{"PATH=" + os.Getenv("PATH")}, -1, nil)
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
}
