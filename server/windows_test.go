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

// The leader deals its list out in windows: the agents that run AMs each
// get nodes no other agent gets, by their demand; the others share what is
// left over one entry each; every answer says how many nodes the whole
// list had; and a node running an AM is listed with its AM's resources
// taken off its capacity.
func TestWindowsAreDealtToTheAgentsThatRunAMs(t *testing.T) {
	f := fsm.New(nil)
	var index uint64
	apply := func(typ fsm.MessageType, req any) any {
		t.Helper()
		buf, err := fsm.Encode(typ, req)
		if err != nil {
			t.Fatal(err)
		}
		index++
		res := f.Apply(&raft.Log{Index: index, Term: 1, Type: raft.LogCommand, Data: buf})
		if err, ok := res.(error); ok {
			t.Fatalf("command %d: %v", typ, err)
		}
		return res
	}
	now := time.Unix(1000, 0)
	capacity := scheduler.Resources{MemoryMB: 8192, Vcores: 4}
	const nodes = 12
	for i := 0; i < nodes; i++ {
		apply(fsm.NodeRegisterType, &fsm.NodeRegisterRequest{ID: fmt.Sprintf("n%02d", i), Address: fmt.Sprintf("n%02d:8049", i), Capacity: capacity})
	}
	am := scheduler.Resources{MemoryMB: 1024, Vcores: 1}
	for _, node := range []string{"n00", "n01"} {
		app := apply(fsm.AppSubmitType, &fsm.AppSubmitRequest{Spec: scheduler.AppSpec{User: "u", AMResources: am,
			DShell: scheduler.DShell{NumContainers: 1, Command: []string{"true"}, Resources: am}}, Now: now.UnixNano()}).(string)
		res := apply(fsm.PlanApplyType, &fsm.PlanApplyRequest{Placements: []scheduler.Placement{{
			AppID: app, Attempt: 1, NodeID: node, Resources: am, IsAM: true}}, Now: now.UnixNano()}).(*fsm.PlanResult)
		if res.IDs[0] == "" {
			t.Fatalf("AM on %s refused: %v", node, res.Refused)
		}
	}
	st := f.State()
	s := &Server{liveness: newLiveness(time.Minute, time.Minute)}
	s.board.reset(now)
	for i := 0; i < nodes; i++ {
		load := wrpc.NodeLoad{QueueCapacity: 2}
		switch i {
		case 0:
			load.Used, load.OpportunisticDemand = am, 20 // wants 20 containers: 20 / 3 places a node → 7 nodes
		case 1:
			load.Used = am // wants nothing now: nodes_used of them
		}
		s.heartbeatSeen(fmt.Sprintf("n%02d", i), 1, now, &load)
	}
	cfg := st.QueueConfig()
	cfg.Scheduler.Opportunistic.NodesUsed = 3
	apply(fsm.QueueConfigApplyType, &fsm.QueueConfigApplyRequest{Config: cfg})
	st = f.State()

	answers := map[string]*wrpc.HeartbeatResponse{}
	for i := 0; i < nodes; i++ {
		id := fmt.Sprintf("n%02d", i)
		r := &wrpc.HeartbeatResponse{}
		s.opportunisticView(st, now, id, 0, true, 0, r)
		answers[id] = r
		if r.LeastLoadedCandidates != nodes {
			t.Fatalf("%s: candidates %d, want %d", id, r.LeastLoadedCandidates, nodes)
		}
	}
	w0, w1 := answers["n00"].LeastLoaded, answers["n01"].LeastLoaded
	if len(w0) != 7 || len(w1) != 3 {
		t.Fatalf("windows of %d and %d nodes, want 7 (demand 20) and 3 (nodes_used)", len(w0), len(w1))
	}
	held := map[string]string{}
	for agent, w := range map[string][]scheduler.LeastLoadedNode{"n00": w0, "n01": w1} {
		for _, e := range w {
			if other, dup := held[e.NodeID]; dup {
				t.Fatalf("node %s is in the windows of %s and %s", e.NodeID, other, agent)
			}
			held[e.NodeID] = agent
			if (e.NodeID == "n00" || e.NodeID == "n01") && e.Capacity.Vcores != 3 {
				t.Fatalf("entry %+v: its AM's vcore must be off its capacity", e)
			}
		}
	}
	for i := 2; i < nodes; i++ {
		w := answers[fmt.Sprintf("n%02d", i)].LeastLoaded
		if len(w) != 1 || held[w[0].NodeID] != "" {
			t.Fatalf("n%02d runs no AM: got %v, want one entry no AM's agent holds", i, w)
		}
	}

	// n01 reports demand its window could not place: in the answer to that
	// heartbeat its window grows by one of the two left-over nodes (one
	// more container, which its free room holds), under a stamp of its
	// own, queue places and all; the same report heard again, before the
	// agent installed the grown window, grows nothing.
	at := answers["n01"].LeastLoadedAt
	grown := &wrpc.HeartbeatResponse{}
	s.opportunisticView(st, now.Add(100*time.Millisecond), "n01", at, true, 1, grown)
	if len(grown.LeastLoaded) != 4 || grown.LeastLoadedAt == at || grown.LeastLoadedAt == 0 {
		t.Fatalf("grown window %d nodes at %d (held %d): want 4 under a new stamp", len(grown.LeastLoaded), grown.LeastLoadedAt, at)
	}
	for _, e := range grown.LeastLoaded[3:] {
		if held[e.NodeID] != "" || e.QueueSpace == 0 {
			t.Fatalf("grown entry %+v: want a node no window held, with its queue places", e)
		}
	}
	again := &wrpc.HeartbeatResponse{}
	s.opportunisticView(st, now.Add(200*time.Millisecond), "n01", at, true, 1, again)
	if again.LeastLoadedAt != grown.LeastLoadedAt || len(again.LeastLoaded) != 4 {
		t.Fatalf("the same demand again: %+v, want the grown window again, no larger", again)
	}
	// An agent dealt no window (its AM started since the computation)
	// grows one from nothing: the last left-over node, not the entry it
	// shares with the other agents.
	fresh := &wrpc.HeartbeatResponse{}
	s.opportunisticView(st, now.Add(250*time.Millisecond), "n05", answers["n05"].LeastLoadedAt, true, 1, fresh)
	if len(fresh.LeastLoaded) != 1 || held[fresh.LeastLoaded[0].NodeID] != "" || fresh.LeastLoaded[0].QueueSpace == 0 ||
		fresh.LeastLoaded[0].NodeID == grown.LeastLoaded[3].NodeID {
		t.Fatalf("n05's window grown from nothing: %v", fresh.LeastLoaded)
	}
	// Nothing is left to grow n00's window with.
	none := &wrpc.HeartbeatResponse{}
	s.opportunisticView(st, now.Add(300*time.Millisecond), "n00", answers["n00"].LeastLoadedAt, true, 50, none)
	if none.LeastLoadedAt != answers["n00"].LeastLoadedAt || none.LeastLoaded != nil {
		t.Fatalf("n00 with demand and no pool left: %+v, want its window as held", none)
	}
	// The next computation keeps the grown nodes with n01, which still
	// has demand.
	load := wrpc.NodeLoad{QueueCapacity: 2, Used: am, OpportunisticDemand: 1}
	s.heartbeatSeen("n01", 1, now.Add(2*time.Second), &load)
	next := &wrpc.HeartbeatResponse{}
	s.opportunisticView(st, now.Add(2*time.Second), "n01", grown.LeastLoadedAt, true, 1, next)
	kept := map[string]bool{}
	for _, e := range next.LeastLoaded {
		kept[e.NodeID] = true
	}
	for _, e := range grown.LeastLoaded {
		if !kept[e.NodeID] {
			t.Fatalf("the next computation took %s from n01's grown window %v: got %v", e.NodeID, grown.LeastLoaded, next.LeastLoaded)
		}
	}
}
