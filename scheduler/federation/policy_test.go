package federation

import (
	"errors"
	"fmt"
	"slices"
	"testing"

	"github.com/weft-sched/weft/scheduler"
)

func res(mem, vcores int64) scheduler.Resources {
	return scheduler.Resources{MemoryMB: mem, Vcores: vcores}
}

// three sub-clusters of 100, 200 and 300 vcores, nothing used.
func three() []Candidate {
	return []Candidate{
		{ID: "sc3", State: StateRunning, Capacity: res(300_000, 300), Weight: 1000},
		{ID: "sc1", State: StateRunning, Capacity: res(100_000, 100), Weight: 1000},
		{ID: "sc2", State: StateRunning, Capacity: res(200_000, 200), Weight: 1000},
	}
}

func TestRankOnlyRunningAndInIDOrderWhenTied(t *testing.T) {
	c := three()
	c[1].State = StateLost
	c = append(c, Candidate{ID: "sc4", State: StateNew}, Candidate{ID: "sc5", State: StateUnhealthy}, Candidate{ID: "sc6", State: StateDecommissioned})
	for _, p := range []PolicyType{Uniform, Hash, Priority, Weighted, Load, Locality} {
		got, err := Rank(p, Request{Queue: "root.a", Seed: 7}, c)
		if err != nil {
			t.Fatalf("%s: %v", p, err)
		}
		if s := slices.Sorted(slices.Values(got)); !slices.Equal(s, []string{"sc2", "sc3"}) {
			t.Errorf("%s ranked %v, want sc2 and sc3 only", p, got)
		}
	}
	none := []Candidate{{ID: "sc1", State: StateLost}}
	var nr *NoRouteError
	if _, err := Rank(Load, Request{}, none); !errors.As(err, &nr) {
		t.Errorf("no RUNNING sub-cluster: %v, want a NoRouteError", err)
	}
	if _, err := Rank(Reject, Request{}, three()); !errors.Is(err, ErrRejected) {
		t.Errorf("reject: %v", err)
	}
}

func TestRankPolicies(t *testing.T) {
	busy := three()
	busy[0].Used = res(290_000, 290)  // sc3: 10 vcores free
	busy[1].Pending = res(50_000, 50) // sc1: 50 free after its backlog
	busy[2].Routed = res(20_000, 20)  // sc2: 180 free after what was routed to it
	weighted := three()
	weighted[0].Weight, weighted[1].Weight, weighted[2].Weight = 500, 0, 2000
	local := three()
	local[0].Nodes = map[string]bool{"n31": true, "n32": true}
	local[0].Racks = map[string]bool{"r3": true}
	local[1].Nodes = map[string]bool{"n11": true}
	local[1].Racks = map[string]bool{"r1": true, "r2": true}
	for _, tc := range []struct {
		name  string
		typ   PolicyType
		req   Request
		cands []Candidate
		want  []string
	}{
		{"load: most headroom first", Load, Request{}, busy, []string{"sc2", "sc1", "sc3"}},
		{"load: ties by ID", Load, Request{}, three(), []string{"sc3", "sc2", "sc1"}},
		{"priority: weight, 0 excluded", Priority, Request{}, weighted, []string{"sc2", "sc3"}},
		{"locality: nodes count twice a rack", Locality, Request{Preferred: scheduler.Locality{Nodes: []string{"n11"}, Racks: []string{"r3"}}}, local, []string{"sc1", "sc3", "sc2"}},
		{"locality: most preferred nodes", Locality, Request{Preferred: scheduler.Locality{Nodes: []string{"n31", "n32", "n11"}}}, local, []string{"sc3", "sc1", "sc2"}},
		{"locality: none preferred is load", Locality, Request{}, busy, []string{"sc2", "sc1", "sc3"}},
		{"locality: ties by headroom", Locality, Request{Preferred: scheduler.Locality{Nodes: []string{"nowhere"}}}, busy, []string{"sc2", "sc1", "sc3"}},
	} {
		got, err := Rank(tc.typ, tc.req, tc.cands)
		if err != nil || !slices.Equal(got, tc.want) {
			t.Errorf("%s: %v, %v; want %v", tc.name, got, err, tc.want)
		}
	}
}

