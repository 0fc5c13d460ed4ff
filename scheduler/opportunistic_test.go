package scheduler

import (
	"fmt"
	"reflect"
	"strings"
	"testing"
	"time"
)

func load(id string, queued, queueCap int, freeMem, freeVcores int64) NodeLoad {
	capacity := Resources{MemoryMB: 8192, Vcores: 8}
	return NodeLoad{NodeID: id, Rack: "/r" + id[len(id)-1:], Capacity: capacity, QueueCapacity: queueCap, Queued: queued,
		Used: capacity.Sub(Resources{MemoryMB: freeMem, Vcores: freeVcores})}
}

func ids(list []LeastLoadedNode) string {
	var s []string
	for _, n := range list {
		s = append(s, n.NodeID)
	}
	return strings.Join(s, " ")
}

func at(list []LeastLoadedNode, pos []int) string {
	var s []string
	for _, p := range pos {
		s = append(s, list[p].NodeID)
	}
	return strings.Join(s, " ")
}

func TestLeastLoadedSortsByQueueThenFreeResources(t *testing.T) {
	loads := []NodeLoad{
		load("n1", 3, 10, 8192, 8), // most free, but a longer queue
		load("n2", 0, 10, 1024, 1),
		load("n3", 0, 10, 4096, 4),
		load("n4", 10, 10, 8192, 8), // full queue: left out
		load("n5", 1, 10, 0, 0),
		load("n6", 0, 0, 0, 0),    // queues nothing and has no room: left out
		load("n7", 0, 0, 2048, 2), // queues nothing but has room: kept
		load("n8", 0, 0, 4096, 0), // queues nothing; memory but no vcore: left out
	}
	got := LeastLoaded(loads, 10)
	if ids(got) != "n3 n7 n2 n5 n1" {
		t.Fatalf("order %q, want n3 n7 n2 n5 n1 (queue length, then normalised free; full queues out)", ids(got))
	}
	if n := got[0]; n.QueueSpace != 10 || n.Free.Vcores != 4 || n.Free.MemoryMB != 4096 || n.Capacity.Vcores != 8 {
		t.Fatalf("n3's room %+v, want 8 vcores, 4 of them and 4096 MB free, and 10 queue places", n)
	}
	if got[4].QueueSpace != 7 || got[1].QueueSpace != 0 {
		t.Fatalf("queue space %+v", got)
	}
	if ids(LeastLoaded(loads, 2)) != "n3 n7" {
		t.Fatalf("nodes_used not honoured: %q", ids(LeastLoaded(loads, 2)))
	}
}

func TestLeastLoadedNormalisesFreeResourcesToTheCluster(t *testing.T) {
	// A node with much memory and few vcores against one with the reverse:
	// each resource counts as its fraction of the cluster's total.
	capacity := Resources{MemoryMB: 100000, Vcores: 10}
	loads := []NodeLoad{
		{NodeID: "mem", Capacity: capacity, Used: Resources{MemoryMB: 10000, Vcores: 9}, QueueCapacity: 10}, // 90% mem, 10% vcores free
		{NodeID: "cpu", Capacity: capacity, Used: Resources{MemoryMB: 80000, Vcores: 0}, QueueCapacity: 10}, // 20% mem, 100% vcores free
	}
	if got := ids(LeastLoaded(loads, 10)); got != "cpu mem" {
		t.Fatalf("order %q: 0.1+0.5 of the cluster free beats 0.45+0.05", got)
	}
}

func TestQueueLimit(t *testing.T) {
	cases := []struct {
		queued   []int
		k        float64
		min, max int
		want     int
	}{
		{[]int{10, 10, 10, 10}, 1, 5, 15, 10},         // no spread: the mean
		{[]int{0, 0, 10, 10}, 1, 5, 15, 10},           // mean 5 + stdev 5
		{[]int{0, 0, 20, 20}, 1, 5, 15, 15},           // 10 + 10 = 20, clamped to 15
		{[]int{0, 0, 0, 4}, 1, 5, 15, 5},              // 1 + 1.73 = 2, clamped up to 5
		{[]int{2, 4, 4, 4, 5, 5, 7, 9}, 2, 0, 100, 9}, // mean 5, stdev 2: 5 + 2·2
		{[]int{30, 10, 10}, 1, 5, 30, 26},             // 16.7 + 9.4 = 26.1
		{[]int{10, 0, 0}, 0, 0, 15, 3},                // k = 0: the mean, floored
		{nil, 1, 5, 15, 15},                           // nothing known: no shedding
	}
	for _, c := range cases {
		if got := QueueLimit(c.queued, c.k, c.min, c.max); got != c.want {
			t.Errorf("QueueLimit(%v, k=%v, [%d,%d]) = %d, want %d", c.queued, c.k, c.min, c.max, got, c.want)
		}
	}
}

