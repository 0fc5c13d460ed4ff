// Package testutil holds the helpers weft's tests share: waiting for a
// condition instead of sleeping, a logger that writes to the test's log,
// building the weft binary once for tests that start real processes, a
// throwaway certificate authority for tests of mutual TLS (PKI), and a
// gossip member that holds the pool's key and nothing else of weft's
// (RogueGossipMember), and removing the cgroups test agents leave
// (RemoveCgroups).
//
// It is imported only by _test.go files; production code must never import
// it.
package testutil

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
)

// pollInterval is how often WaitFor looks at its condition.
const pollInterval = 10 * time.Millisecond

// Eventually reports whether cond became true within timeout, looking at it
// every few milliseconds.
func Eventually(timeout time.Duration, cond func() bool) bool {
	deadline := time.Now().Add(timeout)
	for !cond() {
		if time.Now().After(deadline) {
			return false
		}
		time.Sleep(pollInterval)
	}
	return true
}

// WaitFor fails the test unless cond becomes true within timeout.
func WaitFor(t testing.TB, timeout time.Duration, cond func() bool) {
	t.Helper()
	if !Eventually(timeout, cond) {
		t.Fatalf("condition not met within %s", timeout)
	}
}

// WaitForNoError fails the test, naming what it waited for and the last
// error, unless cond returns nil within timeout.
func WaitForNoError(t testing.TB, timeout time.Duration, what string, cond func() error) {
	t.Helper()
	var err error
	if !Eventually(timeout, func() bool { err = cond(); return err == nil }) {
		t.Fatalf("%s: not within %s: %v", what, timeout, err)
	}
}

// LogSink is the output of a test logger: it writes every line to the
// test's log while the test runs, and remembers the lines so a test can
// wait for one to appear.
type LogSink struct {
	t    testing.TB
	mu   sync.Mutex
	done bool
	seen []string
}

// Write logs p (one line) to the test.
func (w *LogSink) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.seen = append(w.seen, string(p))
	if !w.done {
		w.t.Log(strings.TrimRight(string(p), "\n"))
	}
	return len(p), nil
}

// Contains reports whether any line logged so far contains s.
func (w *LogSink) Contains(s string) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	for _, l := range w.seen {
		if strings.Contains(l, s) {
			return true
		}
	}
	return false
}

// Logger returns a logger at level whose lines go to t's log until the test
// ends (later lines, from goroutines still stopping, are only remembered).
func Logger(t testing.TB, level hclog.Level) (hclog.Logger, *LogSink) {
	w := &LogSink{t: t}
	// Registered first, so it runs last: after whatever the test started
	// has stopped.
	t.Cleanup(func() {
		w.mu.Lock()
		w.done = true
		w.mu.Unlock()
	})
	return hclog.New(&hclog.LoggerOptions{Output: w, Level: level}), w
}

// BuildWeft builds the weft binary into dir and returns its path. Call it
// once, from TestMain.
func BuildWeft(dir string) (string, error) {
	bin := filepath.Join(dir, "weft")
	build := exec.Command("go", "build", "-o", bin, "github.com/weft-sched/weft/cmd/weft")
	build.Stdout, build.Stderr = os.Stdout, os.Stderr
	if err := build.Run(); err != nil {
		return "", fmt.Errorf("build weft: %w", err)
	}
	return bin, nil
}

// RemoveCgroups kills what is left in the cgroups of agents (the
// directories under /sys/fs/cgroup, or under each v1 hierarchy there,
// whose names match) and removes them, trying again for a while as dying
// processes still hold them: containers of agents a test shut down or
// killed without stopping them.
func RemoveCgroups(match func(name string) bool) {
	deadline := time.Now().Add(10 * time.Second)
	for {
		var agents []string
		for _, pattern := range []string{"/sys/fs/cgroup/*/weft-*", "/sys/fs/cgroup/weft-*"} {
			dirs, _ := filepath.Glob(pattern)
			for _, d := range dirs {
				if match(filepath.Base(d)) {
					agents = append(agents, d)
				}
			}
		}
		if len(agents) == 0 || time.Now().After(deadline) {
			return
		}
		for _, a := range agents {
			containers, _ := filepath.Glob(filepath.Join(a, "*", "cgroup.procs"))
			for _, procs := range containers {
				b, _ := os.ReadFile(procs)
				for _, p := range strings.Fields(string(b)) {
					if pid, err := strconv.Atoi(p); err == nil {
						syscall.Kill(pid, syscall.SIGKILL)
					}
				}
				os.Remove(filepath.Dir(procs))
			}
			os.Remove(a)
		}
		time.Sleep(10 * time.Millisecond) // for the kernel to reap the killed
	}
}
