package server

import (
	"errors"
	"reflect"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/weft-sched/weft/fsm"
	"github.com/weft-sched/weft/internal/testutil"
	wrpc "github.com/weft-sched/weft/rpc"
)

func halted(s *Server) bool {
	select {
	case <-s.Halted():
		return true
	default:
		return false
	}
}

// waitForHalts waits until every server has stopped on the entry at index,
// and checks each says so and kept the state it had before it.
func (c *testCluster) waitForHalts(index uint64, stateIndex uint64, config any) {
	c.t.Helper()
	for id, s := range c.servers {
		testutil.WaitFor(c.t, 20*time.Second, func() bool { return halted(s) })
		err := s.HaltError()
		var h *fsm.HaltError
		if !errors.As(err, &h) || h.Index != index || h.Type != 0x42 {
			c.t.Fatalf("%s stopped with %v, want a halt at index %d on type 66", id, err, index)
		}
		for _, want := range []string{"unknown command type 66", "nothing at or after index", "-raft-skip-index " + strconv.FormatUint(index, 10), RecoveryDoc} {
			if !strings.Contains(err.Error(), want) {
				c.t.Fatalf("%s: halt message %q does not say %q", id, err, want)
			}
		}
		if st := s.State(); st.Index() != stateIndex || !reflect.DeepEqual(st.QueueConfig(), config) {
			c.t.Fatalf("%s: state at index %d after the halt, want the state at %d", id, st.Index(), stateIndex)
		}
	}
	if !c.logs.Contains("stopping this server: the replicated log holds an entry it cannot apply") {
		c.t.Fatalf("no server logged why it stopped")
	}
}

// restartAll stops every server and starts it again on its data dir.
func (c *testCluster) restartAll() {
	c.t.Helper()
	ids := sortedCopy(c.ids())
	for _, id := range ids {
		c.stop(id)
	}
	first := c.start(ids[0], 3)
	for _, id := range ids[1:] {
		c.start(id, 3, first.SerfAddr())
	}
}

// An entry of an unknown type, committed as anyone who speaks Raft could,
// stops every server before it applies anything at or after it; a restart
// stops again at the same place; restarting every server with
// RaftSkipIndex set to that entry recovers, and the entries after it apply.
func TestUnknownEntryStopsEveryServerAndSkipIndexRecovers(t *testing.T) {
	c := startThree(t)
	l := c.leader()
	cfg := twoQueueConfig(3)
	var wr wrpc.WriteResponse
	if err := c.call(l, "Queue.Apply", &wrpc.QueueApplyRequest{Config: cfg}, &wr); err != nil {
		t.Fatal(err)
	}
	for _, s := range c.servers {
		testutil.WaitFor(t, 10*time.Second, func() bool { return s.State().Index() >= wr.Index })
	}
	before := l.State().Index()

	next, err := fsm.Encode(fsm.QueueConfigApplyType, &fsm.QueueConfigApplyRequest{Config: twoQueueConfig(5)})
	if err != nil {
		t.Fatal(err)
	}
	bad := l.raft.Apply([]byte{0x42, 0x80}, 5*time.Second)
	after := l.raft.Apply(next, 5*time.Second)
	if err := bad.Error(); err != nil {
		t.Fatalf("the unknown entry was not committed: %v", err)
	}
	index := bad.Index()
	if h, ok := bad.Response().(*fsm.HaltError); !ok || h.Index != index {
		t.Fatalf("the unknown entry answered %v, want a halt at %d", bad.Response(), index)
	}
	// The entry after it is not applied: answered with the halt if it was
	// committed before the leader stopped.
	afterCommitted := after.Error() == nil
	if afterCommitted {
		if h, ok := after.Response().(*fsm.HaltError); !ok || h.Index != index {
			t.Fatalf("the entry after the unknown one answered %v", after.Response())
		}
	}
	c.waitForHalts(index, before, cfg)

	// A restart meets the same entry and stops at the same place.
	c.restartAll()
	c.waitForHalts(index, before, cfg)

	// The escape hatch, on every server.
	for _, id := range c.ids() {
		c.configs[id].RaftSkipIndex = index
	}
	c.restartAll()
	l = c.waitForLeader()
	if !c.logs.Contains("SKIPPED the committed entry at the index raft_skip_index names") {
		t.Fatalf("the skip was not logged")
	}
	for id, s := range c.servers {
		testutil.WaitFor(t, 10*time.Second, func() bool { return s.State().Index() >= index })
		if halted(s) {
			t.Fatalf("%s halted with the escape hatch: %v", id, s.HaltError())
		}
		if afterCommitted {
			testutil.WaitFor(t, 10*time.Second, func() bool { return reflect.DeepEqual(s.State().QueueConfig(), twoQueueConfig(5)) })
		}
	}
	// The cluster takes writes again, on every server.
	if err := c.call(c.follower(), "Queue.Apply", &wrpc.QueueApplyRequest{Config: twoQueueConfig(7)}, &wr); err != nil {
		t.Fatalf("write after recovery: %v", err)
	}
	for id, s := range c.servers {
		testutil.WaitFor(t, 10*time.Second, func() bool { return s.State().Index() >= wr.Index })
		if !reflect.DeepEqual(s.State().QueueConfig(), twoQueueConfig(7)) {
			t.Fatalf("%s did not apply the write after recovery", id)
		}
	}
}
