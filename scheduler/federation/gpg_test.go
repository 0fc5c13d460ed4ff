package federation

import (
	"math"
	"testing"
)

// fedSim is a federation of sub-clusters running apps of one queue FIFO:
// an app routed to a full sub-cluster waits there until room frees.
type fedSim struct {
	subs     []SubclusterLoad
	running  [][]int // per sub-cluster: intervals left of each running app
	pending  []int   // per sub-cluster: apps waiting
	external []int64 // per sub-cluster: vcores used by work from outside
	seq      uint64
}

const appVcores = 10

func newFedSim(capacities ...int64) *fedSim {
	f := &fedSim{running: make([][]int, len(capacities)), pending: make([]int, len(capacities)), external: make([]int64, len(capacities))}
	for i, c := range capacities {
		f.subs = append(f.subs, SubclusterLoad{ID: string(rune('a' + i)), State: StateRunning, Capacity: res(c*1000, c)})
	}
	return f
}

// step runs one gpg_interval: arrivals apps of 10 vcores lasting life
// intervals, routed by Weighted with weights w, then the sub-clusters'
// reports as their heartbeats would carry them.
func (f *fedSim) step(w map[string]uint32, arrivals, life int) {
	cands := make([]Candidate, len(f.subs))
	for i, s := range f.subs {
		weight := uint32(1000) // no weights yet: equal
		if w != nil {
			weight = w[s.ID]
		}
		cands[i] = Candidate{ID: s.ID, State: s.State, Capacity: s.Capacity, Weight: weight}
	}
	for a := 0; a < arrivals; a++ {
		rank, err := Rank(Weighted, Request{Queue: "root.q", Seq: f.seq}, cands)
		f.seq++
		if err != nil {
			panic(err)
		}
		for i := range f.subs {
			if f.subs[i].ID == rank[0] {
				f.pending[i]++
			}
		}
	}
	for i := range f.subs {
		left := f.running[i][:0]
		for _, l := range f.running[i] {
			if l > 1 {
				left = append(left, l-1)
			}
		}
		f.running[i] = left
		for f.pending[i] > 0 && f.used(i)+appVcores <= f.subs[i].Capacity.Vcores {
			f.pending[i]--
			f.running[i] = append(f.running[i], life)
		}
		f.subs[i].Used = res(f.used(i)*1000, f.used(i))
		f.subs[i].Pending = res(int64(f.pending[i])*appVcores*1000, int64(f.pending[i])*appVcores)
	}
}

func (f *fedSim) used(i int) int64 { return int64(len(f.running[i]))*appVcores + f.external[i] }

func (f *fedSim) utilisation(i int) float64 {
	return float64(f.used(i)) / float64(f.subs[i].Capacity.Vcores)
}

// distance is how far weights w are from capacity shares, the fixed point.
func (f *fedSim) distance(w map[string]uint32) float64 {
	var total, d float64
	for _, s := range f.subs {
		total += float64(s.Capacity.Vcores)
	}
	for _, s := range f.subs {
		d = math.Max(d, math.Abs(float64(w[s.ID])/WeightScale-float64(s.Capacity.Vcores)/total))
	}
	return d
}

