package scheduler

import (
	"fmt"
	"testing"
	"time"
)

func TestListShareWindow(t *testing.T) {
	cases := []struct {
		name  string
		n     int
		share ListShare
		spin  uint64
		want  Window
	}{
		{"no share: the whole list from the spin", 20, ListShare{}, 27, Window{Start: 7, Own: 20, Len: 20}},
		{"alone", 20, ListShare{Of: 1, Slot: 1}, 3, Window{Start: 3, Own: 20, Len: 20}},
		{"1 of 4: owns a quarter, uses half", 20, ListShare{Of: 4, Slot: 1}, 3, Window{Start: 0, Own: 5, Len: 10}},
		{"4 of 4", 20, ListShare{Of: 4, Slot: 4}, 3, Window{Start: 15, Own: 5, Len: 10}},
		{"2 of 2: owns half, may use all", 20, ListShare{Of: 2, Slot: 2}, 3, Window{Start: 10, Own: 10, Len: 20}},
		{"uneven slices: 3 of 3 on 10", 10, ListShare{Of: 3, Slot: 3}, 0, Window{Start: 6, Own: 4, Len: 6}},
		{"more proxies than entries: one entry each, owned", 20, ListShare{Of: 50, Slot: 3}, 0, Window{Start: 0, Own: 1, Len: 1}},
		{"more proxies than entries: one entry each, owning none", 20, ListShare{Of: 50, Slot: 4}, 0, Window{Start: 1, Own: 0, Len: 1}},
		{"no slot: a window at the spin, owning none", 20, ListShare{Of: 4}, 33, Window{Start: 13, Own: 0, Len: 10}},
		{"a slot past the sharers is none", 20, ListShare{Of: 4, Slot: 9}, 33, Window{Start: 13, Own: 0, Len: 10}},
		{"no list", 0, ListShare{Of: 4, Slot: 1}, 3, Window{}},
	}
	for _, c := range cases {
		if got := c.share.Window(c.n, c.spin); got != c.want {
			t.Errorf("%s: %+v.Window(%d, %d) = %+v, want %+v", c.name, c.share, c.n, c.spin, got, c.want)
		}
	}
}

// The owned slices of a list's sharers are disjoint and cover it.
func TestListShareSlicesPartitionTheList(t *testing.T) {
	for _, n := range []int{1, 7, 20, 64} {
		for _, of := range []int{2, 3, 7, 20, 50} {
			owners := make([]int, n)
			for slot := 1; slot <= of; slot++ {
				w := ListShare{Of: of, Slot: slot}.Window(n, 0)
				for i := 0; i < w.Own; i++ {
					owners[(w.Start+i)%n]++
				}
			}
			for pos, k := range owners {
				if k != 1 {
					t.Fatalf("%d sharers of %d entries: position %d owned by %d proxies, want 1", of, n, pos, k)
				}
			}
		}
	}
}

// roomy returns n nodes of one 4-vcore slot free and two queue places
// each: three places for the 4-vcore containers of fourCores.
func roomy(n int) []LeastLoadedNode {
	out := make([]LeastLoadedNode, n)
	for i := range out {
		out[i] = LeastLoadedNode{NodeID: fmt.Sprintf("n%d", i+1), Rack: "/r", Capacity: Resources{MemoryMB: 8192, Vcores: 4},
			Free: Resources{MemoryMB: 8192, Vcores: 4}, QueueSpace: 2}
	}
	return out
}

var fourCores = Resources{MemoryMB: 4096, Vcores: 4}

const placesPerNode = 3

// proxies installs the same list in one room per sharer, each with its
// slot, and returns them.
func proxies(list []LeastLoadedNode, of int, t0 time.Time) []*DistributedRoom {
	out := make([]*DistributedRoom, of)
	for k := range out {
		out[k] = NewDistributedRoom(time.Second)
		out[k].Update(ListNews{At: 1, List: list, Share: ListShare{Of: of, Slot: k + 1}}, 0, t0, uint64(k))
	}
	return out
}

// Two proxies sharing a list, each asking for no more than its own slice
// holds, never place on the same node: the herd the old rule caused (each
// handing out the whole room of the whole list) is gone.
func TestSharedListTwoProxiesDoNotFillTheSameNode(t *testing.T) {
	t0 := time.Unix(1000, 0)
	list := roomy(10)
	for _, of := range []int{2, 4} {
		rooms := proxies(list, of, t0)
		used := map[string]int{}
		for k, d := range rooms[:2] {
			own := d.Window().Own * placesPerNode
			got := d.Allocate(Ask{Count: own, Resources: fourCores}, t0)
			if len(got) != own {
				t.Fatalf("%d sharers: proxy %d placed %d of the %d places of its slice", of, k+1, len(got), own)
			}
			seen := map[string]bool{}
			for _, n := range got {
				if !seen[n.NodeID] {
					seen[n.NodeID] = true
					used[n.NodeID]++
				}
			}
		}
		for id, k := range used {
			if k > 1 {
				t.Fatalf("%d sharers: both proxies placed on %s", of, id)
			}
		}
	}
	// Under the old rule (no share) both fill the whole list.
	a, b := proxies(list, 1, t0)[0], proxies(list, 1, t0)[0]
	if len(a.Allocate(Ask{Count: 100, Resources: fourCores}, t0))+len(b.Allocate(Ask{Count: 100, Resources: fourCores}, t0)) != 2*10*placesPerNode {
		t.Fatal("two unshared proxies did not both hand out the whole list")
	}
}

