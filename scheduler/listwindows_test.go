package scheduler

import (
	"fmt"
	"testing"
	"time"
)

func rankedList(n int) []LeastLoadedNode {
	out := make([]LeastLoadedNode, n)
	for i := range out {
		out[i] = LeastLoadedNode{NodeID: fmt.Sprintf("n%02d", i), Capacity: Resources{MemoryMB: 8192, Vcores: 4},
			Free: Resources{MemoryMB: 4096, Vcores: 4}, QueueSpace: 2}
	}
	return out
}

// No node is in two windows: each place is handed out by one proxy.
func TestWindowsAreDisjoint(t *testing.T) {
	list := rankedList(30)
	holders := []ListHolder{{NodeID: "a"}, {NodeID: "b", Demand: 12}, {NodeID: "c", Demand: 300}, {NodeID: "d", Demand: 1}}
	wins := DealWindows(list, holders, nil, 5)
	seen := map[int]string{}
	for i, w := range wins {
		for _, p := range w {
			if other, dup := seen[p]; dup {
				t.Fatalf("entry %d is in the windows of %s and %s", p, other, holders[i].NodeID)
			}
			seen[p] = holders[i].NodeID
		}
	}
	// Three places an entry: c wants 100 entries, more than the list has
	// left once b (4) and d (1) have theirs; a wants none beyond nodes_used.
	if len(wins[1]) != 4 || len(wins[3]) != 1 {
		t.Fatalf("b got %d entries (want 4 for 12 containers), d %d (want 1)", len(wins[1]), len(wins[3]))
	}
	if len(wins[2]) != 25 || len(wins[0]) != 0 {
		t.Fatalf("c got %d entries (want the 25 left), a %d (want none: nothing left)", len(wins[2]), len(wins[0]))
	}
	if len(Leftover(list, wins)) != 0 {
		t.Fatalf("left over %v, want none", Leftover(list, wins))
	}
}

// The best entries go round-robin to the holders with the most demand
// first, and a holder keeps the nodes it held before.
func TestWindowsDealBestFirstAndKeepWhatWasHeld(t *testing.T) {
	list := rankedList(10)
	holders := []ListHolder{{NodeID: "a", Demand: 3}, {NodeID: "b", Demand: 3}}
	wins := DealWindows(list, holders, nil, 2)
	if fmt.Sprint(wins) != "[[0 2] [1 3]]" {
		t.Fatalf("windows %v, want [[0 2] [1 3]]: one entry each in turn, then nodes_used each", wins)
	}
	wins = DealWindows(list, holders, map[string]string{"n09": "b", "n08": "a"}, 2)
	if fmt.Sprint(wins) != "[[0 8] [1 9]]" {
		t.Fatalf("windows %v, want [[0 8] [1 9]]: each keeps the node it held, then the best", wins)
	}
	if got := Leftover(list, wins); fmt.Sprint(got) != "[2 3 4 5 6 7]" {
		t.Fatalf("left over %v", got)
	}
}

// An agent whose AM has just started comes first, with nodes_used entries:
// its AM asks before its demand is reported. It takes the nodes no one
// held; an idle holder keeps its own up to its fair share (what it placed
// there may be on its way), and gives up the rest.
func TestWindowsServeANewHolderFirst(t *testing.T) {
	list := rankedList(4)
	wins := DealWindows(list, []ListHolder{{NodeID: "idle"}, {NodeID: "fresh", New: true}},
		map[string]string{"n00": "idle", "n01": "idle", "n02": "idle"}, 10)
	if fmt.Sprint(wins) != "[[0 1] [2 3]]" {
		t.Fatalf("windows %v, want the idle holder to keep two of its three (half the list) and the fresh agent the rest", wins)
	}
}

// A node's AM containers are taken off what the list says fits there: a
// four-vcore container never goes to a four-vcore node that runs an AM.
func TestRankNodesTakesAMsOffCapacity(t *testing.T) {
	loads := []NodeLoad{
		{NodeID: "am", Capacity: Resources{MemoryMB: 8192, Vcores: 4}, Used: Resources{MemoryMB: 1024, Vcores: 1},
			Pinned: Resources{MemoryMB: 1024, Vcores: 1}, QueueCapacity: 2},
		{NodeID: "busy", Capacity: Resources{MemoryMB: 8192, Vcores: 4}, Used: Resources{MemoryMB: 4096, Vcores: 4}, Queued: 1, QueueCapacity: 2},
	}
	list := RankNodes(loads, 10, LoadQueueLength)
	room := NewRoom(list)
	pos, _ := AllocateOpportunistic(Ask{Count: 4, Resources: Resources{MemoryMB: 4096, Vcores: 4}}, list, room, nil, 0, nil)
	for _, p := range pos {
		if list[p].NodeID == "am" {
			t.Fatalf("a four-vcore container went to the node whose AM holds a vcore: %v", pos)
		}
	}
	if len(pos) != 1 {
		t.Fatalf("placed %d, want 1 (busy's one queue place)", len(pos))
	}
	byWait := RankNodes([]NodeLoad{
		{NodeID: "short", Queued: 2, QueueCapacity: 5, Wait: 1, Capacity: Resources{MemoryMB: 1, Vcores: 1}, Used: Resources{MemoryMB: 1, Vcores: 1}},
		{NodeID: "long", Queued: 1, QueueCapacity: 5, Wait: 9, Capacity: Resources{MemoryMB: 1, Vcores: 1}, Used: Resources{MemoryMB: 1, Vcores: 1}},
	}, 10, LoadQueueWaitTime)
	if byWait[0].NodeID != "short" {
		t.Fatalf("queue_wait_time ranks %v first, want the shorter wait", byWait[0].NodeID)
	}
}

