package scheduler

import "math"

// Schedulable is a queue or an app as an ordering policy sees it.
type Schedulable struct {
	Name     string
	Weight   float64
	Usage    Resources // guaranteed resources in use
	Demand   Resources // usage plus what is still asked for
	Min      Resources // min share (queues; zero for apps)
	Priority int32     // apps only: higher first, before any policy
	Start    uint64    // submission order (Raft index of the oldest app)
}

// Less reports whether policy p serves a before b (SPEC §9):
//
//   - fifo: earlier start first;
//   - fair (memory only, YARN FairShareComparator): one below its min
//     share (capped by its demand) first; two below it by usage/min ratio;
//     otherwise by usage/weight;
//   - drf (YARN DominantResourceFairnessComparator): one whose dominant
//     resource is below its min share first; then by weighted dominant
//     share of the cluster, then the next-largest share, and so on;
//
// and ties go to the earlier start, then the name.
func Less(p Policy, a, b *Schedulable, cluster Resources) bool {
	var c int
	switch p {
	case PolicyFair:
		c = compareFair(a, b)
	case PolicyDRF:
		c = compareDRF(a, b, cluster)
	}
	if c != 0 {
		return c < 0
	}
	if a.Start != b.Start {
		return a.Start < b.Start
	}
	return a.Name < b.Name
}

func sign(f float64) int {
	switch {
	case f < 0:
		return -1
	case f > 0:
		return 1
	}
	return 0
}

func compareFair(a, b *Schedulable) int {
	minA := float64(min(a.Min.MemoryMB, a.Demand.MemoryMB))
	minB := float64(min(b.Min.MemoryMB, b.Demand.MemoryMB))
	useA, useB := float64(a.Usage.MemoryMB), float64(b.Usage.MemoryMB)
	needyA, needyB := useA < minA, useB < minB
	switch {
	case needyA && !needyB:
		return -1
	case needyB && !needyA:
		return 1
	case needyA && needyB:
		return sign(useA/math.Max(minA, 1) - useB/math.Max(minB, 1))
	}
	return sign(useA/weightOf(a) - useB/weightOf(b))
}

func weightOf(s *Schedulable) float64 {
	if s.Weight <= 0 {
		return math.SmallestNonzeroFloat64
	}
	return s.Weight
}

// shareList holds a schedulable's per-resource shares, largest first,
// without allocating for clusters with up to six extended resources.
type shareList struct {
	v [8]float64
	n int
}

func (l *shareList) add(f float64) {
	if l.n == len(l.v) {
		return
	}
	i := l.n
	for i > 0 && l.v[i-1] < f {
		l.v[i] = l.v[i-1]
		i--
	}
	l.v[i] = f
	l.n++
}

// shares returns usage as a fraction of total for every resource of total,
// divided by weight, largest first.
func shares(usage, total Resources, weight float64) shareList {
	var l shareList
	if total.MemoryMB > 0 && total.MemoryMB != Unlimited {
		l.add(float64(usage.MemoryMB) / float64(total.MemoryMB) / weight)
	}
	if total.Vcores > 0 && total.Vcores != Unlimited {
		l.add(float64(usage.Vcores) / float64(total.Vcores) / weight)
	}
	for name, t := range total.Extended {
		if t > 0 && t != Unlimited {
			l.add(float64(usage.Extended[name]) / float64(t) / weight)
		}
	}
	return l
}

// dominantMinShareRatio is usage/min of the resource that dominates usage
// with respect to the cluster; +Inf when that resource has no min share.
func dominantMinShareRatio(s *Schedulable, cluster Resources) float64 {
	best, bestShare := "", -1.0
	consider := func(name string, used, total int64) {
		if total > 0 {
			if sh := float64(used) / float64(total); sh > bestShare {
				best, bestShare = name, sh
			}
		}
	}
	consider(ResourceMemoryMB, s.Usage.MemoryMB, cluster.MemoryMB)
	consider(ResourceVcores, s.Usage.Vcores, cluster.Vcores)
	for name, t := range cluster.Extended {
		consider(name, s.Usage.Extended[name], t)
	}
	m := s.Min.Get(best)
	if m <= 0 {
		return math.Inf(1)
	}
	return float64(s.Usage.Get(best)) / float64(m)
}

func compareDRF(a, b *Schedulable, cluster Resources) int {
	needyA := dominantMinShareRatio(a, cluster) < 1
	needyB := dominantMinShareRatio(b, cluster) < 1
	switch {
	case needyA && !needyB:
		return -1
	case needyB && !needyA:
		return 1
	case needyA && needyB:
		return compareShareLists(shares(a.Usage, a.Min, 1), shares(b.Usage, b.Min, 1))
	}
	return compareShareLists(shares(a.Usage, cluster, weightOf(a)), shares(b.Usage, cluster, weightOf(b)))
}

func compareShareLists(a, b shareList) int {
	for i := 0; i < a.n && i < b.n; i++ {
		if c := sign(a.v[i] - b.v[i]); c != 0 {
			return c
		}
	}
	return 0
}
