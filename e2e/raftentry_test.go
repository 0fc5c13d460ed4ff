package e2e

import (
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"reflect"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/raft"
	wrpc "github.com/weft-sched/weft/rpc"
)

// raftDialer is a Raft stream layer that only dials: it lets the test
// speak Raft to a server's RPC port as anyone on the network could.
type raftDialer struct {
	once   sync.Once
	closed chan struct{}
}

func (d *raftDialer) Dial(addr raft.ServerAddress, timeout time.Duration) (net.Conn, error) {
	c, err := net.DialTimeout("tcp", string(addr), timeout)
	if err != nil {
		return nil, err
	}
	if _, err := c.Write([]byte{byte(wrpc.ConnRaft)}); err != nil {
		c.Close()
		return nil, err
	}
	return c, nil
}

func (d *raftDialer) Accept() (net.Conn, error) {
	<-d.closed
	return nil, errors.New("closed")
}

func (d *raftDialer) Close() error {
	d.once.Do(func() { close(d.closed) })
	return nil
}

func (d *raftDialer) Addr() net.Addr { return &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1), Port: 1} }

// injectEntry appends data as a committed command at the same index on
// every server, the way the attack on an open cluster did: an
// AppendEntries of a higher term, from a "leader" nobody elected, that
// says the entry is committed. It returns the entry's index.
func injectEntry(t *testing.T, addrs []string, data []byte) uint64 {
	t.Helper()
	d := &raftDialer{closed: make(chan struct{})}
	trans := raft.NewNetworkTransportWithConfig(&raft.NetworkTransportConfig{Stream: d, MaxPool: 1, Timeout: 5 * time.Second})
	defer trans.Close()
	hdr := raft.RPCHeader{ProtocolVersion: raft.ProtocolVersionMax, ID: []byte("intruder"), Addr: []byte("127.0.0.1:1")}
	// An AppendEntries of term 0 is refused with the server's term and
	// last index. Wait until all agree.
	var term, last uint64
	waitFor(t, 30*time.Second, "the servers to agree on term and last index", func() error {
		term, last = 0, 0
		for i, a := range addrs {
			var resp raft.AppendEntriesResponse
			if err := trans.AppendEntries(raft.ServerID(a), raft.ServerAddress(a), &raft.AppendEntriesRequest{RPCHeader: hdr}, &resp); err != nil {
				return err
			}
			if i > 0 && (resp.Term != term || resp.LastLog != last) {
				return fmt.Errorf("%s at term %d index %d, others at %d, %d", a, resp.Term, resp.LastLog, term, last)
			}
			term, last = resp.Term, resp.LastLog
		}
		return nil
	})
	index := last + 1
	for _, a := range addrs {
		req := &raft.AppendEntriesRequest{RPCHeader: hdr, Term: term + 1, LeaderCommitIndex: index,
			Entries: []*raft.Log{{Index: index, Term: term + 1, Type: raft.LogCommand, Data: data}}}
		var resp raft.AppendEntriesResponse
		if err := trans.AppendEntries(raft.ServerID(a), raft.ServerAddress(a), req, &resp); err != nil || !resp.Success {
			t.Fatalf("append to %s: %v, %+v", a, err, resp)
		}
	}
	return index
}

// waitExit waits for p to exit and returns its exit code.
func waitExit(t *testing.T, p *proc, timeout time.Duration) int {
	t.Helper()
	select {
	case <-p.done:
	case <-time.After(timeout):
		t.Fatalf("%s still running %s later", p.name, timeout)
	}
	var ee *exec.ExitError
	if errors.As(p.err, &ee) {
		return ee.ExitCode()
	}
	if p.err != nil {
		t.Fatalf("%s: %v", p.name, p.err)
	}
	return 0
}

