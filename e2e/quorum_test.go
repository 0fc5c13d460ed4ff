package e2e

import (
	"fmt"
	"net"
	"os"
	"path/filepath"
	"reflect"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

type peer struct {
	ID      string `json:"id"`
	Address string `json:"address"`
	State   string `json:"state"`
	Voter   bool   `json:"voter"`
}

type queueInfo struct {
	Name        string  `json:"name"`
	Weight      float64 `json:"weight"`
	Policy      string  `json:"policy"`
	Preemptable bool    `json:"preemptable"`
}

type member struct {
	Name   string `json:"name"`
	Role   string `json:"role"`
	Status string `json:"status"`
}

// quorum is three `weft server` processes on 127.0.0.1/2/3.
type quorum struct {
	t        testing.TB
	ips      []string
	rpcPort  int
	serfPort int
	dirs     map[string]string
	procs    map[string]*proc
	// sec, if set, is the cluster's TLS, gossip key and ACLs.
	sec *security
	// serverFlags are given to every server after the harness' own.
	serverFlags []string
}

func (q *quorum) rpcAddr(id string) string {
	return net.JoinHostPort(q.ips[q.index(id)], strconv.Itoa(q.rpcPort))
}

func (q *quorum) index(id string) int {
	for i := range q.ips {
		if id == fmt.Sprintf("s%d", i+1) {
			return i
		}
	}
	q.t.Fatalf("no server %s", id)
	return 0
}

func (q *quorum) args(id string) []string {
	i := q.index(id)
	args := []string{"server", "-node-id", id, "-data-dir", q.dirs[id], "-bind", q.ips[i],
		"-rpc-port", strconv.Itoa(q.rpcPort), "-serf-port", strconv.Itoa(q.serfPort), "-bootstrap-expect", "3"}
	for j, ip := range q.ips {
		if j != i {
			args = append(args, "-join", net.JoinHostPort(ip, strconv.Itoa(q.serfPort)))
		}
	}
	if q.sec != nil {
		args = append(args, "-config", q.sec.config("server", id))
	}
	return append(args, q.serverFlags...)
}

// startQuorum starts a secure quorum: TLS, a gossip key and ACLs, as the
// README sets one up (SPEC §15); client commands of the test carry a
// management token.
func startQuorum(t testing.TB) *quorum { return startQuorumWith(t, newSecurity(t)) }

// startOpenQuorum starts a quorum with no TLS, gossip key or ACLs (open,
// on loopback), for the scenarios about what an open cluster must still
// survive.
func startOpenQuorum(t testing.TB) *quorum { return startQuorumWith(t, nil) }

// startQuorumWith starts a quorum secured by sec (nil: open) whose servers
// also get serverFlags.
func startQuorumWith(t testing.TB, sec *security, serverFlags ...string) *quorum {
	q := &quorum{t: t, ips: []string{"127.0.0.1", "127.0.0.2", "127.0.0.3"}, dirs: map[string]string{}, procs: map[string]*proc{},
		sec: sec, serverFlags: serverFlags}
	q.rpcPort = freePort(t, q.ips...)
	q.serfPort = freePort(t, q.ips...)
	for i := range q.ips {
		id := fmt.Sprintf("s%d", i+1)
		q.dirs[id] = filepath.Join(t.TempDir(), id)
		q.procs[id] = startProc(t, id, q.args(id)...)
	}
	if sec != nil {
		sec.bootstrap(strings.Join([]string{q.rpcAddr("s1"), q.rpcAddr("s2"), q.rpcAddr("s3")}, ","))
	}
	return q
}

// peers asks server id for the Raft peers.
func (q *quorum) peers(id string) ([]peer, error) {
	var ps []peer
	err := cliJSON(q.t, &ps, "operator", "raft", "list-peers", "-address", q.rpcAddr(id))
	return ps, err
}

// leaderSeenBy waits until server id reports three voters and one leader
// among the given candidates, and returns the leader's ID.
func (q *quorum) waitForLeader(id string, timeout time.Duration, exclude string) string {
	q.t.Helper()
	var leader string
	waitFor(q.t, timeout, "a leader with three voters", func() error {
		ps, err := q.peers(id)
		if err != nil {
			return err
		}
		leader = ""
		voters := 0
		for _, p := range ps {
			if p.Voter {
				voters++
			}
			if p.State == "leader" {
				leader = p.ID
			}
		}
		if voters != 3 || leader == "" || leader == exclude {
			return fmt.Errorf("peers %+v", ps)
		}
		return nil
	})
	return leader
}

func writeQueueFile(t *testing.T, weight int) string {
	path := filepath.Join(t.TempDir(), "queues.hcl")
	src := fmt.Sprintf(`queue "root" {
  policy = "drf"
  queue "prod" {
    weight      = %d
    preemptable = false
  }
  queue "default" {}
}
`, weight)
	if err := os.WriteFile(path, []byte(src), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

func TestThreeServerQuorumSurvivesLeaderKill(t *testing.T) {
	q := startQuorum(t)
	leader := q.waitForLeader("s1", 30*time.Second, "")
	var follower string
	for _, id := range []string{"s1", "s2", "s3"} {
		if id != leader {
			follower = id
			break
		}
	}
	t.Logf("leader %s; writing through follower %s", leader, follower)

	// All three servers gossip.
	var members []member
	if err := cliJSON(t, &members, "members", "-address", q.rpcAddr(follower)); err != nil {
		t.Fatal(err)
	}
	if len(members) != 3 {
		t.Fatalf("members = %+v", members)
	}
	for _, m := range members {
		if m.Role != "server" || m.Status != "alive" {
			t.Fatalf("member %+v", m)
		}
	}

	// Apply a queue configuration through a follower.
	if out, errOut, code := cli(t, "queue", "apply", "-address", q.rpcAddr(follower), writeQueueFile(t, 3)); code != 0 {
		t.Fatalf("queue apply through follower: exit %d: %s %s", code, out, errOut)
	}
	var want []queueInfo
	if err := cliJSON(t, &want, "queue", "list", "-address", q.rpcAddr(leader)); err != nil {
		t.Fatal(err)
	}
	if len(want) != 3 || want[1].Name != "root.prod" || want[1].Weight != 3 || want[1].Preemptable {
		t.Fatalf("queues after apply: %+v", want)
	}

	// SIGKILL the leader and time how long until a write succeeds again.
	killed := q.procs[leader]
	killedAt := time.Now()
	killed.kill()
	var survivor string
	for _, id := range []string{"s1", "s2", "s3"} {
		if id != leader {
			survivor = id
		}
	}
	second := writeQueueFile(t, 5)
	var firstWrite time.Duration
	waitFor(t, 30*time.Second, "a write after the leader was killed", func() error {
		_, errOut, code := cli(t, "queue", "apply", "-address", q.rpcAddr(survivor), second)
		if code != 0 {
			return fmt.Errorf("exit %d: %s", code, errOut)
		}
		firstWrite = time.Since(killedAt)
		return nil
	})
	t.Logf("leader kill to first successful write: %s", firstWrite.Round(time.Millisecond))
	newLeader := q.waitForLeader(survivor, 30*time.Second, leader)
	if newLeader == leader {
		t.Fatalf("killed server still leader")
	}
	t.Logf("new leader %s", newLeader)

	// Read the configuration back from a survivor.
	var got []queueInfo
	if err := cliJSON(t, &got, "queue", "list", "-address", q.rpcAddr(survivor)); err != nil {
		t.Fatal(err)
	}
	if len(got) != 3 || got[1].Weight != 5 {
		t.Fatalf("queues on survivor: %+v", got)
	}

	// Restart the killed server on its data dir: it rejoins as a follower
	// and catches up to the same state.
	q.procs[leader] = startProc(t, leader+"-restarted", q.args(leader)...)
	waitFor(t, 30*time.Second, "the restarted server to rejoin as a follower", func() error {
		ps, err := q.peers(leader)
		if err != nil {
			return err
		}
		for _, p := range ps {
			if p.ID == leader && p.State == "follower" && p.Voter && len(ps) == 3 {
				return nil
			}
		}
		return fmt.Errorf("peers %+v", ps)
	})
	waitFor(t, 30*time.Second, "the restarted server to hold the same state", func() error {
		var mine []queueInfo
		if err := cliJSON(t, &mine, "queue", "list", "-stale", "-address", q.rpcAddr(leader)); err != nil {
			return err
		}
		if !reflect.DeepEqual(mine, got) {
			return fmt.Errorf("restarted server has %+v, want %+v", mine, got)
		}
		return nil
	})

	// SIGTERM leaves gracefully: the process exits 0 and the others drop it.
	if err := q.procs[leader].stop(syscall.SIGTERM, 30*time.Second); err != nil {
		t.Fatalf("graceful leave exited with %v", err)
	}
	waitFor(t, 30*time.Second, "the departed server to be removed from raft", func() error {
		ps, err := q.peers(survivor)
		if err != nil {
			return err
		}
		if len(ps) != 2 {
			return fmt.Errorf("peers %+v", ps)
		}
		return nil
	})
}
