package scheduler

import "math"

// Shareable is one participant in a fair-share division: a queue among its
// siblings, or an app in its leaf.
type Shareable struct {
	Weight float64
	Min    Resources
	Max    *Resources // nil: unlimited
}

// ComputeShares divides total among the participants by water-filling
// (seed 002, YARN ComputeFairShares), separately for every resource in
// total: it finds the weight-to-resource ratio R at which the participants'
// shares, each weight×R clamped to [min, max], add up to total. When the
// maxima add up to less than total, everyone gets their max; when the
// minima add up to more, everyone gets their min. Shares are whole units,
// rounded down.
func ComputeShares(parts []Shareable, total Resources) []Resources {
	out := make([]Resources, len(parts))
	for _, name := range total.Names() {
		shares := computeShares(parts, name, total.Get(name))
		for i, v := range shares {
			out[i] = out[i].With(name, v)
		}
	}
	return out
}

func maxOf(p Shareable, name string) float64 {
	if p.Max == nil {
		return math.Inf(1)
	}
	return float64(p.Max.Get(name))
}

func shareAt(p Shareable, name string, r float64) float64 {
	s := p.Weight * r
	if min := float64(p.Min.Get(name)); s < min {
		s = min
	}
	if max := maxOf(p, name); s > max {
		s = max
	}
	return s
}

func computeShares(parts []Shareable, name string, total int64) []int64 {
	out := make([]int64, len(parts))
	if len(parts) == 0 {
		return out
	}
	t := float64(total)
	// Everyone fits under their max: give each its max.
	sumMax := 0.0
	for _, p := range parts {
		sumMax += maxOf(p, name)
	}
	if sumMax <= t {
		for i, p := range parts {
			out[i] = int64(maxOf(p, name))
		}
		return out
	}
	used := func(r float64) float64 {
		sum := 0.0
		for _, p := range parts {
			sum += shareAt(p, name, r)
		}
		return sum
	}
	// Find an upper bound for R, then bisect.
	hi := 1.0
	for used(hi) < t && hi < 1e18 {
		hi *= 2
	}
	lo := 0.0
	for i := 0; i < 64; i++ {
		mid := (lo + hi) / 2
		if used(mid) < t {
			lo = mid
		} else {
			hi = mid
		}
	}
	for i, p := range parts {
		out[i] = int64(math.Floor(shareAt(p, name, hi) + 1e-9))
	}
	return out
}

// QueueShares holds fair shares by queue path.
type QueueShares struct {
	Steady        map[string]Resources
	Instantaneous map[string]Resources
}

// ComputeQueueShares computes every queue's steady fair share (the cluster
// divided among all queues by weight, recursively) and instantaneous fair
// share (the same among active queues only; inactive queues get nothing).
// queues must be in tree order, parents before children (as Resolve
// returns them); active says which leaves have runnable apps.
func ComputeQueueShares(queues []*Queue, cluster Resources, active map[string]bool) QueueShares {
	qs := QueueShares{Steady: map[string]Resources{}, Instantaneous: map[string]Resources{}}
	byPath := make(map[string]*Queue, len(queues))
	for _, q := range queues {
		byPath[q.Path] = q
	}
	// A parent is active when any leaf below it is.
	isActive := map[string]bool{}
	for i := len(queues) - 1; i >= 0; i-- {
		q := queues[i]
		if q.IsLeaf() {
			isActive[q.Path] = active[q.Path]
		}
		if isActive[q.Path] && q.Parent != "" {
			isActive[q.Parent] = true
		}
	}
	for _, q := range queues {
		if q.Parent == "" {
			root := cluster
			if q.MaxResources != nil {
				root = root.CapBy(*q.MaxResources)
			}
			qs.Steady[q.Path] = root
			if isActive[q.Path] {
				qs.Instantaneous[q.Path] = root
			} else {
				qs.Instantaneous[q.Path] = Resources{}
			}
		}
		if q.IsLeaf() {
			continue
		}
		if q.Type == QueueCapacity {
			// A capacity queue's children: their capacity, active or not
			// (it is guaranteed, and what `queue list` shows as the share).
			for _, c := range q.Children {
				cq := byPath[c]
				share := qs.Steady[cq.Capacity.Root].ScaleFloat(cq.Capacity.Abs)
				qs.Steady[c], qs.Instantaneous[c] = share, share
			}
			continue
		}
		children := make([]*Queue, len(q.Children))
		parts := make([]Shareable, len(q.Children))
		var activeParts []Shareable
		var activeIdx []int
		for i, c := range q.Children {
			children[i] = byPath[c]
			parts[i] = Shareable{Weight: children[i].Weight, Min: children[i].MinResources, Max: children[i].MaxResources}
			if isActive[c] {
				activeParts = append(activeParts, parts[i])
				activeIdx = append(activeIdx, i)
			}
		}
		steady := ComputeShares(parts, qs.Steady[q.Path])
		for i, c := range children {
			qs.Steady[c.Path] = steady[i]
			qs.Instantaneous[c.Path] = Resources{}
		}
		inst := ComputeShares(activeParts, qs.Instantaneous[q.Path])
		for k, i := range activeIdx {
			qs.Instantaneous[children[i].Path] = inst[k]
		}
	}
	return qs
}