// list returns n nodes of 4 vcores with two free and two queue places each,
// two nodes per rack: n1,n2 on /r1; n3,n4 on /r2; …
func list(n int) []LeastLoadedNode {
	var out []LeastLoadedNode
	for i := 1; i <= n; i++ {
		out = append(out, LeastLoadedNode{NodeID: fmt.Sprintf("n%d", i), Rack: fmt.Sprintf("/r%d", (i+1)/2),
			Capacity: Resources{MemoryMB: 4096, Vcores: 4}, Free: Resources{MemoryMB: 2048, Vcores: 2}, QueueSpace: 2})
	}
	return out
}

var oneCore = Resources{MemoryMB: 512, Vcores: 1}

func TestAllocateOpportunisticRoundRobinsWithinRoom(t *testing.T) {
	l := list(3)
	room := NewRoom(l)
	got, _ := AllocateOpportunistic(Ask{Count: 20, Resources: oneCore}, l, room, nil, 1, nil)
	// From n2, one per node per round; each node takes two that start at
	// once and two that queue: twelve in all, no more.
	if at(l, got) != "n2 n3 n1 n2 n3 n1 n2 n3 n1 n2 n3 n1" {
		t.Fatalf("placed on %q", at(l, got))
	}
	if got, next := AllocateOpportunistic(Ask{Count: 1, Resources: oneCore}, l, room, nil, 7, nil); len(got) != 0 || next != 7 {
		t.Fatalf("allocated %q past every node's room (next cursor %d, want 7, unchanged)", at(l, got), next)
	}
}

// Consecutive asks spread over the nodes of a tier: the cursor moves past
// the node just used, not by the number of containers placed.
func TestAllocateOpportunisticCursorMovesPastTheNodeUsed(t *testing.T) {
	t.Run("any tier", func(t *testing.T) {
		l := list(3)
		l[0].Free, l[0].QueueSpace = Resources{}, 0 // n1 has no room
		room := NewRoom(l)
		var placed []string
		cursor := 0
		for i := 0; i < 2; i++ {
			var pos []int
			pos, cursor = AllocateOpportunistic(Ask{Count: 1, Resources: oneCore}, l, room, nil, cursor, nil)
			placed = append(placed, at(l, pos))
		}
		if got := strings.Join(placed, " "); got != "n2 n3" || cursor != 3 {
			t.Fatalf("two one-container asks placed on %q (cursor %d), want n2 n3 (cursor 3)", got, cursor)
		}
	})
	t.Run("rack tier", func(t *testing.T) {
		// Asks for rack /r2 (n3, n4), relaxed: each lands in the rack,
		// alternating between its two nodes.
		l := list(6)
		room := NewRoom(l)
		ask := Ask{Count: 1, Resources: oneCore, Locality: Locality{Racks: []string{"/r2"}, Relax: true}}
		var placed []string
		cursor := 0
		for i := 0; i < 4; i++ {
			var pos []int
			pos, cursor = AllocateOpportunistic(ask, l, room, nil, cursor, nil)
			placed = append(placed, at(l, pos))
		}
		if got := strings.Join(placed, " "); got != "n3 n4 n3 n4" {
			t.Fatalf("rack-local asks placed on %q, want n3 n4 n3 n4", got)
		}
	})
	t.Run("several containers", func(t *testing.T) {
		l := list(4)
		pos, next := AllocateOpportunistic(Ask{Count: 3, Resources: oneCore}, l, NewRoom(l), nil, 2, nil)
		if at(l, pos) != "n3 n4 n1" || next != 1 {
			t.Fatalf("placed on %q with next cursor %d, want n3 n4 n1 and 1", at(l, pos), next)
		}
	})
}

func TestAllocateOpportunisticNeverQueuesWhatCannotRun(t *testing.T) {
	l := list(2)
	l[1].Capacity = Resources{MemoryMB: 16384, Vcores: 16}
	// 8 GB fits no free resources, and only n2's capacity: it queues on
	// n2 alone; on n1 it would wait at the head of the queue forever.
	got, _ := AllocateOpportunistic(Ask{Count: 4, Resources: Resources{MemoryMB: 8192, Vcores: 1}}, l, NewRoom(l), nil, 0, nil)
	if at(l, got) != "n2 n2" {
		t.Fatalf("placed on %q, want n2's two queue places only", at(l, got))
	}
}

