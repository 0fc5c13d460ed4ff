package server

import (
	"testing"
	"time"

	"github.com/hashicorp/raft"
	"github.com/weft-sched/weft/fsm"
	wrpc "github.com/weft-sched/weft/rpc"
	"github.com/weft-sched/weft/scheduler"
)

// The least-loaded list goes out with how many AMRMProxies share it (the
// nodes running an AM) and which of them the node's is; a node running
// no AM has no slot.
func TestListGoesOutWithEachProxysShare(t *testing.T) {
	f := fsm.New(nil)
	var index uint64
	apply := func(typ fsm.MessageType, body any) any {
		index++
		buf, err := fsm.Encode(typ, body)
		if err != nil {
			t.Fatal(err)
		}
		res := f.Apply(&raft.Log{Index: index, Term: 1, Type: raft.LogCommand, Data: buf})
		if err, ok := res.(error); ok {
			t.Fatalf("command %d: %v", typ, err)
		}
		return res
	}
	apply(fsm.QueueConfigApplyType, &fsm.QueueConfigApplyRequest{Config: scheduler.DefaultQueueConfig()})
	for _, id := range []string{"n1", "n2", "n3"} {
		apply(fsm.NodeRegisterType, &fsm.NodeRegisterRequest{ID: id, Address: id + ":1", Capacity: scheduler.Resources{MemoryMB: 8192, Vcores: 8}})
	}
	for _, node := range []string{"n3", "n1"} {
		appID := apply(fsm.AppSubmitType, &fsm.AppSubmitRequest{Spec: testSpec("app-on-" + node)}).(string)
		app, _ := f.State().App(appID)
		apply(fsm.PlanApplyType, &fsm.PlanApplyRequest{Placements: []scheduler.Placement{
			{AppID: appID, Attempt: 1, NodeID: node, Resources: app.Spec.AMResources, IsAM: true}}})
	}
	st := f.State()
	s := &Server{liveness: newLiveness(time.Minute, time.Minute)}
	t0 := time.Unix(1000, 0)
	s.board.reset(t0)
	for _, id := range []string{"n1", "n2", "n3"} {
		s.heartbeatSeen(id, 1, t0, &wrpc.NodeLoad{QueueCapacity: 10})
	}
	want := map[string]int{"n1": 1, "n2": 0, "n3": 2}
	for id, slot := range want {
		var r wrpc.HeartbeatResponse
		s.opportunisticView(st, t0, id, 0, true, &r)
		if len(r.LeastLoaded) != 3 || r.LeastLoadedSharers != 2 || r.LeastLoadedSlot != slot {
			t.Fatalf("%s: %d nodes listed, shared by %d, slot %d; want 3 nodes, 2 sharers, slot %d",
				id, len(r.LeastLoaded), r.LeastLoadedSharers, r.LeastLoadedSlot, slot)
		}
	}
}
