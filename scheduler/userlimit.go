package scheduler

import "fmt"

// The user limit of a capacity leaf, computed as YARN's Capacity Scheduler
// computes it (LeafQueue.computeUserLimit, Hadoop 2.8):
//
//	capacity = the leaf's capacity, rounded up to the minimum allocation (at least one)
//	current  = capacity while the leaf uses less, else its use + one minimum allocation
//	limit    = max(current ÷ active users, current × minimum_user_limit_percent ÷ 100)
//	limit    = min(limit, capacity × user_limit_factor), rounded up to the minimum allocation
//
// A user is refused a container only while already above the limit, so a
// user may end one container past it (YARN's tests say so). A user is
// active while an app of theirs in the leaf has pending demand; the user
// asking counts as active. user_limit_factor -1 caps the limit at the
// leaf's max capacity instead (no user limit beyond the queue's own).
// Every resource is computed and compared on its own, where YARN's
// default resource calculator looks at memory alone.

// capLeaf is what a pass knows of a capacity leaf's limits and users.
type capLeaf struct {
	capacity Resources // guaranteed, rounded up to minAlloc, at least minAlloc
	max      Resources // max capacity, rounded down to minAlloc, at least capacity
	minAlloc Resources
	percent  float64 // minimum_user_limit_percent
	factor   float64 // user_limit_factor; UserLimitOff: none
	users    map[string]*capUser
	active   int // users with pending demand
}

// capUser is one user's use of a capacity leaf: guaranteed containers and
// reservations, and what their runnable apps still ask for.
type capUser struct {
	used    Resources
	pending Resources
}

// newCapLeaf computes a capacity leaf's limits on a cluster whose basis
// (the capacity subtree root's steady share) is basis.
func newCapLeaf(c *CapacityLimits, basis, minAlloc Resources) *capLeaf {
	l := &capLeaf{minAlloc: minAlloc, percent: c.MinimumUserLimitPercent, factor: c.UserLimitFactor, users: map[string]*capUser{}}
	l.capacity, l.max = capacityBounds(c, basis, minAlloc)
	return l
}

// capacityBounds is a capacity queue's capacity, rounded up to the minimum
// allocation and at least one (YARN: multiplyAndNormalizeUp, then "allow
// progress for queues with miniscule capacity"), and its max capacity,
// rounded down but never below that capacity: a queue can always use what
// it is guaranteed.
func capacityBounds(c *CapacityLimits, basis, minAlloc Resources) (capacity, maxCapacity Resources) {
	capacity = zipWith(basis, minAlloc, func(_ string, b, step int64) int64 {
		return max(roundUp(int64(float64(b)*c.Abs+0.5), step), step)
	})
	maxCapacity = zipWith(basis, capacity, func(name string, b, capacity int64) int64 {
		return max(roundDown(int64(float64(b)*c.AbsMax), minAlloc.Get(name)), capacity)
	})
	return capacity, maxCapacity
}

// user returns the named user's record, made on first use.
func (l *capLeaf) user(name string) *capUser {
	u := l.users[name]
	if u == nil {
		u = &capUser{}
		l.users[name] = u
	}
	return u
}

// addDemand records that user's apps ask for pending more.
func (l *capLeaf) addDemand(user string, pending Resources) {
	u := l.user(user)
	was := !u.pending.IsZero()
	u.pending = u.pending.Add(pending)
	if !was && !u.pending.IsZero() {
		l.active++
	}
}

// placed records a container of r placed for user, which they no longer
// ask for.
func (l *capLeaf) placed(user string, r Resources) {
	u := l.user(user)
	u.used = u.used.Add(r)
	was := !u.pending.IsZero()
	u.pending = clampPositive(u.pending.Sub(r))
	if was && u.pending.IsZero() {
		l.active--
	}
}

// limit is user's limit while the leaf uses used.
func (l *capLeaf) limit(user string, used Resources) Resources {
	n := l.active
	if u := l.users[user]; u == nil || u.pending.IsZero() {
		n++ // the user asking counts as active
	}
	return zipWith(l.capacity, used, func(name string, capacity, used int64) int64 {
		step := l.minAlloc.Get(name)
		consumed := roundUp(used, step)
		current := capacity
		if consumed >= capacity {
			current = consumed + step
		}
		byUsers := ceilDiv(current, int64(n))
		byPercent := ceilDiv(int64(float64(current)*l.percent), 100)
		limit := max(byUsers, byPercent)
		if l.factor == UserLimitOff {
			limit = min(limit, l.max.Get(name))
		} else {
			limit = min(limit, int64(float64(capacity)*l.factor))
		}
		return roundUp(limit, step)
	})
}

