package e2e

import (
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"
)

// An opportunistic app larger than the cluster queues at agents and
// finishes; a guaranteed app on full nodes then evicts opportunistic
// containers (least waste first: among containers alike, the most recently
// started), whose AM runs their work again, and both
// apps finish; a promoted container survives a later guaranteed arrival.
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

	t.Run("a guaranteed arrival evicts the opportunistic containers that waste least", func(t *testing.T) {
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
		// survived: containers alike, the one that had run least went first.
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

	t.Run("a promoted container survives a later guaranteed arrival", func(t *testing.T) {
		w.t = t
		plain := w.submit("-container-type", "OPPORTUNISTIC", "-enforce-execution-type", "-num-containers", "6", "-memory-mb", "256", "--", "sleep", "12")
		waitFor(t, 60*time.Second, "six running opportunistic tasks", func() error {
			if n := countTasks(w.containers(plain), "RUNNING", ""); n != 6 {
				return fmt.Errorf("%d running", n)
			}
			return nil
		})
		// Started after the others, these would be the first evicted; once
		// promoted they are guaranteed and never evicted.
		promoted := w.submit("-container-type", "OPPORTUNISTIC", "-promote-opportunistic-after-start", "-num-containers", "3", "-memory-mb", "256", "--", "sleep", "12")
		waitFor(t, 60*time.Second, "three running promoted tasks", func() error {
			if n := countTasks(w.containers(promoted), "RUNNING", "GUARANTEED"); n != 3 {
				return fmt.Errorf("%d running guaranteed; %+v", n, tasks(w.containers(promoted)))
			}
			return nil
		})
		// The node list's (G) and (O) columns, and `weft status`'s totals:
		// two AMs and three promoted containers run guaranteed, six not.
		waitFor(t, 10*time.Second, "node and cluster counts", func() error {
			g, o := 0, 0
			for _, n := range w.nodes("s2") {
				g, o = g+n.RunningGuaranteed, o+n.RunningOpportunistic
			}
			var st struct {
				RunningGuaranteed    int `json:"running_guaranteed"`
				RunningOpportunistic int `json:"running_opportunistic"`
			}
			if err := cliJSON(t, &st, "status", "-address", w.any()); err != nil {
				return err
			}
			if g != 5 || o != 6 || st.RunningGuaranteed != 5 || st.RunningOpportunistic != 6 {
				return fmt.Errorf("nodes say %d (G) %d (O), status %+v; want 5 and 6", g, o, st)
			}
			return nil
		})
		// 12 vcores: 11 in use. The guaranteed app's AM and six tasks fit
		// the 7 vcores not held by guaranteed work, so nodes must evict.
		guar := w.submit("-num-containers", "6", "-memory-mb", "256", "--", "sleep", "1")
		for _, id := range []string{guar, promoted, plain} {
			if a := w.waitApp(id, 120*time.Second); a.State != "FINISHED" {
				t.Fatalf("app %+v", a)
			}
		}
		for _, c := range tasks(w.containers(promoted)) {
			if !exitedZero(c) || c.ExecutionType != "GUARANTEED" {
				t.Fatalf("promoted container %+v did not run to its end", c)
			}
		}
		evicted := 0
		for _, c := range tasks(w.containers(plain)) {
			if c.Reason == "evicted" {
				evicted++
			}
		}
		if evicted == 0 {
			t.Fatalf("no container of the unpromoted app was evicted: the guaranteed app did not need the room")
		}
		t.Logf("%d unpromoted opportunistic containers evicted, 3 promoted ones kept", evicted)
	})
}

// countTasks counts task containers in a state (and of a type, if given).
func countTasks(cs []containerInfo, state, execType string) int {
	n := 0
	for _, c := range tasks(cs) {
		if c.State == state && (execType == "" || c.ExecutionType == execType) {
			n++
		}
	}
	return n
}

func (w *world) applyQueues(hcl string) {
	w.t.Helper()
	f := filepath.Join(w.t.TempDir(), "queues.hcl")
	if err := os.WriteFile(f, []byte(hcl), 0o644); err != nil {
		w.t.Fatal(err)
	}
	if _, errOut, code := cli(w.t, "queue", "apply", "-address", w.any(), f); code != 0 {
		w.t.Fatal(errOut)
	}
}

// seq is the sequence number an AMRMProxy gave a container: its ID is
// o-NODE-EPOCH-SEQ. An AM starts containers in that order, so it is also
// their order in their node's queue.
func seq(t *testing.T, id string) int {
	n, err := strconv.Atoi(id[strings.LastIndex(id, "-")+1:])
	if err != nil {
		t.Fatalf("container ID %s has no sequence number", id)
	}
	return n
}

// With a skewed load, rebalancing sheds from the longest queue: a1 queues
// up to 30 containers, a2 and a3 ten. Once the queue limit drops to 15,
// a1 sheds its newest queued containers, the others keep theirs, and the
// AM asks again for the shed work.
func TestRebalancingShedsFromTheLongestQueue(t *testing.T) {
	w := startWorldWith(t, map[string][]string{"a1": {"-resources", "memory_mb=2048,vcores=2", "-opportunistic-queue-length", "30"}})
	w.applyQueues(`scheduler {
  opportunistic {
    min_queue_length = 30
    max_queue_length = 30
  }
}
queue "root" {
  queue "default" {}
}
`)
	// Long tasks, more than every place: every queue fills.
	id := w.submit("-container-type", "OPPORTUNISTIC", "-enforce-execution-type", "-num-containers", "80", "-memory-mb", "128", "--", "sleep", "600")
	waitFor(t, 60*time.Second, "queues of 30, 10 and 10", func() error {
		q := map[string]int{}
		for _, n := range w.nodes("s2") {
			q[n.ID] = n.Queued
		}
		if q["a1"] != 30 || q["a2"] != 10 || q["a3"] != 10 {
			return fmt.Errorf("queues %v", q)
		}
		return nil
	})
	// a1's queue, oldest first (an AM starts containers in the order the
	// proxy numbered them).
	first := tasks(w.containers(id))
	var queuedA1 []int
	for _, c := range first {
		if c.NodeID == "a1" && c.State == "QUEUED" {
			queuedA1 = append(queuedA1, seq(t, c.ID))
		}
	}
	sort.Ints(queuedA1)
	if len(queuedA1) != 30 {
		t.Fatalf("%d containers queued on a1, want 30", len(queuedA1))
	}
	newest, oldest := map[int]bool{}, map[int]bool{}
	for i, n := range queuedA1 {
		if i >= 15 {
			newest[n] = true
		} else {
			oldest[n] = true
		}
	}
	// The limit now comes from the queues: floor(16.7 + 9.4) = 26, clamped
	// to max_queue_length 15. Only a1's queue is longer.
	w.applyQueues(`scheduler {
  opportunistic {
    max_queue_length = 15
  }
}
queue "root" {
  queue "default" {}
}
`)
	waitFor(t, 30*time.Second, "a1 to shed its 15 newest queued containers", func() error {
		shed := 0
		for _, c := range tasks(w.containers(id)) {
			if c.Reason != "shed" {
				continue
			}
			switch {
			case c.NodeID != "a1":
				t.Fatalf("container %s shed from %s; only a1's queue is over the limit", c.ID, c.NodeID)
			case c.StartedAt != 0:
				t.Fatalf("shed container %+v had started", c)
			case oldest[seq(t, c.ID)]:
				t.Fatalf("container %s, among a1's 15 oldest queued, was shed", c.ID)
			case newest[seq(t, c.ID)]:
				shed++
			}
		}
		if shed != 15 {
			return fmt.Errorf("%d of the 15 newest shed", shed)
		}
		return nil
	})
	waitFor(t, 30*time.Second, "the AM to ask again for the shed work", func() error {
		if n := len(tasks(w.containers(id))); n <= len(first) {
			return fmt.Errorf("%d task containers, %d before shedding", n, len(first))
		}
		return nil
	})
	if _, errOut, code := cli(t, "app", "kill", id, "-address", w.any()); code != 0 {
		t.Fatal(errOut)
	}
}

// With the leader and a follower killed there is no leader at all, yet the
// AMRMProxy goes on allocating opportunistic containers (from its list,
// then from room it renews by asking the nodes) and the agents run them;
// once a server returns, the new leader records them and the app finishes.
func TestOpportunisticAllocationGoesOnWithoutALeader(t *testing.T) {
	w := startWorld(t)
	marks := t.TempDir()
	started := func() int {
		es, err := os.ReadDir(marks)
		if err != nil {
			t.Fatal(err)
		}
		return len(es)
	}
	cmd := fmt.Sprintf("touch %s/$WEFT_CONTAINER_ID; sleep 1", marks)
	id := w.submit("-container-type", "OPPORTUNISTIC", "-enforce-execution-type", "-num-containers", "120", "-memory-mb", "128", "--", "sh", "-c", cmd)
	waitFor(t, 60*time.Second, "twenty tasks started", func() error {
		if n := started(); n < 20 {
			return fmt.Errorf("%d started", n)
		}
		return nil
	})
	leader := w.waitForLeader("s1", 10*time.Second, "")
	follower := "s1"
	if leader == "s1" {
		follower = "s2"
	}
	w.procs[leader].kill()
	w.procs[follower].kill()
	killedAt := time.Now()
	before := started()
	// At most 30 containers were queued when the servers went (ten per
	// node): forty more starts mean the proxy allocated with no leader.
	waitFor(t, 120*time.Second, "forty tasks to start with no leader", func() error {
		if n := started() - before; n < 40 {
			return fmt.Errorf("%d started since the kill", n)
		}
		return nil
	})
	restoredAt := time.Now()
	w.procs[follower] = startProc(t, follower+"-restarted", w.args(follower)...)
	if a := w.waitApp(id, 180*time.Second); a.State != "FINISHED" {
		t.Fatalf("app %+v", a)
	}
	ok, leaderless := 0, 0
	for _, c := range tasks(w.containers(id)) {
		if exitedZero(c) {
			ok++
		}
		if c.AllocatedAt > killedAt.UnixNano() && c.AllocatedAt < restoredAt.UnixNano() {
			leaderless++
		}
	}
	if ok != 120 {
		t.Fatalf("%d tasks exited 0, want 120", ok)
	}
	if leaderless < 10 {
		t.Fatalf("%d containers were allocated while there was no leader; want the proxy to go on", leaderless)
	}
	t.Logf("%d containers allocated and %d started in %s without a leader", leaderless, started()-before, restoredAt.Sub(killedAt).Round(100*time.Millisecond))
}
