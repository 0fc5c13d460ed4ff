package e2e

import (
	"fmt"
	"strings"
	"testing"
	"time"
)

// An opportunistic app larger than the cluster queues at agents and
// finishes; a guaranteed app on full nodes then evicts opportunistic
// containers (newest first), whose AM runs their work again, and both
// apps finish.
func TestOpportunisticContainers(t *testing.T) {
	w := startWorld(t)

	t.Run("larger than the cluster, queued at agents", func(t *testing.T) {
		w.t = t
		id := w.submit("-container-type", "OPPORTUNISTIC", "-num-containers", "40", "-memory-mb", "256", "--", "sleep", "1")
		sawQueued := false
		waitFor(t, 120*time.Second, "the opportunistic app to finish", func() error {
			if !sawQueued {
				for _, c := range w.containers(id) {
					if c.State == "QUEUED" {
						sawQueued = true
					}
				}
			}
			if a := w.app(id); a.State != "FINISHED" {
				return fmt.Errorf("app is %s", a.State)
			}
			return nil
		})
		if !sawQueued {
			t.Fatalf("no container was ever queued at an agent: the app did not exceed the cluster")
		}
		ok := 0
		for _, c := range tasks(w.containers(id)) {
			if !strings.HasPrefix(c.ID, "o-a") {
				t.Fatalf("container %s was not minted by an agent", c.ID)
			}
			if exitedZero(c) {
				ok++
			}
		}
		if ok != 40 {
			t.Fatalf("%d containers exited 0, want 40", ok)
		}
	})

	t.Run("a guaranteed arrival evicts opportunistic containers, newest first", func(t *testing.T) {
		w.t = t
		// More opportunistic work than the cluster holds: every node runs
		// what fits (11 vcores beside the AM) and queues the rest.
		opp := w.submit("-container-type", "OPPORTUNISTIC", "-num-containers", "20", "-memory-mb", "256", "--", "sleep", "8")
		waitFor(t, 60*time.Second, "opportunistic containers filling the cluster", func() error {
			running := 0
			states := map[string]int{}
			for _, c := range tasks(w.containers(opp)) {
				states[c.State+"/"+c.Reason]++
				if c.State == "RUNNING" {
					running++
				}
			}
			if running != 11 {
				return fmt.Errorf("%d running; app %+v; task containers %v", running, w.app(opp), states)
			}
			return nil
		})
		guar := w.submit("-num-containers", "6", "-memory-mb", "256", "--", "sleep", "1")
		for _, id := range []string{guar, opp} {
			if a := w.waitApp(id, 120*time.Second); a.State != "FINISHED" {
				t.Fatalf("app %+v", a)
			}
		}
		byNode := map[string][]containerInfo{}
		evicted := 0
		for _, c := range tasks(w.containers(opp)) {
			byNode[c.NodeID] = append(byNode[c.NodeID], c)
			if c.Reason == "evicted" {
				evicted++
			}
		}
		if evicted == 0 {
			t.Fatalf("no opportunistic container was evicted for the guaranteed app")
		}
		// On each node, every evicted container started no earlier than any
		// container that was running beside it when the evictions came and
		// survived: the most recently started went first.
		for node, cs := range byNode {
			var evictedAt int64
			for _, c := range cs {
				if c.Reason == "evicted" && (evictedAt == 0 || c.FinishedAt < evictedAt) {
					evictedAt = c.FinishedAt
				}
			}
			if evictedAt == 0 {
				continue
			}
			for _, e := range cs {
				if e.Reason != "evicted" {
					continue
				}
				for _, s := range cs {
					if s.Reason == "exited" && s.StartedAt < evictedAt && s.FinishedAt > evictedAt && s.StartedAt > e.StartedAt {
						t.Fatalf("on %s, %s (started %d) was evicted while %s, started later (%d), kept running",
							node, e.ID, e.StartedAt, s.ID, s.StartedAt)
					}
				}
			}
		}
		ok := 0
		for _, c := range tasks(w.containers(opp)) {
			if exitedZero(c) {
				ok++
			}
		}
		if ok != 20 {
			t.Fatalf("%d opportunistic tasks exited 0 after the evictions, want 20", ok)
		}
		t.Logf("%d opportunistic containers evicted and re-run", evicted)
	})
}
