package server

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/weft-sched/weft/scheduler"
)

// liveNodes returns n READY nodes n1..nN at epoch 1.
func liveNodes(n int) []*scheduler.Node {
	out := make([]*scheduler.Node, n)
	for i := range out {
		out[i] = &scheduler.Node{ID: fmt.Sprintf("n%d", i+1), Epoch: 1, Status: scheduler.NodeReady}
	}
	return out
}

var t0 = time.Unix(1_000_000, 0)

func at(d time.Duration) time.Time { return t0.Add(d) }

func downIDs(ds []nodeDown) string {
	var ids []string
	for _, d := range ds {
		ids = append(ids, d.ID)
	}
	return strings.Join(ids, ",")
}

// beat makes the named nodes heartbeat at now.
func beat(l *liveness, now time.Time, ids ...string) {
	for _, id := range ids {
		l.Heartbeat(id, 1, now, nil)
	}
}

func TestSilentNodeIsDownAfterTheTTLWhileItsPeersAreHeard(t *testing.T) {
	l := newLiveness(10*time.Second, 3*time.Second)
	nodes := liveNodes(3)
	l.Reset(t0)
	for s := time.Duration(0); s <= 10*time.Second; s += time.Second {
		beat(l, at(s), "n1", "n2") // n3 is silent from the start
		if got := l.Tick(at(s), nodes); len(got) != 0 {
			t.Fatalf("at %s: marked %s down before the TTL", s, downIDs(got))
		}
	}
	beat(l, at(11*time.Second), "n1", "n2")
	got := l.Tick(at(11*time.Second), nodes)
	if downIDs(got) != "n3" || got[0].Epoch != 1 || !strings.Contains(got[0].Reason, "no heartbeat for 11s while 2 of 3 nodes were heard") {
		t.Fatalf("got %+v, want n3 down for silence", got)
	}
}

// A leader cut off from its agents (the SPEC §13 partition: its heartbeats
// stopped arriving, all at once) hears from nobody: it marks no node DOWN,
// and once it hears from most of them again the rest get a full TTL.
func TestALeaderThatHearsFromNobodyMarksNobodyDown(t *testing.T) {
	l := newLiveness(10*time.Second, 3*time.Second)
	nodes := liveNodes(4)
	l.Reset(t0)
	beat(l, at(time.Second), "n1", "n2", "n3", "n4")
	for s := 2 * time.Second; s <= 40*time.Second; s += time.Second {
		if got := l.Tick(at(s), nodes); len(got) != 0 {
			t.Fatalf("at %s: marked %s down though every node went silent at once", s, downIDs(got))
		}
	}
	if !l.Isolated() {
		t.Fatalf("the leader does not know it hears from nobody")
	}
	// The partition heals: three come back at 41 s, n4 only later.
	beat(l, at(41*time.Second), "n1", "n2", "n3")
	if got := l.Tick(at(41*time.Second), nodes); len(got) != 0 || l.Isolated() {
		t.Fatalf("at 41s: %s down, isolated %v", downIDs(got), l.Isolated())
	}
	for s := 42 * time.Second; s <= 51*time.Second; s += time.Second {
		beat(l, at(s), "n1", "n2", "n3")
		if got := l.Tick(at(s), nodes); len(got) != 0 {
			t.Fatalf("at %s: n4 marked down before a full TTL after the heal", s)
		}
	}
	beat(l, at(52*time.Second), "n1", "n2", "n3")
	if got := l.Tick(at(52*time.Second), nodes); downIDs(got) != "n4" {
		t.Fatalf("at 52s got %s, want n4 down: silent a TTL after the leader heard from the others again", downIDs(got))
	}
}

func TestGossipFailureAndSilenceTogetherAreEnoughSooner(t *testing.T) {
	l := newLiveness(10*time.Second, 3*time.Second)
	nodes := liveNodes(3)
	l.Reset(t0)
	beat(l, at(0), "n1", "n2", "n3")
	l.Gossip("n2", gossipFailed)
	l.Gossip("n3", gossipLeft)
	// Gossip alone is not enough: a node cut off from the leader's serf
	// but still heartbeating through a follower is healthy.
	for s := time.Second; s <= 3*time.Second; s += time.Second {
		beat(l, at(s), "n1", "n2")
		if got := l.Tick(at(s), nodes); len(got) != 0 {
			t.Fatalf("at %s: %s down within the gossip grace", s, downIDs(got))
		}
	}
	beat(l, at(4*time.Second), "n1", "n2")
	got := l.Tick(at(4*time.Second), nodes)
	if downIDs(got) != "n3" || !strings.Contains(got[0].Reason, "gossip reports the agent left") {
		t.Fatalf("got %+v, want only n3 (gone from gossip and silent)", got)
	}
	// Even a leader that hears from nobody believes gossip and silence together.
	l2 := newLiveness(10*time.Second, 3*time.Second)
	l2.Reset(t0)
	l2.Tick(t0, liveNodes(3)) // first sight: clocks start
	l2.Gossip("n1", gossipFailed)
	if got := l2.Tick(at(4*time.Second), liveNodes(3)); downIDs(got) != "n1" {
		t.Fatalf("isolated leader: got %s, want n1", downIDs(got))
	}
}

func TestNewLeadershipAndNewEpochsStartClocksAfresh(t *testing.T) {
	l := newLiveness(10*time.Second, 3*time.Second)
	nodes := liveNodes(2)
	l.Reset(t0)
	beat(l, at(0), "n1", "n2")
	// This server loses leadership at 1 s and wins it again at 30 s: the
	// nodes heartbeated to another leader meanwhile.
	l.Reset(at(30 * time.Second))
	if got := l.Tick(at(30*time.Second), nodes); len(got) != 0 {
		t.Fatalf("a new leadership marked %s down at once", downIDs(got))
	}
	// n2 re-registers at epoch 2 and heartbeats at it; its epoch-1 clock
	// does not count against it.
	nodes[1].Epoch = 2
	l.Heartbeat("n2", 2, at(35*time.Second), nil)
	beat(l, at(35*time.Second), "n1")
	if got := l.Tick(at(35*time.Second), nodes); len(got) != 0 {
		t.Fatalf("got %s down", downIDs(got))
	}
	// A single node never goes DOWN for silence alone (it has no peers to
	// show the leader is reachable); gossip must agree.
	solo := newLiveness(10*time.Second, 3*time.Second)
	solo.Reset(t0)
	solo.Tick(t0, liveNodes(1))
	if got := solo.Tick(at(time.Hour), liveNodes(1)); len(got) != 0 {
		t.Fatalf("a lone silent node was marked down without gossip agreeing")
	}
	solo.Gossip("n1", gossipFailed)
	if got := solo.Tick(at(time.Hour), liveNodes(1)); downIDs(got) != "n1" {
		t.Fatalf("a lone node gossip says failed: got %s", downIDs(got))
	}
}
