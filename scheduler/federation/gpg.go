package federation

import (
	"cmp"
	"math"
	"slices"

	"github.com/weft-sched/weft/scheduler"
)

// The global policy generator (SPEC §18, seed 001's GPG). Every
// gpg_interval the router leader recomputes each queue's weights from what
// the sub-clusters' heartbeats say and writes them through Raft, so that a
// federation balances itself with no hand-written weights.
//
// For queue q and RUNNING sub-cluster i, with T_r the federation's
// capacity of resource r:
//
//	e_i  = max(0, min_r (C_ir − U_ir − P_ir) / T_r)      free room of i after its backlog
//	f_qi = max(0, min_r (S_qir − U_qir − P_qir) / T_r)   room q's fair share leaves in i (e_i if i does not know q)
//	c_i  = mean_r C_ir / T_r                             i's size
//	t_qi = (min(e_i, f_qi) + ε·c_i) / Σ_j (min(e_j, f_qj) + ε·c_j)
//	w_qi ← (1 − α)·w_qi + α·t_qi,   α = GPGDamping · max(0.4, 1 − ρ),   ρ = Σ(U + P) / ((1 + ε)·ΣC)
//
// with ε = GPGTrickle; sub-clusters that are not RUNNING weigh 0. The
// target sends new work where there is room for it; ε keeps a trickle
// towards full sub-clusters in proportion to their size (so the weights
// are proportional to capacity when everything is full, and never 0/0).
//
// Why it settles: with apps arriving at rate λ and lasting D, the work
// running in i is about λ·D·w_i, so e_i ≈ C_i − λ·D·w_i, and the fixed
// point w = t(w) is w_i = C_i / Σ_j C_j — equal utilisation everywhere.
// t falls as w_i rises (more work sent, less room left), with a slope
// (the feedback's gain) of about L = ρ / (1 − ρ): 4 at 80% load, 9 at
// 90%. A step w ← (1 − α)·w + α·t has the factor 1 − α·(1 + L) on the
// distance to the fixed point, so a fixed α oscillates once the
// federation fills (everything to the emptiest, then away from it); α
// proportional to 1 − ρ, about 1 / (1 + L), keeps the factor near ½. The
// floor keeps the generator quick to move work off a sub-cluster that
// fills from outside. TestGeneratorConverges runs it against a simulated
// federation at 80% load with apps lasting four intervals.

// GPGDamping is the largest α, how far one step of the generator moves a
// weight towards its target (on an empty federation).
const GPGDamping = 0.5

// GPGTrickle is ε, the share of a full sub-cluster's size its target keeps.
const GPGTrickle = 0.05

// WeightScale is what a queue's generated weights sum to.
const WeightScale = 1000

// SubclusterLoad is what the generator reads of a sub-cluster: the
// federation's view of its last heartbeat.
type SubclusterLoad struct {
	ID                      string
	State                   State
	Capacity, Used, Pending scheduler.Resources
	Queues                  map[string]*QueueLoad // by queue path
}

// QueueLoad is one queue of a sub-cluster as its heartbeat reports it.
// Maps hold it by pointer: msgpack decodes a map's struct values into one
// reused value, so a struct value would inherit the maps, slices and
// omitted fields of the entry decoded before it (rpc's
// TestNoMapOnTheWireHoldsStructValues).
type QueueLoad struct {
	FairShare, Used, Pending scheduler.Resources
}

// GenerateWeights returns queue's next weights (sub-cluster ID → weight,
// summing to WeightScale over the RUNNING sub-clusters; the others are
// left out) from its previous ones (nil: none yet, taken as equal). It
// returns nil when no sub-cluster is RUNNING.
func GenerateWeights(queue string, prev map[string]uint32, subs []SubclusterLoad) map[string]uint32 {
	live := make([]SubclusterLoad, 0, len(subs))
	var total scheduler.Resources
	for _, s := range subs {
		if s.State.Routable() {
			live = append(live, s)
			total = total.Add(s.Capacity)
		}
	}
	if len(live) == 0 {
		return nil
	}
	slices.SortFunc(live, func(a, b SubclusterLoad) int { return cmp.Compare(a.ID, b.ID) })
	names := total.Names()
	share := func(v scheduler.Resources, agg func(a, b float64) float64, start float64) float64 {
		x, n := start, 0
		for _, name := range names {
			t := total.Get(name)
			if t <= 0 {
				continue
			}
			x = agg(x, float64(v.Get(name))/float64(t))
			n++
		}
		if n == 0 {
			return 0
		}
		return x
	}
	target := make([]float64, len(live))
	var sum float64
	for i, s := range live {
		room := max(0, share(s.Capacity.Sub(s.Used).Sub(s.Pending), math.Min, math.Inf(1)))
		if q := s.Queues[queue]; q != nil {
			room = min(room, max(0, share(q.FairShare.Sub(q.Used).Sub(q.Pending), math.Min, math.Inf(1))))
		}
		size := share(s.Capacity, func(a, b float64) float64 { return a + b }, 0) / float64(max(1, len(names)))
		target[i] = room + GPGTrickle*size
		sum += target[i]
	}
	// The feedback's gain grows with the load: a step towards the target
	// must shrink as the federation fills (the step below).
	var load, capacity float64
	for _, s := range live {
		load += share(s.Used.Add(s.Pending), func(a, b float64) float64 { return a + b }, 0)
		capacity += share(s.Capacity, func(a, b float64) float64 { return a + b }, 0)
	}
	alpha := GPGDamping
	if capacity > 0 {
		alpha = GPGDamping * max(0.4, 1-load/(capacity*(1+GPGTrickle)))
	}
	prevSum := 0.0
	for _, s := range live {
		prevSum += float64(prev[s.ID])
	}
	w := make([]float64, len(live))
	for i, s := range live {
		t := 1 / float64(len(live))
		if sum > 0 {
			t = target[i] / sum
		}
		p := 1 / float64(len(live))
		if prevSum > 0 {
			p = float64(prev[s.ID]) / prevSum
		}
		w[i] = (1-alpha)*p + alpha*t
	}
	return quantize(live, w)
}

// quantize turns shares summing to 1 into integer weights summing to
// WeightScale: each its floor, then the remainder one by one to the
// largest fractions (ties by ID).
func quantize(live []SubclusterLoad, w []float64) map[string]uint32 {
	var total float64
	for _, x := range w {
		total += x
	}
	out := make(map[string]uint32, len(live))
	type frac struct {
		i int
		f float64
	}
	fr := make([]frac, len(live))
	given := 0
	for i, x := range w {
		v := 0.0
		if total > 0 {
			v = x / total * WeightScale
		}
		fl := math.Floor(v)
		out[live[i].ID] = uint32(fl)
		given += int(fl)
		fr[i] = frac{i, v - fl}
	}
	slices.SortStableFunc(fr, func(a, b frac) int { return cmp.Compare(b.f, a.f) })
	for k := 0; given < WeightScale; k = (k + 1) % len(fr) {
		out[live[fr[k].i].ID]++
		given++
	}
	return out
}

// WeightsMoved reports whether next differs from prev enough to be worth a
// Raft write: a sub-cluster came or went, or a weight moved by at least
// minStep.
func WeightsMoved(prev, next map[string]uint32, minStep uint32) bool {
	if len(prev) != len(next) {
		return true
	}
	for id, n := range next {
		p, ok := prev[id]
		if !ok {
			return true
		}
		if max(p, n)-min(p, n) >= minStep {
			return true
		}
	}
	return false
}
