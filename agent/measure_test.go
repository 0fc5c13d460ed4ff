package agent

import (
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/weft-sched/weft/internal/testutil"
)

func TestParseStat(t *testing.T) {
	line := "4242 (a (weird) name) S 17 4242 4242 0 -1 4194304 100 0 0 0 250 50 7 3 20 0 1 0 12345 1000000 300 18446744073709551615"
	e, ok := parseStat([]byte(line))
	if !ok || e.ppid != 17 || e.ticks != 250+50+7+3 || e.rss != 300 {
		t.Fatalf("parsed %+v, %v: want ppid 17, 310 ticks, 300 pages", e, ok)
	}
	if _, ok := parseStat([]byte("12 (short) S 1 2")); ok {
		t.Fatalf("a truncated line parsed")
	}
}

// A process tree is found below its root whatever groups its processes
// made, stopped as a whole and let go on: each process is in state T, then
// not.
func TestSignalTreeStopsEveryDescendant(t *testing.T) {
	dir := t.TempDir()
	pidFile := filepath.Join(dir, "child")
	// The shell starts a child in a process group of its own, as the
	// container init puts its command.
	cmd := exec.Command("sh", "-c", "setsid sh -c 'echo $$ > "+pidFile+"; exec sleep 60' & wait")
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		cmd.Wait()
	})
	var child int
	testutil.WaitFor(t, 10*time.Second, func() bool {
		b, err := os.ReadFile(pidFile)
		child, _ = strconv.Atoi(strings.TrimSpace(string(b)))
		return err == nil && child > 0 && procState(child) == "S"
	})
	t.Cleanup(func() { syscall.Kill(child, syscall.SIGKILL) })
	signalTree("/proc", cmd.Process.Pid, syscall.SIGSTOP)
	testutil.WaitFor(t, 10*time.Second, func() bool { return procState(child) == "T" && procState(cmd.Process.Pid) == "T" })
	signalTree("/proc", cmd.Process.Pid, syscall.SIGCONT)
	testutil.WaitFor(t, 10*time.Second, func() bool { return procState(child) == "S" && procState(cmd.Process.Pid) == "S" })
}

// procState is a process's state letter in /proc (R, S, T, ...).
func procState(pid int) string {
	b, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "stat"))
	if err != nil {
		return ""
	}
	i := strings.LastIndexByte(string(b), ')')
	f := strings.Fields(string(b[i+1:]))
	if len(f) == 0 {
		return ""
	}
	return f[0]
}