func TestRankHashSticksToOneSubclusterPerQueue(t *testing.T) {
	firsts := map[string]bool{}
	for q := 0; q < 30; q++ {
		queue := fmt.Sprintf("root.q%d", q)
		var first string
		for seed := uint64(0); seed < 20; seed++ {
			got, err := Rank(Hash, Request{Queue: queue, Seed: seed, Seq: seed}, three())
			if err != nil {
				t.Fatal(err)
			}
			if first == "" {
				first = got[0]
			} else if got[0] != first {
				t.Fatalf("queue %s went to %s and to %s", queue, first, got[0])
			}
		}
		firsts[first] = true
	}
	if len(firsts) != 3 {
		t.Errorf("30 queues hashed onto %d sub-clusters, want all 3", len(firsts))
	}
}

func TestRankUniformIsASeededPermutation(t *testing.T) {
	counts := map[string]int{}
	for seed := uint64(0); seed < 3000; seed++ {
		a, _ := Rank(Uniform, Request{Seed: seed}, three())
		b, _ := Rank(Uniform, Request{Seed: seed}, three())
		if !slices.Equal(a, b) {
			t.Fatalf("seed %d ranked %v then %v", seed, a, b)
		}
		if s := slices.Sorted(slices.Values(a)); !slices.Equal(s, []string{"sc1", "sc2", "sc3"}) {
			t.Fatalf("seed %d: %v is not a permutation", seed, a)
		}
		counts[a[0]]++
	}
	for id, n := range counts {
		if n < 850 || n > 1150 { // 1,000 expected; 5σ ≈ 130
			t.Errorf("uniform: %s first %d times of 3,000", id, n)
		}
	}
}

// The e2e of issue 13 routes 300 apps by weight and expects each
// sub-cluster's count within a few percent: the low-discrepancy sequence
// keeps every prefix of the submissions close to the weights.
func TestRankWeightedFollowsTheWeightsClosely(t *testing.T) {
	for _, weights := range [][3]uint32{{1000, 1000, 1000}, {500, 300, 200}, {1, 2, 7}, {333, 0, 667}} {
		c := three()
		sum := 0.0
		for i := range c {
			c[i].Weight = weights[i]
			sum += float64(weights[i])
		}
		counts := map[string]int{}
		for seq := uint64(0); seq < 300; seq++ {
			got, err := Rank(Weighted, Request{Seq: seq, Seed: seq * 31}, c)
			if err != nil {
				t.Fatal(err)
			}
			counts[got[0]]++
			n := float64(seq + 1)
			for i := range c {
				want := n * float64(c[i].Weight) / sum
				if d := float64(counts[c[i].ID]) - want; d > 3 || d < -3 {
					t.Fatalf("weights %v: after %d submissions %s had %d, want %.1f", weights, seq+1, c[i].ID, counts[c[i].ID], want)
				}
			}
		}
		if weights[1] == 0 && counts["sc1"] != 0 {
			t.Errorf("weights %v: sc1 weighs 0 and got %d", weights, counts["sc1"])
		}
	}
}

func TestPolicyForTakesTheNearestAncestor(t *testing.T) {
	ps := map[string]Policy{
		"":            {Router: Uniform},
		"root.prod":   {Queue: "root.prod", Router: Weighted},
		"root.prod.a": {Queue: "root.prod.a", Router: Priority},
	}
	for q, want := range map[string]PolicyType{
		"root.prod.a": Priority, "root.prod.a.x": Priority, "root.prod.b": Weighted, "root.prod": Weighted,
		"root.dev": Uniform, "root": Uniform, "root.production": Uniform,
	} {
		if got := PolicyFor(ps, q).Router; got != want {
			t.Errorf("PolicyFor(%s) = %s, want %s", q, got, want)
		}
	}
	if got := PolicyFor(nil, "root.a").Router; got != DefaultPolicy {
		t.Errorf("no policies: %s, want %s", got, DefaultPolicy)
	}
}

