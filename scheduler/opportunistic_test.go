package scheduler

import (
	"fmt"
	"testing"
)

func load(id string, queued, queueCap int, freeMem, freeVcores int64) NodeLoad {
	capacity := Resources{MemoryMB: 8192, Vcores: 8}
	return NodeLoad{NodeID: id, Rack: "/r" + id[len(id)-1:], Capacity: capacity, QueueCapacity: queueCap, Queued: queued,
		Used: capacity.Sub(Resources{MemoryMB: freeMem, Vcores: freeVcores})}
}

func ids(ns []LeastLoadedNode) string {
	s := ""
	for _, n := range ns {
		s += n.NodeID + " "
	}
	return s
}

func TestLeastLoadedSortsByQueueThenFreeResources(t *testing.T) {
	loads := []NodeLoad{
		load("n1", 3, 10, 8192, 8), // most free, but a longer queue
		load("n2", 0, 10, 1024, 1),
		load("n3", 0, 10, 4096, 4),
		load("n4", 10, 10, 8192, 8), // full queue: left out
		load("n5", 1, 10, 0, 0),
	}
	got := LeastLoaded(loads, 10)
	if ids(got) != "n3 n2 n5 n1 " {
		t.Fatalf("order %q, want n3 n2 n5 n1 (queue length, then free, full queue out)", ids(got))
	}
	if got[0].Slots != 10 || got[3].Slots != 7 {
		t.Fatalf("slots %+v", got)
	}
	if ids(LeastLoaded(loads, 2)) != "n3 n2 " {
		t.Fatalf("nodes_used not honoured")
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
		{nil, 1, 5, 15, 15},
	}
	for _, c := range cases {
		if got := QueueLimit(c.queued, c.k, c.min, c.max); got != c.want {
			t.Errorf("QueueLimit(%v, k=%v) = %d, want %d", c.queued, c.k, got, c.want)
		}
	}
}

func list(n int) []LeastLoadedNode {
	var out []LeastLoadedNode
	for i := 1; i <= n; i++ {
		out = append(out, LeastLoadedNode{NodeID: fmt.Sprintf("n%d", i), Rack: fmt.Sprintf("/r%d", (i+1)/2), Slots: 2})
	}
	return out // racks: n1,n2 → /r1; n3,n4 → /r2; …
}

func slotsOf(l []LeastLoadedNode) map[string]int {
	m := map[string]int{}
	for _, n := range l {
		m[n.NodeID] = n.Slots
	}
	return m
}

func TestAllocateOpportunisticRoundRobinsWithinCapacity(t *testing.T) {
	l := list(3)
	got := AllocateOpportunistic(Ask{Count: 10}, l, slotsOf(l), 1)
	// Round-robin from n2; two slots each: six containers, no more.
	if ids(got) != "n2 n3 n1 n2 n3 n1 " {
		t.Fatalf("placed on %q", ids(got))
	}
}

func TestAllocateOpportunisticPrefersLocality(t *testing.T) {
	l := list(6)
	ask := Ask{Count: 5, Locality: Locality{Nodes: []string{"n3"}, Relax: true}}
	got := AllocateOpportunistic(ask, l, slotsOf(l), 0)
	// n3 (node-local) ×2, then its rack-mate n4 ×2, then the rest.
	if ids(got)[:12] != "n3 n3 n4 n4 " || len(got) != 5 {
		t.Fatalf("placed on %q", ids(got))
	}
	strict := Ask{Count: 5, Locality: Locality{Nodes: []string{"n3"}}}
	if got := AllocateOpportunistic(strict, l, slotsOf(l), 0); ids(got) != "n3 n3 " {
		t.Fatalf("strict locality placed on %q, want only n3", ids(got))
	}
	strictRack := Ask{Count: 5, Locality: Locality{Racks: []string{"/r2"}}}
	if got := AllocateOpportunistic(strictRack, l, slotsOf(l), 0); ids(got) != "n3 n4 n3 n4 " {
		t.Fatalf("strict rack placed on %q, want n3 and n4 of /r2", ids(got))
	}
	if got := AllocateOpportunistic(Ask{Count: 1}, nil, nil, 0); got != nil {
		t.Fatalf("allocated from an empty list")
	}
}
