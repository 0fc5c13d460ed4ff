package server

import (
	"errors"
	"io"
	"net"
	"reflect"
	"testing"
	"time"

	"github.com/weft-sched/weft/internal/testutil"
	wrpc "github.com/weft-sched/weft/rpc"
	"github.com/weft-sched/weft/scheduler"
)

func twoQueueConfig(weight float64) *scheduler.QueueConfig {
	cfg := scheduler.DefaultQueueConfig()
	prod := scheduler.NewQueueSpec("prod")
	prod.Weight = weight
	cfg.Root.Children = append(cfg.Root.Children, prod)
	return cfg
}

// startThree starts three servers with bootstrap_expect 3, the second and
// third joining the first, and waits for a ready leader with all three voters.
func startThree(t *testing.T) *testCluster {
	c := newTestCluster(t)
	s1 := c.start("s1", 3)
	c.start("s2", 3, s1.SerfAddr())
	c.start("s3", 3, s1.SerfAddr())
	c.waitForLeader()
	c.waitForVoters("s1", "s2", "s3")
	return c
}

func TestThreeServersBootstrapAndForwardWrites(t *testing.T) {
	c := startThree(t)
	f := c.follower()

	cfg := twoQueueConfig(3)
	var wr wrpc.WriteResponse
	if err := c.call(f, "Queue.Apply", &wrpc.QueueApplyRequest{Config: cfg}, &wr); err != nil {
		t.Fatalf("apply through follower: %v", err)
	}
	if wr.Index == 0 {
		t.Fatalf("write response has no index")
	}
	// Every server applies it.
	for id, s := range c.servers {
		testutil.WaitFor(t, 5*time.Second, func() bool { return s.State().Index() >= wr.Index })
		if !reflect.DeepEqual(s.State().QueueConfig(), cfg) {
			t.Fatalf("%s holds a different configuration", id)
		}
	}
	// A consistent read through a follower is answered by the leader.
	var list wrpc.QueueListResponse
	if err := c.call(f, "Queue.List", &wrpc.QueueListRequest{}, &list); err != nil {
		t.Fatal(err)
	}
	if len(list.Queues) != 3 || list.Queues[2].Name != "root.prod" || list.Queues[2].Weight != 3 {
		t.Fatalf("queues = %+v", list.Queues)
	}
	if !list.KnownLeader || list.LastContact != 0 || list.Index < wr.Index {
		t.Fatalf("consistent read meta = %+v", list.ResponseMeta)
	}
	// A stale read is answered by the follower itself and says how stale.
	var stale wrpc.QueueListResponse
	if err := c.call(f, "Queue.List", &wrpc.QueueListRequest{RequestHeader: wrpc.RequestHeader{AllowStale: true}}, &stale); err != nil {
		t.Fatal(err)
	}
	if len(stale.Queues) != 3 || !stale.KnownLeader {
		t.Fatalf("stale read = %+v", stale)
	}
	// list-peers through a follower: three voters, one leader.
	var peers wrpc.RaftConfigurationResponse
	if err := c.call(f, "Operator.RaftGetConfiguration", &wrpc.RequestHeader{}, &peers); err != nil {
		t.Fatal(err)
	}
	leaders := 0
	for _, p := range peers.Servers {
		if p.State == "leader" {
			leaders++
		}
		if !p.Voter {
			t.Fatalf("peer %s is not a voter", p.ID)
		}
	}
	if len(peers.Servers) != 3 || leaders != 1 {
		t.Fatalf("peers = %+v", peers.Servers)
	}
}

func TestInvalidWriteIsRefusedEverywhere(t *testing.T) {
	c := startThree(t)
	before := c.leader().State().QueueConfig()
	bad := twoQueueConfig(-1)
	var wr wrpc.WriteResponse
	err := c.call(c.follower(), "Queue.Apply", &wrpc.QueueApplyRequest{Config: bad}, &wr)
	if err == nil || !wrpc.IsServerError(err) {
		t.Fatalf("invalid config accepted: %v", err)
	}
	for _, s := range c.servers {
		if !reflect.DeepEqual(s.State().QueueConfig(), before) {
			t.Fatalf("a refused write changed %s", s.NodeID())
		}
	}
}

