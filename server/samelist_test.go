package server

import (
	"fmt"
	"testing"
	"time"

	"github.com/hashicorp/raft"
	"github.com/weft-sched/weft/fsm"
	wrpc "github.com/weft-sched/weft/rpc"
	"github.com/weft-sched/weft/scheduler"
)

// A list recomputed entry for entry the same as the one an agent holds is
// left out, with LeastLoadedSame, for an agent that says it understands;
// an older agent, or one holding another list, gets the list; a changed
// list is sent.
func TestSameListIsLeftOut(t *testing.T) {
	f := fsm.New(nil)
	buf, err := fsm.Encode(fsm.NodeRegisterType, &fsm.NodeRegisterRequest{ID: "n1", Address: "n1:1",
		Capacity: scheduler.Resources{MemoryMB: 4096, Vcores: 4}})
	if err != nil {
		t.Fatal(err)
	}
	f.Apply(&raft.Log{Index: 1, Term: 1, Type: raft.LogCommand, Data: buf})
	st := f.State()
	s := &Server{liveness: newLiveness(time.Minute, time.Minute)}
	t0 := time.Unix(1000, 0)
	s.board.reset(t0)
	load := wrpc.NodeLoad{QueueCapacity: 10}
	s.heartbeatSeen("n1", 1, t0, &load)

	var r1 wrpc.HeartbeatResponse
	s.opportunisticView(st, t0, "n1", 0, true, 0, &r1)
	if len(r1.LeastLoaded) != 1 || r1.LeastLoadedSame {
		t.Fatalf("first answer: %d nodes, same %v", len(r1.LeastLoaded), r1.LeastLoadedSame)
	}
	t1 := t0.Add(2 * time.Second) // past the sorting interval: recomputed, unchanged
	var r2, old, other wrpc.HeartbeatResponse
	s.opportunisticView(st, t1, "n1", r1.LeastLoadedAt, true, 0, &r2)
	if r2.LeastLoaded != nil || !r2.LeastLoadedSame || r2.LeastLoadedAt == r1.LeastLoadedAt {
		t.Fatalf("unchanged recomputation: %d nodes, same %v, at %d (held %d)", len(r2.LeastLoaded), r2.LeastLoadedSame, r2.LeastLoadedAt, r1.LeastLoadedAt)
	}
	s.opportunisticView(st, t1, "n1", r1.LeastLoadedAt, false, 0, &old)
	s.opportunisticView(st, t1, "n1", 12345, true, 0, &other)
	if len(old.LeastLoaded) != 1 || old.LeastLoadedSame || len(other.LeastLoaded) != 1 || other.LeastLoadedSame {
		t.Fatalf("an agent that does not understand, or holds another list, must get the list: %+v, %+v", old, other)
	}
	load.Used = scheduler.Resources{MemoryMB: 1024, Vcores: 1}
	s.heartbeatSeen("n1", 1, t1, &load)
	var r3 wrpc.HeartbeatResponse
	s.opportunisticView(st, t1.Add(2*time.Second), "n1", r2.LeastLoadedAt, true, 0, &r3)
	if len(r3.LeastLoaded) != 1 || r3.LeastLoadedSame || r3.LeastLoaded[0].Free.Vcores != 3 {
		t.Fatalf("changed list: %+v", r3)
	}
}

// BenchmarkHeartbeatResponseBytes measures the encoded size of heartbeat
// answers' opportunistic view in a steady cluster: 1,000 nodes whose loads
// do not change, each heartbeating once a second, the list recomputed every
// second (the default sorting interval). "list-each-time" is an agent that
// does not send same_list_ok (every answer before this change);
// "same-list" one that does.
func BenchmarkHeartbeatResponseBytes(b *testing.B) {
	f := fsm.New(nil)
	const nodes = 1000
	for i := 0; i < nodes; i++ {
		buf, err := fsm.Encode(fsm.NodeRegisterType, &fsm.NodeRegisterRequest{ID: fmt.Sprintf("n%04d", i), Address: fmt.Sprintf("10.0.%d.%d:8049", i/250, i%250),
			Rack: "/rack-1", Capacity: scheduler.Resources{MemoryMB: 65536, Vcores: 64}})
		if err != nil {
			b.Fatal(err)
		}
		f.Apply(&raft.Log{Index: uint64(i + 1), Term: 1, Type: raft.LogCommand, Data: buf})
	}
	st := f.State()
	for _, sameOK := range []bool{false, true} {
		name := "list-each-time"
		if sameOK {
			name = "same-list"
		}
		b.Run(name, func(b *testing.B) {
			s := &Server{liveness: newLiveness(time.Minute, time.Minute)}
			t0 := time.Unix(1000, 0)
			s.board.reset(t0)
			held := make([]int64, nodes)
			var total int
			var answers int
			for i := 0; i < b.N; i++ {
				k := i % nodes
				now := t0.Add(time.Duration(i) * time.Second / nodes) // each node once a second
				id := fmt.Sprintf("n%04d", k)
				s.heartbeatSeen(id, 1, now, &wrpc.NodeLoad{QueueCapacity: 10, Used: scheduler.Resources{MemoryMB: int64(k % 7 * 1024), Vcores: int64(k % 7)}})
				var r wrpc.HeartbeatResponse
				s.opportunisticView(st, now, id, held[k], sameOK, 0, &r)
				if r.LeastLoadedAt != 0 {
					held[k] = r.LeastLoadedAt
				}
				buf, err := fsm.Encode(0, &r)
				if err != nil {
					b.Fatal(err)
				}
				total += len(buf) - 1
				answers++
			}
			b.ReportMetric(float64(total)/float64(answers), "bytes/answer")
		})
	}
}