func TestAllocateOpportunisticRoomIsSharedAcrossAsks(t *testing.T) {
	l := list(2)
	room := NewRoom(l)
	big := Resources{MemoryMB: 2048, Vcores: 2}
	// A container as large as a node's free resources starts there; the
	// next one queues, so a smaller ask afterwards finds only queue places.
	first, _ := AllocateOpportunistic(Ask{Count: 2, Resources: big}, l, room, nil, 0, nil)
	if at(l, first) != "n1 n2" {
		t.Fatalf("big containers on %q", at(l, first))
	}
	second, _ := AllocateOpportunistic(Ask{Count: 10, Resources: oneCore}, l, room, nil, 0, nil)
	if at(l, second) != "n1 n2 n1 n2" {
		t.Fatalf("small containers on %q, want the four queue places", at(l, second))
	}
}

func TestAllocateOpportunisticPrefersLocality(t *testing.T) {
	l := list(6)
	ask := Ask{Count: 9, Resources: oneCore, Locality: Locality{Nodes: []string{"n3"}, Relax: true}}
	got, _ := AllocateOpportunistic(ask, l, NewRoom(l), nil, 0, nil)
	// n3 until full (4), then its rack-mate n4 (4), then the rest.
	if s := at(l, got); !strings.HasPrefix(s, "n3 n3 n3 n3 n4 n4 n4 n4 ") || len(got) != 9 {
		t.Fatalf("placed on %q", s)
	}
	strict := Ask{Count: 9, Resources: oneCore, Locality: Locality{Nodes: []string{"n3"}}}
	if got, _ := AllocateOpportunistic(strict, l, NewRoom(l), nil, 0, nil); at(l, got) != "n3 n3 n3 n3" {
		t.Fatalf("strict node locality placed on %q, want only n3", at(l, got))
	}
	strictRack := Ask{Count: 3, Resources: oneCore, Locality: Locality{Racks: []string{"/r2"}}}
	if got, _ := AllocateOpportunistic(strictRack, l, NewRoom(l), nil, 0, nil); at(l, got) != "n3 n4 n3" {
		t.Fatalf("strict rack placed on %q, want n3 and n4 of /r2", at(l, got))
	}
	elsewhere := Ask{Count: 2, Resources: oneCore, Locality: Locality{Nodes: []string{"n99"}, Relax: true}}
	if got, _ := AllocateOpportunistic(elsewhere, l, NewRoom(l), nil, 4, nil); at(l, got) != "n5 n6" {
		t.Fatalf("relaxed ask for an unlisted node placed on %q, want any node from the start", at(l, got))
	}
	if got, _ := AllocateOpportunistic(Ask{Count: 1, Resources: oneCore}, nil, NewRoom(nil), nil, 0, nil); len(got) != 0 {
		t.Fatalf("allocated from an empty list")
	}
}

func TestAllocateOpportunisticDoesNotAllocate(t *testing.T) {
	l := list(10)
	for i := range l {
		l[i].QueueSpace = 1 << 30
	}
	room := NewRoom(l)
	out := make([]int, 0, 16)
	ask := Ask{Count: 4, Resources: oneCore, Locality: Locality{Nodes: []string{"n3"}, Relax: true}}
	if n := testing.AllocsPerRun(100, func() {
		out, _ = AllocateOpportunistic(ask, l, room, nil, 3, out[:0])
	}); n != 0 {
		t.Fatalf("%v allocations per call of the allocation rule", n)
	}
}

func TestEstimateQueueWait(t *testing.T) {
	cases := []struct {
		queued, running int
		mean            time.Duration
		want            time.Duration
	}{
		{0, 4, time.Second, 0},
		{4, 4, time.Second, time.Second},     // one wave
		{5, 4, time.Second, 2 * time.Second}, // two waves
		{3, 0, time.Second, 3 * time.Second}, // nothing running: one at a time
		{10, 2, 0, 0},                        // no history yet
		{9, 3, 500 * time.Millisecond, 1500 * time.Millisecond},
	}
	for _, c := range cases {
		if got := EstimateQueueWait(c.queued, c.running, c.mean); got != c.want {
			t.Errorf("EstimateQueueWait(%d, %d, %s) = %s, want %s", c.queued, c.running, c.mean, got, c.want)
		}
	}
}