func TestEffectiveWeights(t *testing.T) {
	ids := []string{"sc1", "sc2"}
	own := Policy{Router: Weighted, Weights: map[string]uint32{"sc1": 3}}
	gen := map[string]uint32{"sc1": 200, "sc2": 800}
	for _, tc := range []struct {
		p    Policy
		gen  map[string]uint32
		want map[string]uint32
	}{
		{own, gen, map[string]uint32{"sc1": 3, "sc2": 0}},
		{Policy{Router: Weighted}, gen, gen},
		{Policy{Router: Weighted}, nil, map[string]uint32{"sc1": 1000, "sc2": 1000}},
	} {
		got := EffectiveWeights(tc.p, tc.gen, ids)
		if fmt.Sprint(got) != fmt.Sprint(tc.want) {
			t.Errorf("EffectiveWeights(%v, %v) = %v, want %v", tc.p, tc.gen, got, tc.want)
		}
	}
}

func TestPolicyValidate(t *testing.T) {
	good := []Policy{
		{Router: Load},
		{Queue: "root.prod", Router: Weighted, AMRMProxy: AMRMLocality, Weights: map[string]uint32{"sc1": 2, "east-2": 1}},
	}
	for _, p := range good {
		if err := p.Validate(); err != nil {
			t.Errorf("%+v: %v", p, err)
		}
	}
	for _, tc := range []struct {
		p    Policy
		want string
	}{
		{Policy{Router: "random"}, `default: router: "random" is not a router policy (uniform, hash, priority, weighted, load, locality, reject)`},
		{Policy{Queue: "prod", Router: Load}, `queue "prod": queue: must be a queue path such as root.prod`},
		{Policy{Router: Load, AMRMProxy: "all"}, `default: amrmproxy: "all" is not an AMRMProxy policy (home, broadcast or locality)`},
		{Policy{Router: Weighted, Weights: map[string]uint32{"SC1": 1}}, `default: weights: sub-cluster ID "SC1": must start with a lower-case letter and hold only lower-case letters, digits and dashes`},
		{Policy{Router: Weighted, Weights: map[string]uint32{"sc1": MaxWeight + 1}}, `default: weights: sc1: 1000001 is more than 1000000`},
	} {
		if err := tc.p.Validate(); err == nil || err.Error() != tc.want {
			t.Errorf("%+v: %v, want %s", tc.p, err, tc.want)
		}
	}
	for _, id := range []string{"", "1sc", "sc.1", "-a", "abcdefghijabcdefghijabcdefghijabc"} {
		if ValidateID(id) == nil {
			t.Errorf("ValidateID(%q) accepted it", id)
		}
	}
}

func FuzzRank(f *testing.F) {
	f.Add(uint8(3), uint64(1), uint64(2), uint8(0), int64(5), uint32(7))
	f.Fuzz(func(t *testing.T, n uint8, seed, seq uint64, states uint8, used int64, weight uint32) {
		all := []State{StateNew, StateRunning, StateUnhealthy, StateLost, StateDecommissioned}
		var cands []Candidate
		running := map[string]bool{}
		for i := 0; i < int(n%12); i++ {
			c := Candidate{
				ID: fmt.Sprintf("sc%d", i), State: all[(int(states)+i*i)%len(all)],
				Capacity: res(int64(i)*1000, int64(i)), Used: res(used*int64(i), used), Weight: (weight >> i) % 5,
			}
			if c.State.Routable() {
				running[c.ID] = true
			}
			cands = append(cands, c)
		}
		for _, p := range PolicyTypes {
			got, err := Rank(p, Request{Queue: "root.q", Seed: seed, Seq: seq}, cands)
			if err != nil {
				continue
			}
			seen := map[string]bool{}
			for _, id := range got {
				if !running[id] || seen[id] {
					t.Fatalf("%s ranked %v: %s is not RUNNING or comes twice", p, got, id)
				}
				seen[id] = true
			}
			if p != Priority && p != Weighted && len(got) != len(running) {
				t.Fatalf("%s ranked %d of %d RUNNING", p, len(got), len(running))
			}
		}
	})
}
