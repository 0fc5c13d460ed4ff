package scheduler

import "testing"

// A DRAINING node takes no new container (SPEC §20): the pass places
// neither AMs nor tasks there, whatever room it has, and places them on
// the READY node instead; with only DRAINING or DOWN nodes nothing is
// placed and the app says why.
func TestDrainingNodesTakeNoPlacements(t *testing.T) {
	r := Resources{MemoryMB: 1024, Vcores: 1}
	for _, tc := range []struct {
		name   string
		status [2]NodeStatus // of n1 (large, empty) and n2 (small)
		want   map[string]int
	}{
		{"both ready: spread uses both", [2]NodeStatus{NodeReady, NodeReady}, map[string]int{"n1": 3, "n2": 1}},
		{"n1 draining: all on n2", [2]NodeStatus{NodeDraining, NodeReady}, map[string]int{"n2": 2}},
		{"n2 draining: all on n1", [2]NodeStatus{NodeReady, NodeDraining}, map[string]int{"n1": 4}},
		{"n1 draining, n2 down: nothing", [2]NodeStatus{NodeDraining, NodeDown}, map[string]int{}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			n1, n2 := node("n1", 16*1024, 16), node("n2", 2*1024, 2)
			n1.Status, n2.Status = tc.status[0], tc.status[1]
			am := &App{ID: "app-1", Queue: "root.default", State: AppAccepted, AMPending: true, CreateIndex: 1,
				Spec: AppSpec{AMResources: r}}
			f := &fakeState{nodes: []*Node{n1, n2}, cfg: DefaultQueueConfig(),
				apps: []*App{am, runningApp("app-2", "root.default", 2, 3, r)}}
			got := map[string]int{}
			for _, p := range schedule(f) {
				got[p.NodeID]++
			}
			if len(got) != len(tc.want) {
				t.Fatalf("placed %v, want %v", got, tc.want)
			}
			for id, n := range tc.want {
				if got[id] != n {
					t.Fatalf("placed %v, want %v", got, tc.want)
				}
			}
		})
	}
}