// However much every sharer asks, each node is handed out at most
// max(HerdFactor, ⌈S/n⌉) times its room, and so is the list.
func TestSharedListBoundsWhatAllProxiesHandOut(t *testing.T) {
	t0 := time.Unix(1000, 0)
	for _, c := range []struct{ n, of, factor int }{
		{20, 2, 2}, {20, 3, 2}, {20, 7, 2}, {20, 20, 2}, {20, 40, 2}, {7, 5, 2}, {20, 50, 3}, {10, 100, 10},
	} {
		list := roomy(c.n)
		if want := max(HerdFactor, (c.of+c.n-1)/c.n); want != c.factor {
			t.Fatalf("case %+v: factor %d stated, the bound is %d", c, c.factor, want)
		}
		perNode := map[string]int{}
		total := 0
		for _, d := range proxies(list, c.of, t0) {
			for _, n := range d.Allocate(Ask{Count: 1000, Resources: fourCores}, t0) {
				perNode[n.NodeID]++
				total++
			}
		}
		for id, k := range perNode {
			if k > c.factor*placesPerNode {
				t.Errorf("%d sharers of %d nodes: %s handed out %d times, more than %d × its %d places", c.of, c.n, id, k, c.factor, placesPerNode)
			}
		}
		if room := c.n * placesPerNode; total > c.factor*room || total < room {
			t.Errorf("%d sharers of %d nodes handed out %d places, want between the list's %d and %d × that", c.of, c.n, total, room, c.factor)
		}
	}
}

// A proxy whose slice is used up borrows from the rest of its window, and
// no further; node-local asks are not held to the window.
func TestSharedListBorrowsWithinTheWindow(t *testing.T) {
	t0 := time.Unix(1000, 0)
	list := roomy(20)
	d := proxies(list, 4, t0)[1] // owns n6–n10, may use n6–n15
	got := d.Allocate(Ask{Count: 1000, Resources: fourCores}, t0)
	if len(got) != 10*placesPerNode {
		t.Fatalf("placed %d, want the %d places of a 10-node window", len(got), 10*placesPerNode)
	}
	for i, n := range got {
		var k int
		fmt.Sscanf(n.NodeID, "n%d", &k)
		if k < 6 || k > 15 || (i < 5*placesPerNode && k > 10) {
			t.Fatalf("container %d on %s: want its own n6–n10 first, then n11–n15", i, n.NodeID)
		}
	}
	local := d.Allocate(Ask{Count: 1, Resources: fourCores, Locality: Locality{Nodes: []string{"n1"}}}, t0)
	if len(local) != 1 || local[0].NodeID != "n1" {
		t.Fatalf("a node-local ask for n1, outside the window, placed on %v", local)
	}
}

// Where round-robin starts is a function of the share and the spin only:
// the same seed places the same way, and a proxy with no slot lies where
// its spin says.
func TestSharedListRotationIsDeterministicPerSeed(t *testing.T) {
	t0 := time.Unix(1000, 0)
	list := roomy(20)
	place := func(share ListShare, spin uint64) string {
		d := NewDistributedRoom(time.Second)
		d.Install(list, 1, t0, share, spin)
		return ids(d.Allocate(Ask{Count: 4, Resources: fourCores}, t0))
	}
	for _, share := range []ListShare{{}, {Of: 4, Slot: 3}, {Of: 4}} {
		if a, b := place(share, 11), place(share, 11); a != b {
			t.Errorf("share %+v, spin 11: placed on %q, then on %q", share, a, b)
		}
	}
	if got := place(ListShare{Of: 4}, 11); got != "n12 n13 n14 n15" {
		t.Errorf("no slot, spin 11: placed on %q, want n12 n13 n14 n15", got)
	}
	if got := place(ListShare{Of: 4, Slot: 3}, 11); got != "n11 n12 n13 n14" {
		t.Errorf("slot 3 of 4: placed on %q, want its slice from n11, whatever the spin", got)
	}
	if a, b := place(ListShare{}, 1), place(ListShare{}, 2); a == b {
		t.Errorf("unshared, spins 1 and 2: both placed on %q", a)
	}
}

func TestSharedListLen(t *testing.T) {
	cases := []struct{ nodesUsed, sharers, want int }{
		{20, 0, 20}, {20, 30, 20}, {20, 40, 20}, {20, 41, 21}, {20, 61, 31}, {20, 1000, 80}, {10, 25, 13},
	}
	for _, c := range cases {
		if got := SharedListLen(c.nodesUsed, c.sharers); got != c.want {
			t.Errorf("SharedListLen(%d, %d) = %d, want %d", c.nodesUsed, c.sharers, got, c.want)
		}
	}
}

func TestProxySlots(t *testing.T) {
	running := func(id, node string) *App {
		return &App{ID: id, State: AppRunning, Attempts: []Attempt{{Attempt: 1, NodeID: node}}}
	}
	retrying := running("a5", "n0")
	retrying.Attempts[0].FinishedAt, retrying.AMPending, retrying.State = 5, true, AppAccepted
	ended := running("a6", "n8")
	ended.State = AppFinished
	apps := []*App{running("a1", "n3"), running("a2", "n1"), running("a3", "n3"), {ID: "a4", State: AppAccepted, AMPending: true}, retrying, ended}
	got := ProxySlots(apps)
	if len(got) != 2 || got["n1"] != 1 || got["n3"] != 2 {
		t.Fatalf("slots %v, want n1:1 n3:2 (one per node running a current AM, in node order)", got)
	}
}