func TestLeaderFailoverAndRestartOnDataDir(t *testing.T) {
	c := startThree(t)
	old := c.leader()
	oldID := old.NodeID()
	var wr wrpc.WriteResponse
	if err := c.call(c.follower(), "Queue.Apply", &wrpc.QueueApplyRequest{Config: twoQueueConfig(2)}, &wr); err != nil {
		t.Fatal(err)
	}
	// Make the restarted server restore from a snapshot as well as the log.
	if err := old.raft.Snapshot().Error(); err != nil {
		t.Fatal(err)
	}
	c.stop(oldID) // like a crash: no graceful leave

	newLeader := c.waitForLeader()
	if newLeader.NodeID() == oldID {
		t.Fatalf("the stopped server is still leader")
	}
	// Writes through any survivor succeed under the new leader.
	var survivor *Server
	for _, s := range c.servers {
		survivor = s
	}
	if err := c.call(survivor, "Queue.Apply", &wrpc.QueueApplyRequest{Config: twoQueueConfig(5)}, &wr); err != nil {
		t.Fatalf("write after failover: %v", err)
	}
	// The failed server stays a voter until an operator removes it.
	c.waitForVoters("s1", "s2", "s3")

	back := c.start(oldID, 3)
	if !back.hadRaftState {
		t.Fatalf("restarted server did not find its raft state")
	}
	testutil.WaitFor(t, 10*time.Second, func() bool { return back.State().Index() >= wr.Index })
	if back.IsLeader() && c.leader() != back {
		t.Fatalf("two leaders")
	}
	if w := back.State().QueueConfig().Root.Children[1].Weight; w != 5 {
		t.Fatalf("restarted server has weight %v, want 5", w)
	}
	c.waitForVoters("s1", "s2", "s3")
}

func TestGracefulLeaveRemovesPeerAndRestartRejoins(t *testing.T) {
	c := startThree(t)
	id := c.leave(c.follower())

	// Restarted on its data dir, it rejoins (serf's snapshot knows the pool)
	// and the leader adds it back as a voter.
	back := c.start(id, 3)
	if !back.hadRaftState {
		t.Fatalf("restarted server lost its raft state")
	}
	c.waitForVoters("s1", "s2", "s3")
}

func TestLeaderLeaveHandsOver(t *testing.T) {
	c := startThree(t)
	id := c.leave(c.leader())
	if c.leader().NodeID() == id {
		t.Fatalf("departed server still leads")
	}
}

func TestNoLeaderHoldsThenFails(t *testing.T) {
	c := newTestCluster(t)
	s := c.start("lonely", 3) // waits for two more servers that never come
	start := time.Now()
	var wr wrpc.WriteResponse
	err := c.call(s, "Queue.Apply", &wrpc.QueueApplyRequest{Config: scheduler.DefaultQueueConfig()}, &wr)
	if !wrpc.IsNoLeader(err) {
		t.Fatalf("want ErrNoLeader, got %v", err)
	}
	if held := time.Since(start); held < s.config.RPCHoldTimeout {
		t.Fatalf("request failed after %s, before the %s hold timeout", held, s.config.RPCHoldTimeout)
	}
	// Stale reads work without a leader and say so.
	var list wrpc.QueueListResponse
	if err := c.call(s, "Queue.List", &wrpc.QueueListRequest{RequestHeader: wrpc.RequestHeader{AllowStale: true}}, &list); err != nil {
		t.Fatal(err)
	}
	if list.KnownLeader || len(list.Queues) != 2 {
		t.Fatalf("stale read without leader = %+v", list)
	}
}

func TestConflictingBootstrapExpectAborts(t *testing.T) {
	c := newTestCluster(t)
	s1 := c.start("s1", 3)
	c.start("s2", 2, s1.SerfAddr())
	c.start("s3", 3, s1.SerfAddr())
	testutil.WaitFor(t, 10*time.Second, func() bool { return c.logs.Contains("servers disagree on bootstrap_expect") })
	testutil.WaitFor(t, 10*time.Second, func() bool { return len(s1.serf.Members()) == 3 })
	for id, s := range c.servers {
		if s.bootstrapped.Load() {
			t.Fatalf("%s bootstrapped despite conflicting expect values", id)
		}
		f := s.raft.GetConfiguration()
		if err := f.Error(); err != nil || len(f.Configuration().Servers) != 0 {
			t.Fatalf("%s has a raft configuration: %v", id, f.Configuration())
		}
	}
}

func TestSingleServerRestartKeepsState(t *testing.T) {
	c := newTestCluster(t)
	s := c.start("solo", 1)
	c.waitForLeader()
	var wr wrpc.WriteResponse
	if err := c.call(s, "Queue.Apply", &wrpc.QueueApplyRequest{Config: twoQueueConfig(4)}, &wr); err != nil {
		t.Fatal(err)
	}
	c.stop("solo")
	s = c.start("solo", 1)
	if !s.hadRaftState {
		t.Fatalf("no raft state after restart")
	}
	c.waitForLeader()
	var st wrpc.QueueStatusResponse
	if err := c.call(s, "Queue.Status", &wrpc.QueueStatusRequest{Name: "prod"}, &st); err != nil {
		t.Fatal(err)
	}
	if st.Queue.Weight != 4 || st.Index != wr.Index {
		t.Fatalf("after restart: %+v at index %d, want weight 4 at %d", st.Queue, st.Index, wr.Index)
	}
	err := c.call(s, "Queue.Status", &wrpc.QueueStatusRequest{Name: "nope"}, &st)
	if !wrpc.IsNotFound(err) {
		t.Fatalf("unknown queue: %v", err)
	}
}

