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
//   - drf (YARN DominantResourceFairnessComparator): each side's resources
//     are ordered by its share of the cluster, largest (dominant) first,
//     and paired position by position; one whose dominant resource is
//     below its min share first; two such by usage ÷ min share pair by
//     pair; otherwise by cluster share ÷ weight pair by pair;
//
// and ties go to the earlier start, then the name.
func Less(p Policy, a, b *Schedulable, cluster Resources) bool {
	var c int
	switch p {
	case PolicyFair:
		c = compareFair(a, b)
	case PolicyDRF:
		c = compareDRF(a, b, cluster)
	case PolicyCapacity:
		c = compareCapacity(a, b)
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

// drfShare is one resource of a schedulable as the DRF comparator sees it.
type drfShare struct {
	name  string  // extended resources only: memory and vcores sort first by rank
	rank  int     // 0 memory, 1 vcores, 2 extended
	share float64 // usage as a fraction of the cluster
	used  int64
	min   int64
}

// before orders resources by cluster share, largest first; ties go to
// memory, then vcores, then extended resources by name.
func (x *drfShare) before(y *drfShare) bool {
	if x.share != y.share {
		return x.share > y.share
	}
	if x.rank != y.rank {
		return x.rank < y.rank
	}
	return x.name < y.name
}

// drfShares holds a schedulable's resources in DRF order (its dominant
// resource first) without allocating, for clusters with up to six extended
// resources; with more, the resources of the smallest shares are dropped.
type drfShares struct {
	v [8]drfShare
	n int
}

func (l *drfShares) add(x drfShare) {
	i := l.n
	if l.n == len(l.v) {
		if !x.before(&l.v[l.n-1]) {
			return
		}
		i = l.n - 1
	} else {
		l.n++
	}
	for i > 0 && x.before(&l.v[i-1]) {
		l.v[i] = l.v[i-1]
		i--
	}
	l.v[i] = x
}

// drfOrder returns s's resources of the cluster in DRF order.
func drfOrder(s *Schedulable, cluster Resources) drfShares {
	var l drfShares
	if cluster.MemoryMB > 0 {
		l.add(drfShare{rank: 0, share: float64(s.Usage.MemoryMB) / float64(cluster.MemoryMB), used: s.Usage.MemoryMB, min: s.Min.MemoryMB})
	}
	if cluster.Vcores > 0 {
		l.add(drfShare{rank: 1, share: float64(s.Usage.Vcores) / float64(cluster.Vcores), used: s.Usage.Vcores, min: s.Min.Vcores})
	}
	for name, t := range cluster.Extended {
		if t > 0 {
			u := s.Usage.Extended[name]
			l.add(drfShare{name: name, rank: 2, share: float64(u) / float64(t), used: u, min: s.Min.Extended[name]})
		}
	}
	return l
}

// needy reports whether usage of the dominant resource is below its min
// share (a resource without a min share is never needy).
func (l *drfShares) needy() bool {
	return l.n > 0 && l.v[0].used < l.v[0].min
}

// compareDRF is YARN's DominantResourceFairnessComparator(N): each side's
// resources in its own DRF order are paired position by position (the
// dominant resource of a with the dominant resource of b, and so on). A
// side below its min share in its dominant resource comes first; two such
// sides compare usage ÷ min share pair by pair; otherwise cluster share ÷
// weight, pair by pair. The first difference decides. As in YARN, a
// resource with no min share gives +Inf (used) or no order (unused).
func compareDRF(a, b *Schedulable, cluster Resources) int {
	if len(cluster.Extended) == 0 && cluster.MemoryMB > 0 && cluster.Vcores > 0 {
		return compareDRF2(a, b, cluster)
	}
	return compareDRFN(a, b, cluster)
}

// compareDRFN is compareDRF for any cluster.
func compareDRFN(a, b *Schedulable, cluster Resources) int {
	la, lb := drfOrder(a, cluster), drfOrder(b, cluster)
	needy := la.needy()
	if c := needyFirst(needy, lb.needy()); c != 0 {
		return c
	}
	wa, wb := weightOf(a), weightOf(b)
	for i := 0; i < la.n && i < lb.n; i++ {
		x, y := &la.v[i], &lb.v[i]
		if c := comparePair(needy, x.used, x.min, y.used, y.min, x.share/wa, y.share/wb); c != 0 {
			return c
		}
	}
	return 0
}

// needyFirst orders a side below its min share before one that is not.
func needyFirst(needyA, needyB bool) int {
	switch {
	case needyA && !needyB:
		return -1
	case needyB && !needyA:
		return 1
	}
	return 0
}

// comparePair compares the i-th resources of two sides in their DRF
// orders: usage ÷ min share when both are below their min share (needy),
// else their weighted cluster shares wa and wb.
func comparePair(needy bool, usedA, minA, usedB, minB int64, wa, wb float64) int {
	if needy {
		return sign(float64(usedA)/float64(minA) - float64(usedB)/float64(minB))
	}
	return sign(wa - wb)
}

// drfPair is a schedulable's memory and vcores in DRF order, for clusters
// with no extended resource: compareDRF's hot path.
type drfPair struct {
	share      [2]float64
	used, minv [2]int64
}

func drfPairOf(s *Schedulable, cluster Resources) drfPair {
	m := float64(s.Usage.MemoryMB) / float64(cluster.MemoryMB)
	v := float64(s.Usage.Vcores) / float64(cluster.Vcores)
	if v > m { // ties: memory first
		return drfPair{[2]float64{v, m}, [2]int64{s.Usage.Vcores, s.Usage.MemoryMB}, [2]int64{s.Min.Vcores, s.Min.MemoryMB}}
	}
	return drfPair{[2]float64{m, v}, [2]int64{s.Usage.MemoryMB, s.Usage.Vcores}, [2]int64{s.Min.MemoryMB, s.Min.Vcores}}
}

// compareDRF2 is compareDRFN for a cluster of memory and vcores only,
// without its sorting and copying: the scheduling pass's hot path.
func compareDRF2(a, b *Schedulable, cluster Resources) int {
	x, y := drfPairOf(a, cluster), drfPairOf(b, cluster)
	needy := x.used[0] < x.minv[0]
	if c := needyFirst(needy, y.used[0] < y.minv[0]); c != 0 {
		return c
	}
	wa, wb := weightOf(a), weightOf(b)
	for i := 0; i < 2; i++ {
		if c := comparePair(needy, x.used[i], x.minv[i], y.used[i], y.minv[i], x.share[i]/wa, y.share[i]/wb); c != 0 {
			return c
		}
	}
	return 0
}