// over reports whether user is above their limit while the leaf uses
// used: such a user gets no container.
func (l *capLeaf) over(user string, used Resources) bool {
	u := l.users[user]
	return u != nil && !u.used.Fits(l.limit(user, used))
}

// headroom is what user may still get in the leaf (YARN's headroom, as
// LeafQueue.getHeadroom computes it): the least of what their limit and
// the leaf's current limit leave, rounded down to the minimum allocation,
// and the cluster's free room; never negative.
func (l *capLeaf) headroom(user string, used, queueLimit, free Resources) Resources {
	var mine Resources
	if u := l.users[user]; u != nil {
		mine = u.used
	}
	limit := l.limit(user, used)
	return zipWith(limit.Sub(mine), queueLimit.Sub(used), func(name string, byUser, byQueue int64) int64 {
		h := roundDown(min(byUser, byQueue), l.minAlloc.Get(name))
		return max(0, min(h, free.Get(name)))
	})
}

// amLimit is what the leaf's AM containers may hold: maximum_am_resource_percent
// of its max capacity, rounded up to the minimum allocation (YARN's
// calculateAndGetAMResourceLimitPerPartition, where the queue's current
// limit is its max capacity).
func (l *capLeaf) amLimit(percent float64) Resources {
	return zipWith(l.max, l.minAlloc, func(_ string, m, step int64) int64 {
		return roundUp(int64(float64(m)*percent+0.5), step)
	})
}

// describe says why user gets nothing more, for WhyPending.
func (l *capLeaf) describe(q *Queue, user string, used Resources) string {
	limit := "user_limit_factor " + fmt.Sprint(l.factor) + " × its capacity"
	if l.factor == UserLimitOff {
		limit = "user_limit_factor -1: its max capacity"
	}
	return fmt.Sprintf("user %s uses %s, above queue %s's user limit %s (the larger of its capacity shared among %d active users and minimum_user_limit_percent %v, at most %s)",
		user, l.users[user].used, q.Path, l.limit(user, used), max(l.active, 1), l.percent, limit)
}

// zipWith returns the vector whose every component is f of a's and b's,
// over the resources either names.
func zipWith(a, b Resources, f func(name string, x, y int64) int64) Resources {
	out := Resources{MemoryMB: f(ResourceMemoryMB, a.MemoryMB, b.MemoryMB), Vcores: f(ResourceVcores, a.Vcores, b.Vcores)}
	for k, x := range a.Extended {
		out = out.With(k, f(k, x, b.Extended[k]))
	}
	for k, y := range b.Extended {
		if _, done := a.Extended[k]; !done {
			out = out.With(k, f(k, 0, y))
		}
	}
	return out
}

// roundUp rounds v up to a multiple of step (v itself when step is not
// positive), roundDown down.
func roundUp(v, step int64) int64 {
	if step <= 0 {
		return v
	}
	return ceilDiv(v, step) * step
}

func roundDown(v, step int64) int64 {
	if step <= 0 {
		return v
	}
	q := v / step
	if v%step != 0 && v < 0 {
		q--
	}
	return q * step
}

// ceilDiv is ⌈a ÷ b⌉ for positive b.
func ceilDiv(a, b int64) int64 {
	q := a / b
	if a%b != 0 && (a > 0) == (b > 0) {
		q++
	}
	return q
}

// Headrooms returns, for each active app in a capacity leaf, its headroom:
// what its user may still be given there (YARN's, as AM.Allocate answers
// it), the least of what the user's limit leaves them, what the leaf and
// each ancestor's max capacity leave, and the cluster's free room, rounded
// down to the minimum allocation. Apps of other queues have none.
func Headrooms(st State) map[string]Resources {
	nodes, _, cluster := readyNodes(st.Nodes())
	t := buildTree(st, cluster)
	free := freeOf(nodes)
	out := map[string]Resources{}
	for _, a := range t.apps {
		leaf := a.queue
		if leaf.cap == nil {
			continue
		}
		room := cluster
		for q := leaf; q != nil; q = q.parent {
			if q.max != nil {
				room = room.CapBy(q.max.Sub(q.usage))
			}
		}
		out[a.app.ID] = leaf.cap.headroom(a.app.Spec.User, leaf.usage, leaf.usage.Add(room), free)
	}
	return out
}