func TestBlockingQuery(t *testing.T) {
	c := newTestCluster(t)
	s := c.start("solo", 1)
	c.waitForLeader()
	var first wrpc.QueueListResponse
	if err := c.call(s, "Queue.List", &wrpc.QueueListRequest{}, &first); err != nil {
		t.Fatal(err)
	}
	// Without a change, the query waits out max_wait and returns the same index.
	var same wrpc.QueueListResponse
	req := &wrpc.QueueListRequest{RequestHeader: wrpc.RequestHeader{MinQueryIndex: first.Index, MaxWait: 200 * time.Millisecond}}
	if err := c.call(s, "Queue.List", req, &same); err != nil || same.Index != first.Index {
		t.Fatalf("timed-out blocking query: %v, index %d want %d", err, same.Index, first.Index)
	}
	// A change wakes it.
	done := make(chan wrpc.QueueListResponse, 1)
	errCh := make(chan error, 1)
	go func() {
		var resp wrpc.QueueListResponse
		req := &wrpc.QueueListRequest{RequestHeader: wrpc.RequestHeader{MinQueryIndex: first.Index, MaxWait: time.Minute}}
		errCh <- c.call(s, "Queue.List", req, &resp)
		done <- resp
	}()
	var wr wrpc.WriteResponse
	if err := c.call(s, "Queue.Apply", &wrpc.QueueApplyRequest{Config: twoQueueConfig(9)}, &wr); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-errCh:
		resp := <-done
		if err != nil || resp.Index != wr.Index || len(resp.Queues) != 3 {
			t.Fatalf("woken query: %v, index %d (want %d), %d queues", err, resp.Index, wr.Index, len(resp.Queues))
		}
	case <-time.After(30 * time.Second):
		t.Fatalf("blocking query not woken by a change")
	}
}

func TestPortMultiplexing(t *testing.T) {
	c := newTestCluster(t)
	s := c.start("solo", 1)
	c.waitForLeader()

	// 0x01: a plain msgpack RPC connection.
	conn, err := net.Dial("tcp", s.RPCAddr())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	conn.Write([]byte{byte(wrpc.ConnRPC)})
	client := newRawClient(conn)
	var leader wrpc.LeaderResponse
	if err := client.Call("Status.Leader", &wrpc.RequestHeader{}, &leader); err != nil || leader.ID != "solo" {
		t.Fatalf("Status.Leader over 0x01: %v %+v", err, leader)
	}

	// An unknown first byte closes the connection.
	bad, err := net.Dial("tcp", s.RPCAddr())
	if err != nil {
		t.Fatal(err)
	}
	defer bad.Close()
	bad.Write([]byte{0x09, 1, 2, 3})
	assertClosedByServer(t, bad)

	// Garbage after 0x01 closes that connection; the server lives on.
	junk, err := net.Dial("tcp", s.RPCAddr())
	if err != nil {
		t.Fatal(err)
	}
	defer junk.Close()
	junk.Write([]byte{byte(wrpc.ConnRPC), 0x82, 0xc1, 0xc1, 0xff, 0xff})
	assertClosedByServer(t, junk)
	testutil.WaitFor(t, 5*time.Second, func() bool { return c.logs.Contains("dropping RPC connection") })
	if err := c.call(s, "Status.Ping", &wrpc.RequestHeader{}, &struct{}{}); err != nil {
		t.Fatalf("server unusable after malformed input: %v", err)
	}
}

func TestRemovePeer(t *testing.T) {
	c := startThree(t)
	f := c.follower()
	id := f.NodeID()
	c.stop(id)
	var wr wrpc.WriteResponse
	err := c.call(c.leader(), "Operator.RaftRemovePeer", &wrpc.RaftRemovePeerRequest{ID: "nobody"}, &wr)
	if !wrpc.IsNotFound(err) {
		t.Fatalf("removing an unknown peer: %v", err)
	}
	if err := c.call(c.leader(), "Operator.RaftRemovePeer", &wrpc.RaftRemovePeerRequest{ID: id}, &wr); err != nil {
		t.Fatal(err)
	}
	c.waitForVoters(c.ids()...)
}

// assertClosedByServer fails unless the server closes conn (EOF or reset)
// within a few seconds.
func assertClosedByServer(t *testing.T, conn net.Conn) {
	t.Helper()
	conn.SetReadDeadline(time.Now().Add(5 * time.Second))
	_, err := io.ReadAll(conn)
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		t.Fatalf("the server left the connection open")
	}
}
