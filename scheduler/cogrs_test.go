package scheduler

import (
	"slices"
	"testing"
)

// fig7 is seed 003's figure 7: two racks of three nodes.
var fig7 = map[string]string{"TT1": "/r1", "TT2": "/r1", "TT3": "/r1", "TT4": "/r2", "TT5": "/r2", "TT6": "/r2"}

var fig7Nodes = []string{"TT1", "TT2", "TT3", "TT4", "TT5", "TT6"}

// Seed 003, figure 7: feeders TT1 and TT2 in rack 1; a reduce task
// requesting TT1, TT2 or TT4 has TND 2 on TT1 or TT2 and 8 on TT4.
func TestTotalNetworkDistanceOfFigure7(t *testing.T) {
	feeders := []Feeder{{Node: "TT1", Bytes: 1}, {Node: "TT2", Bytes: 1}}
	for node, want := range map[string]int64{"TT1": 2, "TT2": 2, "TT3": 4, "TT4": 8} {
		if got := TND(feeders, node, fig7); got != want {
			t.Errorf("TND on %s = %d, want %d", node, got, want)
		}
	}
	if best, w := CenterOfGravity(feeders, []string{"TT1", "TT2", "TT4"}, fig7); !slices.Equal(best, []string{"TT1", "TT2"}) || w != 2 {
		t.Fatalf("center of gravity of TT1, TT2, TT4: %v (WTND %d), want TT1 and TT2 (2)", best, w)
	}
}

func TestCenterOfGravity(t *testing.T) {
	for _, tc := range []struct {
		name    string
		feeders []Feeder
		want    []string
		wtnd    int64
	}{
		// Three small partitions in rack 2, one large in rack 1: most
		// feeders are in rack 2, but the bytes are on TT1 (WTND 12 there
		// against 44 on TT4).
		{"skewed: not the most common feeder's rack", []Feeder{{"TT4", 1}, {"TT5", 1}, {"TT6", 1}, {"TT1", 10}}, []string{"TT1"}, 12},
		// Equal partitions on every node of rack 2 and one on TT1: rack 2.
		{"balanced: the rack holding most", []Feeder{{"TT4", 5}, {"TT5", 5}, {"TT6", 5}, {"TT1", 5}}, []string{"TT4", "TT5", "TT6"}, 40},
		// A feeder with an empty partition does not pull.
		{"empty partitions weigh nothing", []Feeder{{"TT4", 0}, {"TT2", 7}}, []string{"TT2"}, 0},
		// A node of no known rack is off-rack from every other.
		{"unknown rack", []Feeder{{"elsewhere", 3}}, []string{"TT1", "TT2", "TT3", "TT4", "TT5", "TT6"}, 12},
	} {
		t.Run(tc.name, func(t *testing.T) {
			best, w := CenterOfGravity(tc.feeders, fig7Nodes, fig7)
			if !slices.Equal(best, tc.want) || w != tc.wtnd {
				t.Fatalf("center of gravity %v (WTND %d), want %v (%d)", best, w, tc.want, tc.wtnd)
			}
		})
	}
}

// The scheduler places a reduce ask at its center of gravity; with that
// node full, delay scheduling (no delays here) relaxes to the node with
// the least WTND that has room.
func TestReducePlacedAtTheCenterOfGravity(t *testing.T) {
	var nodes []*Node
	for _, id := range fig7Nodes {
		n := node(id, 4*1024, 4)
		n.Rack = fig7[id]
		nodes = append(nodes, n)
	}
	reduce := func(id string) *App {
		a := runningApp(id, "root.q", 1, 1, oneGB)
		a.Asks[0].Feeders = []Feeder{{"TT4", 1}, {"TT5", 1}, {"TT6", 1}, {"TT1", 10}}
		return a
	}
	f := &fakeState{nodes: nodes, cfg: leaves(PolicyFIFO, "q"), apps: []*App{reduce("R1")}}
	ps := schedule(f)
	if len(ps) != 1 || ps[0].NodeID != "TT1" {
		t.Fatalf("placed %+v, want the reduce on TT1, its center of gravity", ps)
	}
	f.apply(ps)
	f.node("TT1").AllocatedGuaranteed = f.node("TT1").Capacity // TT1 full
	f.apps = append(f.apps, reduce("R2"))
	// TT2 and TT3: 3 × 4 + 10 × 2 = 32; TT4: 2 + 2 + 10 × 4 = 44. The
	// least with room wins, ties by ID.
	ps = schedule(f)
	if len(ps) != 1 || ps[0].NodeID != "TT2" {
		t.Fatalf("placed %+v, want the reduce on TT2: TT1 full, TT2 the least WTND with room (32; TT4 44)", ps)
	}
	if err := (&Ask{AskID: 1, Count: 1, Resources: oneGB, ExecutionType: Guaranteed, Feeders: []Feeder{{"TT1", -1}}}).Validate(); err == nil {
		t.Fatal("a feeder of negative size was accepted")
	}
	if err := (&Ask{AskID: 1, Count: 1, Resources: oneGB, ExecutionType: Guaranteed, Feeders: []Feeder{{"TT1", 1}},
		Locality: Locality{Nodes: []string{"TT2"}}}).Validate(); err == nil {
		t.Fatal("an ask with both feeders and locality was accepted")
	}
}