func TestGeneratorConverges(t *testing.T) {
	f := newFedSim(1000, 2000, 3000)
	var w map[string]uint32 // none yet: equal
	start := f.distance(map[string]uint32{"a": 333, "b": 333, "c": 334})
	for k := 0; k < 20; k++ {
		f.step(w, 120, 4) // 4,800 vcores running in steady state: 80% of 6,000
		w = GenerateWeights("root.q", w, f.subs)
		t.Logf("interval %2d: weights %v, utilisation %.2f %.2f %.2f, pending %v", k, w, f.utilisation(0), f.utilisation(1), f.utilisation(2), f.pending)
	}
	if d := f.distance(w); d > 0.05 || d >= start {
		t.Errorf("after 20 intervals the weights %v are %.3f from the capacity shares (%.3f at the start)", w, d, start)
	}
	for i := range f.subs {
		for j := range f.subs {
			if d := f.utilisation(i) - f.utilisation(j); d > 0.15 {
				t.Errorf("utilisation %s %.2f against %s %.2f", f.subs[i].ID, f.utilisation(i), f.subs[j].ID, f.utilisation(j))
			}
		}
	}

	// Work from outside the federation fills c: its weight falls towards
	// its trickle, and comes back once that work ends.
	// Less work arrives meanwhile (2,000 vcores, which a and b can hold).
	f.external[2] = 3000
	before := w["c"]
	for k := 0; k < 5; k++ {
		f.step(w, 50, 4)
		w = GenerateWeights("root.q", w, f.subs)
	}
	if w["c"] > before*6/10 {
		t.Errorf("c is full from outside and weighs %d of %d after five intervals (%d before)", w["c"], WeightScale, before)
	}
	f.external[2] = 0
	for k := 0; k < 20; k++ {
		f.step(w, 120, 4)
		w = GenerateWeights("root.q", w, f.subs)
	}
	if d := f.distance(w); d > 0.05 {
		t.Errorf("after c was freed the weights %v are %.3f from the capacity shares", w, d)
	}
}

func TestGenerateWeights(t *testing.T) {
	subs := []SubclusterLoad{
		{ID: "sc2", State: StateRunning, Capacity: res(100_000, 100)},
		{ID: "sc1", State: StateRunning, Capacity: res(100_000, 100), Used: res(100_000, 100)},
		{ID: "sc3", State: StateLost, Capacity: res(100_000, 100)},
	}
	w := GenerateWeights("root.q", nil, subs)
	if len(w) != 2 || w["sc1"]+w["sc2"] != WeightScale || w["sc2"] <= w["sc1"] {
		t.Fatalf("weights %v: want sc1 and sc2 only, summing to %d, the empty sc2 heavier", w, WeightScale)
	}
	// sc2's target: its room (half the total) and its trickle (ε × its
	// size, half), over the same for both (sc1 has no room).
	target := (0.5 + GPGTrickle*0.5) / (0.5 + GPGTrickle*0.5 + GPGTrickle*0.5)
	// The step: from equal (500) towards the target, α smaller as the
	// federation fills (half of it is used).
	alpha := GPGDamping * (1 - 100.0/(200*(1+GPGTrickle)))
	if want := (1-alpha)*500 + alpha*target*1000; math.Abs(float64(w["sc2"])-want) > 1 {
		t.Errorf("sc2 weighs %d, want %.1f", w["sc2"], want)
	}
	// A queue whose fair share in sc2 is used up gets sc2's trickle only.
	subs[0].Queues = map[string]*QueueLoad{"root.q": {FairShare: res(10_000, 10), Used: res(10_000, 10)}}
	full := GenerateWeights("root.q", map[string]uint32{"sc1": 500, "sc2": 500}, subs)
	if full["sc2"] != 500 {
		t.Errorf("both full for root.q: %v, want them equal (trickles of equal sizes)", full)
	}
	if other := GenerateWeights("root.other", map[string]uint32{"sc1": 500, "sc2": 500}, subs); other["sc2"] <= 500 {
		t.Errorf("root.other is not limited in sc2: %v", other)
	}
	if GenerateWeights("root.q", nil, subs[2:]) != nil {
		t.Error("weights with no RUNNING sub-cluster")
	}
}

func TestWeightsMoved(t *testing.T) {
	a := map[string]uint32{"sc1": 500, "sc2": 500}
	for _, tc := range []struct {
		next map[string]uint32
		want bool
	}{
		{map[string]uint32{"sc1": 505, "sc2": 495}, false},
		{map[string]uint32{"sc1": 510, "sc2": 490}, true},
		{map[string]uint32{"sc1": 1000}, true},
		{map[string]uint32{"sc1": 500, "sc3": 500}, true},
	} {
		if got := WeightsMoved(a, tc.next, 10); got != tc.want {
			t.Errorf("WeightsMoved(%v, %v) = %v", a, tc.next, got)
		}
	}
}
