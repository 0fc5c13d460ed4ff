package e2e

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// A node's queue and evictions on a real agent (docs/opportunistic.md,
// "On a node"): with queue_policy = "shortest_first" the short task that
// came second runs before the long one that came first; and a guaranteed
// arrival evicts the running opportunistic container whose loss wastes
// least (a one-vcore container over a ten-vcore one that started later),
// where newest_first would have killed the newer, larger one.
func TestAgentRunsShortestFirstAndEvictsLeastWaste(t *testing.T) {
	q := startQuorum(t)
	q.sec.agentExtra = "opportunistic {\n  queue_policy = \"shortest_first\"\n}\n"
	w := startWorldOn(t, q, 1, map[string][]string{"a1": {"-resources", "memory_mb=4096,vcores=13"}})
	marks := t.TempDir()
	mark := func(name string) {
		if err := os.WriteFile(filepath.Join(marks, name), nil, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	waitMark := func(name string) string {
		return fmt.Sprintf("while [ ! -f %s ]; do sleep 0.1; done", filepath.Join(marks, name))
	}
	runningTask := func(app string) containerInfo {
		var c containerInfo
		waitFor(t, 60*time.Second, "a task of "+app+" to run", func() error {
			for _, x := range tasks(w.containers(app)) {
				if x.State == "RUNNING" {
					c = x
					return nil
				}
			}
			return fmt.Errorf("containers %+v", w.containers(app))
		})
		return c
	}
	queuedTask := func(app string) {
		waitFor(t, 60*time.Second, "a task of "+app+" to queue", func() error {
			for _, x := range tasks(w.containers(app)) {
				if x.State == "QUEUED" {
					return nil
				}
			}
			return fmt.Errorf("containers %+v", w.containers(app))
		})
	}
	opp := []string{"-container-type", "OPPORTUNISTIC", "-enforce-execution-type", "-num-containers", "1", "-memory-mb", "64"}

	// Reordering. A guaranteed task holds ten of the thirteen vcores
	// until its mark; then a long and a short opportunistic task of six
	// vcores queue, in that order; room for one frees.
	hold := w.submit("-num-containers", "1", "-vcores", "10", "-memory-mb", "64", "--", "sh", "-c", waitMark("go"))
	runningTask(hold)
	long := w.submit(append(opp, "-vcores", "6", "-expected-duration", "1m", "--", "sleep", "1")...)
	queuedTask(long)
	short := w.submit(append(opp, "-vcores", "6", "-expected-duration", "1s", "--", "sleep", "3")...)
	queuedTask(short)
	mark("go")
	runningTask(short)
	for _, c := range tasks(w.containers(long)) {
		if c.State != "QUEUED" {
			t.Fatalf("the long task is %s while the short one, queued after it, runs: want it still queued", c.State)
		}
	}
	for _, app := range []string{hold, short, long} {
		if a := w.waitApp(app, 120*time.Second); a.State != "FINISHED" {
			t.Fatalf("app %+v", a)
		}
	}

	// Least waste. A one-vcore opportunistic task, then a ten-vcore one:
	// with their AMs the node is full. A guaranteed AM arrives.
	small := w.submit(append(opp, "-vcores", "1", "--", "sh", "-c", waitMark("end"))...)
	smallTask := runningTask(small)
	large := w.submit(append(opp, "-vcores", "10", "--", "sh", "-c", waitMark("end"))...)
	largeTask := runningTask(large)
	guar := w.submit("-num-containers", "1", "-vcores", "1", "-memory-mb", "64", "--", "true")
	var evicted containerInfo
	waitFor(t, 60*time.Second, "an opportunistic task to be evicted", func() error {
		for _, c := range append(w.containers(small), w.containers(large)...) {
			if c.ID == smallTask.ID || c.ID == largeTask.ID {
				if c.State == "COMPLETED" {
					evicted = c
					return nil
				}
			}
		}
		return fmt.Errorf("small %+v, large %+v", w.containers(small), w.containers(large))
	})
	if evicted.ID != smallTask.ID || evicted.Reason != "evicted" {
		t.Fatalf("the first container to go was %+v; want the one-vcore task %s evicted (least work lost)", evicted, smallTask.ID)
	}
	for _, c := range w.containers(large) {
		if c.ID == largeTask.ID && c.State == "COMPLETED" && c.FinishedAt < evicted.FinishedAt {
			t.Fatalf("the ten-vcore task %+v went before the one-vcore one", c)
		}
	}
	if a := w.waitApp(guar, 120*time.Second); a.State != "FINISHED" {
		t.Fatalf("guaranteed app %+v", a)
	}
	mark("end")
	for _, app := range []string{small, large} {
		if a := w.waitApp(app, 120*time.Second); a.State != "FINISHED" {
			t.Fatalf("app %+v: its evicted task runs again and finishes", a)
		}
	}
}

// Overcommit gives room back (docs/opportunistic.md, "Overcommit on
// measured use"): on a node whose memory is all allocated, an
// opportunistic task runs in the memory a guaranteed task holds but does
// not use; when that task's use rises past the node's limit, the
// opportunistic one is evicted — never the guaranteed one — and runs again
// once room frees.
func TestOvercommitGivesRoomBackWhenUseRises(t *testing.T) {
	q := startQuorum(t)
	q.sec.agentExtra = "opportunistic {\n  overcommit = { memory_mb = 0.5 }\n}\n"
	w := startWorldOn(t, q, 1, map[string][]string{"a1": {"-resources", "memory_mb=1024,vcores=8"}})
	marks := t.TempDir()
	at := func(name string) string { return filepath.Join(marks, name) }
	wait := func(name string) string { return fmt.Sprintf("while [ ! -f %s ]; do sleep 0.1; done", at(name)) }

	// 256 MB AM + 512 MB task, idle until "grow": then it holds 450 MB
	// (sort keeps its input in memory until the input ends) until "done".
	grower := fmt.Sprintf("%s; { head -c 450000000 /dev/zero; %s; } | sort -S 1G > /dev/null", wait("grow"), wait("done"))
	guar := w.submit("-num-containers", "1", "-vcores", "1", "-memory-mb", "512", "--", "sh", "-c", grower)
	var held containerInfo
	waitFor(t, 60*time.Second, "the guaranteed task to run", func() error {
		for _, c := range tasks(w.containers(guar)) {
			if c.State == "RUNNING" {
				held = c
				return nil
			}
		}
		return fmt.Errorf("containers %+v", w.containers(guar))
	})
	// Its 256 MB AM fills the node's memory; its task runs in the idle
	// allocation, under the limit of 512 MB measured.
	opp := w.submit("-container-type", "OPPORTUNISTIC", "-enforce-execution-type", "-num-containers", "1", "-vcores", "1",
		"-memory-mb", "256", "--", "sh", "-c", wait("odone"))
	var first containerInfo
	waitFor(t, 90*time.Second, "the opportunistic task to run in allocated, idle memory", func() error {
		for _, c := range tasks(w.containers(opp)) {
			if c.State == "RUNNING" {
				first = c
				return nil
			}
		}
		return fmt.Errorf("containers %+v", w.containers(opp))
	})

	if err := os.WriteFile(at("grow"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 60*time.Second, "the opportunistic task to give its room back", func() error {
		for _, c := range w.containers(opp) {
			if c.ID == first.ID && c.State == "COMPLETED" {
				if c.Reason != "evicted" {
					t.Fatalf("the overcommitted task ended %s, want evicted", c.Reason)
				}
				return nil
			}
		}
		return fmt.Errorf("containers %+v", w.containers(opp))
	})
	for _, c := range w.containers(guar) {
		if c.ID == held.ID && c.State != "RUNNING" {
			t.Fatalf("the guaranteed task is %s (%s): a guaranteed container is never touched", c.State, c.Reason)
		}
	}
	for _, name := range []string{"done", "odone"} {
		if err := os.WriteFile(at(name), nil, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if a := w.waitApp(guar, 120*time.Second); a.State != "FINISHED" {
		t.Fatalf("guaranteed app %+v", a)
	}
	if a := w.waitApp(opp, 120*time.Second); a.State != "FINISHED" {
		t.Fatalf("opportunistic app %+v: its evicted task runs again and finishes", a)
	}
}
