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
