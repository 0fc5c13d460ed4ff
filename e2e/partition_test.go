package e2e

import (
	"fmt"
	"syscall"
	"testing"
	"time"
)

// nodeStatus is the part of `weft node list -json` these tests read.
type nodeStatus struct {
	ID           string `json:"id"`
	Status       string `json:"status"`
	StatusReason string `json:"status_reason"`
	Epoch        uint64 `json:"epoch"`
}

func (w *world) nodeStatuses(via string, stale bool) ([]nodeStatus, error) {
	args := []string{"node", "list", "-address", w.rpcAddr(via)}
	if stale {
		args = append(args, "-stale")
	}
	var ns []nodeStatus
	err := cliJSON(w.t, &ns, args...)
	return ns, err
}

// A leader that hangs (SIGSTOP: its sockets accept and never answer, as
// in a partition that drops packets) for 15 s under running work must not
// make healthy agents look dead (SPEC §13): no node goes DOWN, no
// container is lost, and the app — whose AM may not be retried — finishes.
func TestLeaderHangingFifteenSecondsKillsNothing(t *testing.T) {
	w := startWorld(t)
	id := w.submit("-num-containers", "6", "-max-am-attempts", "1", "--", "sleep", "25")
	waitFor(t, 60*time.Second, "six running tasks", func() error {
		running := 0
		for _, c := range tasks(w.containers(id)) {
			if c.State == "RUNNING" {
				running++
			}
		}
		if running != 6 {
			return fmt.Errorf("%d running", running)
		}
		return nil
	})
	before, err := w.nodeStatuses("s1", false)
	if err != nil {
		t.Fatal(err)
	}
	leader := w.waitForLeader("s1", 10*time.Second, "")
	p := w.procs[leader]
	t.Logf("pausing leader %s for 15 s", leader)
	p.cmd.Process.Signal(syscall.SIGSTOP)
	paused := time.Now()
	var others []string
	for _, s := range []string{"s1", "s2", "s3"} {
		if s != leader {
			others = append(others, s)
		}
	}
	// Watch every node from both other servers while the leader hangs.
	for time.Since(paused) < 15*time.Second {
		for _, s := range others {
			ns, err := w.nodeStatuses(s, true)
			if err != nil {
				continue // a server between leaders may not answer this once
			}
			for _, n := range ns {
				if n.Status != "READY" {
					t.Fatalf("%s after %s: node %s is %s (%s)", s, time.Since(paused).Round(time.Second), n.ID, n.Status, n.StatusReason)
				}
			}
		}
		time.Sleep(500 * time.Millisecond) // sampling, not synchronisation
	}
	p.cmd.Process.Signal(syscall.SIGCONT)
	a := w.waitApp(id, 90*time.Second)
	if a.State != "FINISHED" {
		t.Fatalf("app %+v", a)
	}
	for _, c := range w.containers(id) {
		if c.Reason == "lost" {
			t.Fatalf("container %+v was lost", c)
		}
	}
	after, err := w.nodeStatuses(others[0], false)
	if err != nil {
		t.Fatal(err)
	}
	epochs := map[string]uint64{}
	for _, n := range before {
		epochs[n.ID] = n.Epoch
	}
	for _, n := range after {
		if n.Status != "READY" || n.Epoch != epochs[n.ID] {
			t.Fatalf("node %s ended %s at epoch %d (was %d): a healthy node was marked down or re-registered", n.ID, n.Status, n.Epoch, epochs[n.ID])
		}
	}
}

// SIGTERM makes an agent leave gracefully: its node is DOWN at once with
// the reason, it never registers again on its way out, and work goes on
// elsewhere with nothing placed on the leaving node.
func TestAgentStopIsGraceful(t *testing.T) {
	w := startWorld(t)
	victim := w.agents["a3"]
	if err := victim.stop(syscall.SIGTERM, 30*time.Second); err != nil {
		t.Fatalf("a3 exited with %v after SIGTERM", err)
	}
	ns, err := w.nodeStatuses("s1", false)
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range ns {
		if n.ID != "a3" {
			continue
		}
		if n.Status != "DOWN" || n.StatusReason != "the agent left gracefully" || n.Epoch != 1 {
			t.Fatalf("a3 after a graceful stop: %+v; want DOWN at epoch 1, left gracefully, when the process has exited", n)
		}
	}
	id := w.submit("-num-containers", "6", "--", "true")
	if a := w.waitApp(id, 60*time.Second); a.State != "FINISHED" {
		t.Fatalf("app after a graceful agent stop: %+v", a)
	}
	for _, c := range w.containers(id) {
		if c.NodeID == "a3" {
			t.Fatalf("container %s placed on the node that left", c.ID)
		}
	}
}