// A node that turned a container away gets nothing more from the room
// until the next list; an empty window is not an empty cluster.
func TestTurnedAwayAndReachable(t *testing.T) {
	testNow := time.Unix(1000, 0)
	d := NewDistributedRoom(0)
	list := rankedList(2)
	d.Update(ListNews{At: 1, List: list, Candidates: 50}, 0, testNow, 0)
	d.TurnedAway("n00")
	got := d.Allocate(Ask{Count: 10, Resources: Resources{MemoryMB: 1024, Vcores: 1}}, nil, testNow)
	for _, n := range got {
		if n.NodeID == "n00" {
			t.Fatalf("allocated on the node that turned a container away")
		}
	}
	if len(got) == 0 {
		t.Fatalf("nothing allocated on n01")
	}
	d.Update(ListNews{At: 2, List: []LeastLoadedNode{}, Candidates: 50}, 1, testNow, 0)
	if d.Reachable(nil) != 50 {
		t.Fatalf("an empty window reaches %d nodes, want the list's 50", d.Reachable(nil))
	}
	d.Update(ListNews{At: 3, List: []LeastLoadedNode{}, Candidates: 0}, 2, testNow, 0)
	if d.Reachable(nil) != 0 {
		t.Fatalf("an empty list reaches %d nodes, want 0", d.Reachable(nil))
	}
}

// A node that overcommits is listed with the room its measured use leaves:
// a four-vcore container may go to a four-vcore node whose AM holds a vcore
// it does not use.
func TestRankNodesCountsOvercommitRoom(t *testing.T) {
	capacity := Resources{MemoryMB: 8192, Vcores: 4}
	am := Resources{MemoryMB: 1024, Vcores: 1}
	loads := []NodeLoad{{NodeID: "am", Capacity: capacity, Used: am, Pinned: am, QueueCapacity: 2,
		Measured: Resources{MemoryMB: 300}, UseLimit: Resources{MemoryMB: 7372, Vcores: 4}}}
	list := RankNodes(loads, 10, LoadQueueLength)
	if len(list) != 1 || list[0].Capacity.Vcores != 4 || list[0].Free.Vcores != 4 || list[0].Free.MemoryMB != 7168 {
		t.Fatalf("entry %+v: want capacity 4 vcores (the use limit), free 4 vcores (none measured) and 7,168 MB (allocation: more than the limit leaves)", list)
	}
	loads[0].UseLimit = Resources{}
	if list := RankNodes(loads, 10, LoadQueueLength); list[0].Capacity.Vcores != 3 || list[0].Free.Vcores != 3 {
		t.Fatalf("without overcommit %+v: want 3 vcores, the AM's off", list)
	}
}

// A container starts at once on a node with free room before any waits in
// a queue: the round goes over every node's free room first.
func TestAllocateFillsFreeRoomBeforeQueues(t *testing.T) {
	l := rankedList(2)
	l[0].Free = Resources{} // n00: only queue places
	room := NewRoom(l)
	pos, _ := AllocateOpportunistic(Ask{Count: 2, Resources: Resources{MemoryMB: 1024, Vcores: 2}}, l, room, nil, 0, nil)
	if len(pos) != 2 || l[pos[0]].NodeID != "n01" || l[pos[1]].NodeID != "n01" {
		t.Fatalf("placed on %v, want both on n01, which starts them at once", pos)
	}
}

// A new holder is dealt nodes no proxy held before first: containers may
// be on their way to those, which only the proxy that placed them counts.
func TestWindowsGiveANewHolderUnheldNodesFirst(t *testing.T) {
	list := rankedList(4)
	wins := DealWindows(list, []ListHolder{{NodeID: "fresh", New: true}}, map[string]string{"n00": "gone", "n01": "gone"}, 2)
	if fmt.Sprint(wins) != "[[2 3]]" {
		t.Fatalf("windows %v, want [[2 3]]: the nodes no one held", wins)
	}
}
