package federation

import (
	"fmt"
	"maps"
	"slices"
	"testing"

	"github.com/weft-sched/weft/scheduler"
)

func ask(id uint64, count int, nodes, racks []string) scheduler.Ask {
	return scheduler.Ask{AskID: id, Count: count, Resources: scheduler.Resources{MemoryMB: 1024, Vcores: 1},
		ExecutionType: scheduler.Guaranteed, Locality: scheduler.Locality{Nodes: nodes, Racks: racks, Relax: true}}
}

// sub is a candidate with room for free containers of 1 GiB / 1 vcore.
func sub(id string, st State, weight uint32, free int64, nodes ...string) Candidate {
	c := Candidate{ID: id, State: st, Weight: weight, Capacity: scheduler.Resources{MemoryMB: free * 1024, Vcores: free},
		Nodes: map[string]bool{}, Racks: map[string]bool{"/" + id: true}}
	for _, n := range nodes {
		c.Nodes[n] = true
	}
	return c
}

// counts flattens a split to "sub-cluster:ask=count" per ask ID.
func counts(split map[string][]scheduler.Ask) map[string]int {
	out := map[string]int{}
	for id, asks := range split {
		for _, a := range asks {
			out[fmt.Sprintf("%s:%d", id, a.AskID)] += a.Count
		}
	}
	return out
}

func TestSplitNarrowsLocality(t *testing.T) {
	cands := []Candidate{sub("sc1", StateRunning, 1, 10, "a1", "a2"), sub("sc2", StateRunning, 1, 10, "b1", "b2"), sub("sc3", StateRunning, 1, 10, "c1")}
	split := Split(AMRMLocality, "sc1", []scheduler.Ask{ask(1, 60, []string{"a1", "b1", "a2", "b2", "zz"}, nil)}, cands)
	if got := counts(split); !maps.Equal(got, map[string]int{"sc1:1": 30, "sc2:1": 30}) {
		t.Fatalf("split %v, want 30 to each sub-cluster holding two of the nodes", got)
	}
	if n := split["sc1"][0].Locality.Nodes; !slices.Equal(n, []string{"a1", "a2"}) {
		t.Fatalf("sc1's part names %v, want its own nodes a1, a2", n)
	}
	if n := split["sc2"][0].Locality.Nodes; !slices.Equal(n, []string{"b1", "b2"}) || !split["sc2"][0].Locality.Relax {
		t.Fatalf("sc2's part: %+v, want its own nodes b1, b2, relaxed as asked", split["sc2"][0].Locality)
	}
}

