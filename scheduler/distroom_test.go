package scheduler

import (
	"testing"
	"time"
)

// A list computed before the room's latest placements does not reflect
// them: installing it must not hand their places out again; a list
// computed well after them does. A list said to be the same as the one
// held renews the room; one left out does not.
func TestDistributedRoomUpdates(t *testing.T) {
	t0 := time.Unix(1000, 0)
	one := []LeastLoadedNode{{NodeID: "n1", Capacity: Resources{MemoryMB: 4096, Vcores: 4}, QueueSpace: 4}}
	d := NewDistributedRoom(time.Second)
	if !d.Update(ListNews{At: 7, List: one}, 0, t0, 0) {
		t.Fatal("a first list was not installed")
	}
	ask := Ask{Count: 3, Resources: oneCore, ExecutionType: Opportunistic}
	if got := d.Allocate(ask, nil, t0.Add(100*time.Millisecond)); len(got) != 3 {
		t.Fatalf("placed %d of 3 on 4 places", len(got))
	}
	d.Update(ListNews{At: 8, List: one, Age: 100 * time.Millisecond}, 7, t0.Add(600*time.Millisecond), 5)
	if got := d.Allocate(Ask{Count: 4, Resources: oneCore}, nil, t0.Add(700*time.Millisecond)); len(got) != 1 {
		t.Fatalf("placed %d on a list that may miss 3 recent placements, want 1", len(got))
	}
	if d.Update(ListNews{At: 8}, 8, t0.Add(time.Second), 0) || d.Update(ListNews{}, 8, t0.Add(time.Second), 0) {
		t.Fatal("a list left out, or no list, renewed the room")
	}
	if d.Update(ListNews{At: 9, Same: true}, 5, t0.Add(3*time.Second), 0) {
		t.Fatal("a list said the same as one not held was installed")
	}
	if !d.Update(ListNews{At: 9, Same: true}, 8, t0.Add(3*time.Second), 0) {
		t.Fatal("a list said the same as the one held was not taken")
	}
	if l, at := d.List(); len(l) != 1 || at != 9 {
		t.Fatalf("list %+v at %d, want n1 at 9", l, at)
	}
	if got := d.Allocate(Ask{Count: 8, Resources: oneCore}, nil, t0.Add(3*time.Second)); len(got) != 4 {
		t.Fatalf("placed %d on a list computed after every placement, want its 4 places", len(got))
	}
}