func TestAskValidateNamesTheField(t *testing.T) {
	cases := []struct {
		ask  Ask
		want string
	}{
		{Ask{AskID: 0, Count: 1, Resources: oneCore, ExecutionType: Opportunistic}, "ask_id 0 is reserved"},
		{Ask{AskID: 1, Count: -1, Resources: oneCore, ExecutionType: Opportunistic}, "count must not be negative"},
		{Ask{AskID: 1, Count: 1, Resources: oneCore, ExecutionType: "SOMETIMES"}, "execution_type must be GUARANTEED or OPPORTUNISTIC"},
		{Ask{AskID: 1, Count: 1, Resources: Resources{MemoryMB: -512, Vcores: 1}, ExecutionType: Opportunistic}, "memory_mb must not be negative"},
		{Ask{AskID: 1, Count: 1, Resources: Resources{MemoryMB: 512}, ExecutionType: Opportunistic}, "memory_mb and vcores must be positive"},
		{Ask{AskID: 1, Count: 1, Resources: Resources{MemoryMB: 512, Vcores: 1, Extended: map[string]int64{"GPU": 1}}, ExecutionType: Guaranteed}, "resource name"},
		{Ask{AskID: 7, Count: 3, Resources: oneCore, ExecutionType: Guaranteed}, ""},
	}
	for _, c := range cases {
		err := c.ask.Validate()
		if c.want == "" && err != nil || c.want != "" && (err == nil || !strings.Contains(err.Error(), c.want)) {
			t.Errorf("%+v: %v, want %q", c.ask, err, c.want)
		}
	}
}

func TestOpportunisticFallback(t *testing.T) {
	ask := Ask{AskID: 3, Count: 5, Resources: oneCore, ExecutionType: Opportunistic}
	enforced := ask
	enforced.EnforceExecutionType = true
	cases := []struct {
		name      string
		ask       Ask
		listKnown bool
		listLen   int
		unplaced  int
		want      int
	}{
		{"a known, empty list: every queue is full", ask, true, 0, 4, 4},
		{"enforced: it waits for opportunistic room", enforced, true, 0, 4, 0},
		{"no list yet: not a sign that no node can take it", ask, false, 0, 4, 0},
		{"nodes in the list: they will have room again", ask, true, 3, 4, 0},
		{"everything placed", ask, true, 0, 0, 0},
		{"a negative unplaced count is nothing", ask, true, 0, -2, 0},
	}
	for _, c := range cases {
		if got := OpportunisticFallback(c.ask, c.listKnown, c.listLen, c.unplaced); got != c.want {
			t.Errorf("%s: OpportunisticFallback = %d, want %d", c.name, got, c.want)
		}
	}
}

// Reset gives the room NewRoom gives, without allocating when the last
// room was as long: a proxy installs a list every sorting interval.
func TestRoomResetIsNewRoomWithoutAllocating(t *testing.T) {
	list := []LeastLoadedNode{
		{NodeID: "a", Capacity: Resources{MemoryMB: 4096, Vcores: 4}, Free: Resources{MemoryMB: 1024, Vcores: 1}, QueueSpace: 2},
		{NodeID: "b", Capacity: Resources{MemoryMB: 8192, Vcores: 8}, Free: Resources{MemoryMB: 8192, Vcores: 8}, QueueSpace: 0},
	}
	r := NewRoom(list)
	r.Take(0, Resources{MemoryMB: 1024, Vcores: 1})
	r.Take(0, Resources{MemoryMB: 1024, Vcores: 1})
	r = r.Reset(list)
	if !reflect.DeepEqual(r, NewRoom(list)) {
		t.Fatalf("reset room %+v, want %+v", r, NewRoom(list))
	}
	if n := testing.AllocsPerRun(100, func() { r = r.Reset(list) }); n != 0 {
		t.Fatalf("Reset allocated %.0f times", n)
	}
	if got := (*Room)(nil).Reset(list); !reflect.DeepEqual(got, NewRoom(list)) {
		t.Fatalf("nil room reset to %+v", got)
	}
	if got := r.Reset(list[:1]); len(got.free) != 1 || !reflect.DeepEqual(got, NewRoom(list[:1])) {
		t.Fatalf("reset to a shorter list: %+v", got)
	}
}
