package agent

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/weft-sched/weft/internal/clock"
	"github.com/weft-sched/weft/internal/testutil"
	"github.com/weft-sched/weft/rpc"
	"github.com/weft-sched/weft/scheduler"
)

// TestCompletedContainersLogsAreRemovedAfterRetention runs a container,
// then moves a fake clock: its directory and logs stay until log_retention
// after it completed, and go (with the app's emptied directory) then.
func TestCompletedContainersLogsAreRemovedAfterRetention(t *testing.T) {
	start := time.Unix(1_700_000_000, 0)
	clk := clock.NewFake(start)
	root := t.TempDir()
	m := newManager(hclog.NewNullLogger(), clk, "n1", root, scheduler.Resources{MemoryMB: 1000, Vcores: 4}, 10, scheduler.LocalPolicy{}, 2*time.Second, nil, func() {})
	t.Cleanup(func() { m.stopAll(scheduler.ReasonKilled) })
	r := newLogRetention(hclog.NewNullLogger(), root, time.Hour)
	m.retention = r

	m.start(info("c1", 100, scheduler.Guaranteed), rpc.LaunchSpec{Command: []string{"sh", "-c", "echo kept"}})
	waitState(t, m, "c1", scheduler.ContainerCompleted)
	dir := filepath.Join(root, "app-1", "c1")
	read := func() (string, error) {
		resp, err := m.logs(&rpc.ContainerLogsRequest{ID: "c1"}, "")
		if err != nil {
			return "", err
		}
		return string(resp.Data), nil
	}
	m.ack([]string{"c1"}) // the agent forgets it; its logs stay on disk

	if n := r.sweep(start.Add(time.Hour - time.Nanosecond)); n != 0 {
		t.Fatalf("swept %d directories before the retention passed", n)
	}
	if out, err := read(); err != nil || out != "kept\n" {
		t.Fatalf("logs within the retention: %q, %v", out, err)
	}
	// Past its retention, the directory waits for its app's end: the
	// servers say app-1 still runs (a reduce may yet fetch from it), then
	// that it has ended.
	at := start.Add(time.Hour)
	if n := r.sweep(at); n != 0 {
		t.Fatalf("swept %d directories of an app not known to have ended", n)
	}
	asked := r.appsToCheck(at)
	if len(asked) != 1 || asked[0] != "app-1" {
		t.Fatalf("the heartbeat asks about %v, want app-1", asked)
	}
	if again := r.appsToCheck(at.Add(time.Second)); len(again) != 0 {
		t.Fatalf("asked about %v again within a sweep interval", again)
	}
	if n := r.checked(asked, []string{"app-1"}, at); n != 0 {
		t.Fatalf("removed %d directories of a running app", n)
	}
	for range 4 { // two hours more: the servers keep saying it runs
		at = at.Add(30 * time.Minute)
		r.sweep(at)
		if n := r.checked(r.appsToCheck(at), []string{"app-1"}, at); n != 0 {
			t.Fatalf("removed %d directories of a running app", n)
		}
	}
	if out, err := read(); err != nil || out != "kept\n" {
		t.Fatalf("logs of a running app past the retention: %q, %v", out, err)
	}
	at = at.Add(r.sweepInterval())
	asked = r.appsToCheck(at)
	if n := r.checked(asked, nil, at); n != 1 {
		t.Fatalf("removed %d directories when app-1 ended, want 1", n)
	}
	if _, err := os.Stat(dir); !os.IsNotExist(err) {
		t.Fatalf("container directory still there: %v", err)
	}
	if _, err := os.Stat(filepath.Dir(dir)); !os.IsNotExist(err) {
		t.Fatalf("emptied app directory still there: %v", err)
	}
	if _, err := read(); !errors.Is(err, rpc.ErrNotFound) {
		t.Fatalf("logs after the retention: %v, want not found", err)
	}
	if n := r.sweep(start.Add(5 * time.Hour)); n != 0 {
		t.Fatalf("swept %d again", n)
	}
}

// TestRetentionKeepsLeftoversAFullRetention: directories
// a previous run left are kept log_retention from the restart, and a
// sweep never touches a path outside the containers directory.
func TestRetentionKeepsLeftoversAFullRetention(t *testing.T) {
	root := t.TempDir()
	left := filepath.Join(root, "app-3", "c9")
	if err := os.MkdirAll(left, 0o755); err != nil {
		t.Fatal(err)
	}
	outside := t.TempDir()
	r := newLogRetention(hclog.NewNullLogger(), root, 24*time.Hour)
	now := time.Unix(1_700_000_000, 0)
	if n := r.adoptLeftovers(now); n != 1 {
		t.Fatalf("adopted %d leftovers, want 1", n)
	}
	r.completed(outside, 0)
	if n := r.sweep(now.Add(24*time.Hour - time.Second)); n != 0 {
		t.Fatalf("removed %d directories; the only one due is outside the containers directory", n)
	}
	if _, err := os.Stat(outside); err != nil {
		t.Fatalf("a path outside the containers directory was removed: %v", err)
	}
	if _, err := os.Stat(left); err != nil {
		t.Fatalf("a leftover went before its retention: %v", err)
	}
	// Past its retention it waits for its app; no server answers, so it
	// goes a retention later: the disk stays bounded.
	r.sweep(now.Add(24 * time.Hour))
	if _, err := os.Stat(left); err != nil {
		t.Fatalf("a leftover went before its app was asked about: %v", err)
	}
	if n := r.sweep(now.Add(48*time.Hour - time.Second)); n != 0 {
		t.Fatalf("removed %d directories before a retention without an answer", n)
	}
	if n := r.sweep(now.Add(48 * time.Hour)); n != 1 {
		t.Fatalf("removed %d directories a retention after nobody answered, want 1", n)
	}
	if _, err := os.Stat(left); !os.IsNotExist(err) {
		t.Fatalf("leftover still there: %v", err)
	}
}

// TestRetentionLoopRunsOnTheAgentsClock: the agent's loop sweeps when its
// clock passes a sweep interval, with no real time passing.
func TestRetentionLoopRunsOnTheAgentsClock(t *testing.T) {
	root := t.TempDir()
	dir := filepath.Join(root, "app-1", "c1")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	start := time.Unix(1_700_000_000, 0)
	clk := clock.NewFake(start)
	a := &Agent{clock: clk, retention: newLogRetention(hclog.NewNullLogger(), root, 30*time.Second)}
	a.ctx, a.cancel = context.WithCancel(context.Background())
	a.retention.completed(dir, start.UnixNano())
	a.goFunc(a.retentionLoop)
	defer func() { a.cancel(); a.wg.Wait() }()
	testutil.WaitFor(t, 5*time.Second, func() bool { return clk.Waiters() > 0 }) // the loop's ticker
	if got := a.retention.sweepInterval(); got != 3*time.Second {
		t.Fatalf("sweep interval %s, want a tenth of 30s", got)
	}
	clk.Advance(27 * time.Second)
	if _, err := os.Stat(dir); err != nil {
		t.Fatalf("removed before its retention: %v", err)
	}
	clk.Advance(3 * time.Second) // past its retention: it waits for its app
	testutil.WaitFor(t, 5*time.Second, func() bool { return len(a.retention.appsToCheck(clk.Now())) == 1 })
	if _, err := os.Stat(dir); err != nil {
		t.Fatalf("removed before its app was known to have ended: %v", err)
	}
	clk.Advance(30 * time.Second) // nobody answered for a retention
	testutil.WaitFor(t, 5*time.Second, func() bool {
		_, err := os.Stat(dir)
		return os.IsNotExist(err)
	})
}