func TestSplit(t *testing.T) {
	three := []Candidate{sub("sc1", StateRunning, 5, 10, "n1"), sub("sc2", StateRunning, 3, 30, "n2", "n3"), sub("sc3", StateRunning, 2, 0, "n4")}
	for _, tc := range []struct {
		name   string
		policy AMRMPolicyType
		home   string
		asks   []scheduler.Ask
		cands  []Candidate
		want   map[string]int
	}{
		{"home: all to the home", AMRMHome, "sc1", []scheduler.Ask{ask(1, 7, []string{"n2"}, nil), ask(2, 3, nil, nil)}, three,
			map[string]int{"sc1:1": 7, "sc1:2": 3}},
		{"no policy is home", "", "sc2", []scheduler.Ask{ask(1, 4, nil, nil)}, three, map[string]int{"sc2:1": 4}},
		{"locality: a node ask goes whole to its owner", AMRMLocality, "sc1", []scheduler.Ask{ask(1, 6, []string{"n2"}, nil)}, three,
			map[string]int{"sc2:1": 6}},
		// n2, n3 (sc2) score 4 against n1 and /sc1 (sc1) 3: 12 → 6.86 /
		// 5.14 → 7 / 5.
		{"locality: nodes of two sub-clusters split by what each holds", AMRMLocality, "sc1",
			[]scheduler.Ask{ask(1, 12, []string{"n2", "n3", "n1"}, []string{"/sc1"})}, three, map[string]int{"sc1:1": 5, "sc2:1": 7}},
		{"locality: a tie's odd one goes to the home", AMRMLocality, "sc2",
			[]scheduler.Ask{ask(1, 3, []string{"n1", "n2"}, nil)}, three, map[string]int{"sc1:1": 1, "sc2:1": 2}},
		{"locality: a rack ask to the rack's sub-cluster, even with no room", AMRMLocality, "sc1",
			[]scheduler.Ask{ask(1, 2, nil, []string{"/sc3"})}, three, map[string]int{"sc3:1": 2}},
		// ANY: weight × fit. sc1 5 × min(10, 40) = 50, sc2 3 × 30 = 90,
		// sc3 2 × 0: 40 → 14.29 / 25.71 → 14 / 26.
		{"locality: ANY by weight × room", AMRMLocality, "sc1", []scheduler.Ask{ask(1, 40, nil, nil)}, three,
			map[string]int{"sc1:1": 14, "sc2:1": 26}},
		{"locality: an unknown node is ANY", AMRMLocality, "sc1", []scheduler.Ask{ask(1, 40, []string{"elsewhere"}, nil)}, three,
			map[string]int{"sc1:1": 14, "sc2:1": 26}},
		// Broadcast: weights alone, 5:3:2 of 10 and of 7 (3.5 / 2.1 / 1.4:
		// floors 3/2/1, the one left to the largest remainder, sc1).
		{"broadcast: ANY by the weights", AMRMBroadcast, "sc1", []scheduler.Ask{ask(1, 10, nil, nil), ask(2, 7, nil, nil)}, three,
			map[string]int{"sc1:1": 5, "sc2:1": 3, "sc3:1": 2, "sc1:2": 4, "sc2:2": 2, "sc3:2": 1}},
		{"broadcast: node asks still to their owner", AMRMBroadcast, "sc1", []scheduler.Ask{ask(1, 3, []string{"n4"}, nil)}, three,
			map[string]int{"sc3:1": 3}},
		{"LOST and weight-0 sub-clusters take nothing", AMRMBroadcast, "sc1", []scheduler.Ask{ask(1, 9, nil, nil)},
			[]Candidate{sub("sc1", StateRunning, 1, 10), sub("sc2", StateLost, 5, 10), sub("sc3", StateRunning, 0, 10), sub("sc4", StateRunning, 2, 10)},
			map[string]int{"sc1:1": 3, "sc4:1": 6}},
		{"the home is a candidate whatever its state", AMRMBroadcast, "sc1", []scheduler.Ask{ask(1, 4, nil, nil)},
			[]Candidate{sub("sc1", StateUnhealthy, 1, 10), sub("sc2", StateRunning, 1, 10)}, map[string]int{"sc1:1": 2, "sc2:1": 2}},
		{"no room anywhere: all to the home", AMRMLocality, "sc3", []scheduler.Ask{ask(1, 5, nil, nil)},
			[]Candidate{sub("sc1", StateRunning, 1, 0), sub("sc3", StateRunning, 1, 0)}, map[string]int{"sc3:1": 5}},
		{"a home the routers do not know yet still gets its asks", AMRMLocality, "sc9", []scheduler.Ask{ask(1, 5, nil, nil)},
			[]Candidate{sub("sc1", StateRunning, 0, 10)}, map[string]int{"sc9:1": 5}},
		{"a withdrawn ask (count 0) goes to every candidate", AMRMLocality, "sc1", []scheduler.Ask{ask(1, 0, nil, nil)},
			[]Candidate{sub("sc1", StateRunning, 1, 10), sub("sc2", StateRunning, 1, 10), sub("sc3", StateLost, 1, 10)},
			map[string]int{"sc1:1": 0, "sc2:1": 0}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			split := Split(tc.policy, tc.home, tc.asks, tc.cands)
			if got := counts(split); !maps.Equal(got, tc.want) {
				t.Fatalf("split %v, want %v", got, tc.want)
			}
			// A withdrawn ask appears in every candidate; any other ask's
			// parts sum to its count.
			for _, a := range tc.asks {
				if a.Count == 0 {
					continue
				}
				total := 0
				for _, parts := range split {
					for _, p := range parts {
						if p.AskID == a.AskID {
							total += p.Count
							if p.Resources.String() != a.Resources.String() || p.Priority != a.Priority || p.Locality.Relax != a.Locality.Relax {
								t.Fatalf("a part changed the ask: %+v of %+v", p, a)
							}
							// A part names what its sub-cluster holds of
							// the ask's nodes, or all of them (ANY).
							for _, n := range p.Locality.Nodes {
								if !slices.Contains(a.Locality.Nodes, n) {
									t.Fatalf("a part names node %s the ask did not: %+v", n, p)
								}
							}
						}
					}
				}
				if total != a.Count {
					t.Fatalf("ask %d: parts sum to %d, want %d", a.AskID, total, a.Count)
				}
			}
		})
	}
}

// The parts of an ask always sum to its count, every part is positive,
// and the same input splits the same way.
func FuzzSplit(f *testing.F) {
	f.Add(uint8(1), 40, uint32(5), uint32(3), int64(10), int64(30), uint8(0))
	f.Add(uint8(2), 7, uint32(0), uint32(0), int64(0), int64(0), uint8(1))
	f.Fuzz(func(t *testing.T, pol uint8, count int, w1, w2 uint32, free1, free2 int64, lost uint8) {
		if count < 1 || count > 1<<20 || free1 < 0 || free2 < 0 || free1 > 1<<20 || free2 > 1<<20 {
			return
		}
		policy := []AMRMPolicyType{AMRMHome, AMRMLocality, AMRMBroadcast}[int(pol)%3]
		st2 := StateRunning
		if lost%2 == 1 {
			st2 = StateLost
		}
		cands := []Candidate{sub("sc1", StateRunning, w1%MaxWeight, free1), sub("sc2", st2, w2%MaxWeight, free2)}
		asks := []scheduler.Ask{ask(1, count, nil, nil)}
		split := Split(policy, "sc1", asks, cands)
		total := 0
		for _, id := range slices.Sorted(maps.Keys(split)) {
			for _, p := range split[id] {
				if p.Count <= 0 {
					t.Fatalf("a part of %d at %s", p.Count, id)
				}
				total += p.Count
			}
		}
		if total != count {
			t.Fatalf("%s of %d: parts sum to %d (%v)", policy, count, total, counts(split))
		}
		if !maps.Equal(counts(split), counts(Split(policy, "sc1", asks, cands))) {
			t.Fatal("the same input split two ways")
		}
	})
}
