package scheduler

import (
	"fmt"
	"testing"
)

func TestPlacedSince(t *testing.T) {
	cs := []*Container{
		{ID: "am", Attempt: 2, AskID: AMAskID, IsAM: true, CreateIndex: 20},             // the AM: never
		{ID: "old", Attempt: 2, AskID: 1, CreateIndex: 10},                              // seen already
		{ID: "at", Attempt: 2, AskID: 1, CreateIndex: 15},                               // at the index: seen
		{ID: "g1", Attempt: 2, AskID: 1, CreateIndex: 16},                               // new
		{ID: "g2", Attempt: 2, AskID: 1, CreateIndex: 30, State: ContainerCompleted},    // new, even if done
		{ID: "o1", Attempt: 2, AskID: 4, CreateIndex: 17, ExecutionType: Opportunistic}, // central opportunistic
		{ID: "d1", Attempt: 2, AskID: 4, CreateIndex: 18, Distributed: true},            // an AMRMProxy's: the AM knew
		{ID: "prev", Attempt: 1, AskID: 1, CreateIndex: 19},                             // another attempt
	}
	got := PlacedSince(cs, 2, 15)
	if fmt.Sprint(got) != "map[1:2 4:1]" {
		t.Fatalf("PlacedSince = %v, want ask 1: 2 (g1, g2), ask 4: 1 (o1)", got)
	}
	if got := PlacedSince(nil, 1, 0); len(got) != 0 {
		t.Fatalf("no containers: %v", got)
	}
}

// TestGuaranteedContainerIDFormat pins the IDs to "c-%d-%d": they are
// stored in snapshots and logs, and built without fmt.
func TestGuaranteedContainerIDFormat(t *testing.T) {
	for _, c := range []struct {
		index uint64
		pos   int
	}{{0, 0}, {1, 2}, {12345, 4095}, {1<<64 - 1, 1<<63 - 1}, {7, -1}} {
		if got, want := GuaranteedContainerID(c.index, c.pos), fmt.Sprintf("c-%d-%d", c.index, c.pos); got != want {
			t.Errorf("GuaranteedContainerID(%d, %d) = %q, want %q", c.index, c.pos, got, want)
		}
	}
}

// An unmanaged AM's app's containers carry its sub-cluster, and are still
// IDs an agent accepts as a path element; every other app's are the plain
// leader IDs.
func TestPlacedContainerIDCarriesTheSubcluster(t *testing.T) {
	plain := &App{ID: "app-3"}
	spanning := &App{ID: "app-f7", Unmanaged: &Unmanaged{Home: "sc1", Subcluster: "sc2"}}
	if got := PlacedContainerID(plain, 12, 3); got != "c-12-3" {
		t.Errorf("a managed app's container ID %q, want c-12-3", got)
	}
	got := PlacedContainerID(spanning, 12, 3)
	if got != "sc2.c-12-3" {
		t.Errorf("an unmanaged AM's container ID %q, want sc2.c-12-3", got)
	}
	if err := ValidateID("container.id", got); err != nil {
		t.Errorf("agents would refuse %q: %v", got, err)
	}
}