// The attack: an entry of an unknown type appended to every server
// of an open cluster made all three panic on every restart. Now each
// stops cleanly with exit code 3 and the recovery, stops the same way
// after a restart, and comes back with -raft-skip-index on all three,
// holding the state it had.
func TestInjectedUnknownEntryStopsEveryServerCleanly(t *testing.T) {
	q := startOpenQuorum(t)
	leader := q.waitForLeader("s1", 30*time.Second, "")
	if out, errOut, code := cli(t, "queue", "apply", "-address", q.rpcAddr(leader), writeQueueFile(t, 3)); code != 0 {
		t.Fatalf("queue apply: exit %d: %s %s", code, out, errOut)
	}
	var want []queueInfo
	if err := cliJSON(t, &want, "queue", "list", "-address", q.rpcAddr(leader)); err != nil {
		t.Fatal(err)
	}
	ids := []string{"s1", "s2", "s3"}
	var addrs []string
	for _, id := range ids {
		addrs = append(addrs, q.rpcAddr(id))
	}
	index := injectEntry(t, addrs, []byte{0x42, 0x80})
	n := strconv.FormatUint(index, 10)

	stopsAt := func(round int) {
		t.Helper()
		for _, id := range ids {
			p := q.procs[id]
			if code := waitExit(t, p, 30*time.Second); code != 3 {
				t.Fatalf("%s exited %d, want 3", id, code)
			}
			b, err := os.ReadFile(p.log)
			if err != nil {
				t.Fatal(err)
			}
			line := "Error: the committed Raft entry at index " + n + " cannot be applied (unknown command type 66"
			if c := strings.Count(string(b), line); c != round {
				t.Fatalf("%s printed %q %d times, want %d:\n%s", id, line, c, round, tail(b, 2048))
			}
			if !strings.Contains(string(b), "-raft-skip-index "+n) {
				t.Fatalf("%s did not name the recovery:\n%s", id, tail(b, 2048))
			}
		}
	}
	stopsAt(1)

	// Restarted as they are, they stop at the same entry again.
	for _, id := range ids {
		q.procs[id].start()
	}
	stopsAt(2)

	// Restarted with the escape hatch, they serve the state they had.
	for _, id := range ids {
		p := q.procs[id]
		p.args = append(q.args(id), "-raft-skip-index", n)
		p.start()
	}
	leader = q.waitForLeader("s1", 30*time.Second, "")
	for _, id := range ids {
		waitFor(t, 30*time.Second, id+" to hold the state from before the entry", func() error {
			var got []queueInfo
			if err := cliJSON(t, &got, "queue", "list", "-stale", "-address", q.rpcAddr(id)); err != nil {
				return err
			}
			if !reflect.DeepEqual(got, want) {
				return fmt.Errorf("queues %+v, want %+v", got, want)
			}
			return nil
		})
	}
	if out, errOut, code := cli(t, "queue", "apply", "-address", q.rpcAddr(leader), writeQueueFile(t, 5)); code != 0 {
		t.Fatalf("queue apply after recovery: exit %d: %s %s", code, out, errOut)
	}
}

// With TLS on, the same attacker cannot even open Raft: a plaintext Raft
// connection is closed before a byte of it is read as Raft, and the
// cluster goes on as before.
func TestRaftIsClosedToOutsidersOnASecureCluster(t *testing.T) {
	q := startQuorum(t)
	leader := q.waitForLeader("s1", 30*time.Second, "")
	var before []peer
	var err error
	if before, err = q.peers(leader); err != nil {
		t.Fatal(err)
	}
	for _, id := range []string{"s1", "s2", "s3"} {
		c, err := net.DialTimeout("tcp", q.rpcAddr(id), 5*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		c.Write([]byte{byte(wrpc.ConnRaft)})
		c.SetReadDeadline(time.Now().Add(10 * time.Second))
		if n, err := c.Read(make([]byte, 1)); err == nil || n != 0 {
			t.Fatalf("%s answered a plaintext Raft connection (%d bytes, %v)", id, n, err)
		}
		c.Close()
	}
	if out, errOut, code := cli(t, "queue", "apply", "-address", q.rpcAddr(leader), writeQueueFile(t, 3)); code != 0 {
		t.Fatalf("the cluster stopped serving writes: exit %d: %s %s", code, out, errOut)
	}
	after, err := q.peers(leader)
	if err != nil || !reflect.DeepEqual(before, after) {
		t.Fatalf("peers changed: %+v -> %+v (%v)", before, after, err)
	}
}
