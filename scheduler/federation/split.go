package federation

import (
	"cmp"
	"math/bits"
	"slices"

	"github.com/weft-sched/weft/scheduler"
)

// Split divides a spanning app's guaranteed asks between sub-clusters
// under its queue's AMRMProxy policy (SPEC §18, "AMs spanning
// sub-clusters"): what the AMRMProxy on the AM's node sends to the app's
// home and to each secondary sub-cluster, where it holds an unmanaged AM
// for the app. The answer maps sub-cluster IDs to asks, each with the
// count that sub-cluster is asked for (the AM's counts are absolute — how
// many of an ask are still wanted — and so are the parts: the parts of an
// ask sum to its count).
//
//   - home (and no policy): every ask to the home.
//   - locality: an ask naming nodes or racks goes to the sub-clusters
//     holding them, in proportion to what each holds (a node 2, a rack 1),
//     each part naming only its sub-cluster's nodes and racks (YARN sends
//     a node's request to the node's sub-cluster the same way), which
//     relaxes it as it would its own; an ask naming none they hold, and
//     every ANY ask, is split by weight × fit — fit being how many of the
//     ask's containers the sub-cluster's headroom holds, up to the count —
//     so containers go where the queue is weighted and there is room.
//   - broadcast: node and rack asks as locality; ANY asks spread over the
//     sub-clusters by the queue's weights alone, room or not.
//
// The candidates are the home, whatever its state (the AM runs there),
// and the RUNNING others; weights of 0 and no room leave a sub-cluster out,
// and an ask no candidate scores goes to the home. A count of 0 (the AM
// withdrawing an ask) goes to every candidate, for the proxy to pass on
// wherever it sent that ask before. Parts are apportioned by largest
// remainder, ties to the home then by ID: deterministic, integer only.
func Split(policy AMRMPolicyType, home string, asks []scheduler.Ask, cands []Candidate) map[string][]scheduler.Ask {
	out := map[string][]scheduler.Ask{}
	if policy == "" || policy == AMRMHome {
		if len(asks) > 0 {
			out[home] = slices.Clone(asks)
		}
		return out
	}
	live := splitCandidates(home, cands)
	for _, a := range asks {
		if a.Count == 0 {
			for _, c := range live {
				out[c.ID] = append(out[c.ID], a)
			}
			continue
		}
		if owned := localityScores(a.Locality, live); owned != nil {
			for i, n := range apportion(a.Count, owned) {
				if n > 0 {
					part := a
					part.Count, part.Locality = n, narrow(a.Locality, live[i])
					out[live[i].ID] = append(out[live[i].ID], part)
				}
			}
			continue
		}
		scores := make([]uint64, len(live))
		for i, c := range live {
			scores[i] = uint64(c.Weight)
			if policy == AMRMLocality {
				scores[i] *= uint64(fit(c, a))
			}
		}
		parts := apportion(a.Count, scores)
		if parts == nil {
			out[home] = append(out[home], a)
			continue
		}
		for i, n := range parts {
			if n > 0 {
				part := a
				part.Count = n
				out[live[i].ID] = append(out[live[i].ID], part)
			}
		}
	}
	return out
}

// splitCandidates returns the home first (a candidate whatever its state:
// an entry for it is made if cands lacks one), then the RUNNING others by
// ID.
func splitCandidates(home string, cands []Candidate) []Candidate {
	live := []Candidate{{ID: home}}
	for _, c := range cands {
		switch {
		case c.ID == home:
			live[0] = c
		case c.State.Routable():
			live = append(live, c)
		}
	}
	slices.SortFunc(live[1:], func(a, b Candidate) int { return cmp.Compare(a.ID, b.ID) })
	return live
}

// localityScores scores each candidate by what of loc it holds (a node
// 2, a rack 1); nil when none holds any.
func localityScores(loc scheduler.Locality, live []Candidate) []uint64 {
	var scores []uint64
	for i, c := range live {
		score := uint64(0)
		for _, n := range loc.Nodes {
			if c.Nodes[n] {
				score += 2
			}
		}
		for _, r := range loc.Racks {
			if c.Racks[r] {
				score++
			}
		}
		if score > 0 {
			if scores == nil {
				scores = make([]uint64, len(live))
			}
			scores[i] = score
		}
	}
	return scores
}

// narrow is loc with only the nodes and racks c holds.
func narrow(loc scheduler.Locality, c Candidate) scheduler.Locality {
	out := scheduler.Locality{Relax: loc.Relax}
	for _, n := range loc.Nodes {
		if c.Nodes[n] {
			out.Nodes = append(out.Nodes, n)
		}
	}
	for _, r := range loc.Racks {
		if c.Racks[r] {
			out.Racks = append(out.Racks, r)
		}
	}
	return out
}

// fit is how many of a's containers c's headroom (capacity less use,
// pending demand and what was routed to it since its last report) holds,
// at most a.Count (and 2³⁰, so that weight × fit summed over sub-clusters
// stays far inside 64 bits).
func fit(c Candidate, a scheduler.Ask) int {
	free := c.Capacity.Sub(c.Used).Sub(c.Pending).Sub(c.Routed)
	n := min(int64(a.Count), 1<<30)
	for _, name := range a.Resources.Names() {
		need := a.Resources.Get(name)
		if need <= 0 {
			continue
		}
		n = min(n, max(0, free.Get(name))/need)
	}
	return int(n)
}

// apportion divides n between scores in proportion, by largest remainder
// (ties to the lower index): nil when every score is 0.
func apportion(n int, scores []uint64) []int {
	var sum uint64
	for _, s := range scores {
		sum += s // weight ≤ MaxWeight times fit ≤ 2³⁰: far from overflow
	}
	if sum == 0 {
		return nil
	}
	parts := make([]int, len(scores))
	rems := make([]uint64, len(scores))
	given := 0
	for i, s := range scores {
		hi, lo := bits.Mul64(uint64(n), s)
		q, r := bits.Div64(hi, lo, sum) // n·s/sum ≤ n: no overflow
		parts[i], rems[i] = int(q), r
		given += int(q)
	}
	order := make([]int, len(scores))
	for i := range order {
		order[i] = i
	}
	slices.SortStableFunc(order, func(a, b int) int { return cmp.Compare(rems[b], rems[a]) })
	for _, i := range order[:n-given] {
		parts[i]++
	}
	return parts
}
