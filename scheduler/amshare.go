package scheduler

import (
	"fmt"
	"math"
	"sort"
)

// amLimit is the most the AM containers of leaf q may hold (SPEC §7, YARN
// FSLeafQueue.computeMaxAMResource): max_am_share × the leaf's
// instantaneous fair share, per resource of the cluster, rounded up so that
// an AM can run when the share is a single vcore. Where that fair share is
// 0, min(cluster free, the queue's max_resources) stands in for it.
func amLimit(q *Queue, fair, free, cluster Resources) Resources {
	var out Resources
	for _, name := range cluster.Names() {
		v := fair.Get(name)
		if v == 0 {
			v = free.Get(name)
			if m, ok := limitOf(q.MaxResources, name); ok {
				v = min(v, m)
			}
		}
		// Rounded up, less float noise: 0.3 × 10 is 3, not 4.
		out = out.With(name, int64(math.Ceil(float64(max(v, 0))*q.MaxAMShare-1e-9)))
	}
	return out
}

// limitOf returns the named component of a max_resources limit and whether
// it constrains (see Resources.WithinLimit).
func limitOf(limit *Resources, name string) (int64, bool) {
	if limit == nil {
		return 0, false
	}
	var v int64
	switch name {
	case ResourceMemoryMB:
		v = limit.MemoryMB
	case ResourceVcores:
		v = limit.Vcores
	default:
		var ok bool
		if v, ok = limit.Extended[name]; !ok {
			return 0, false
		}
	}
	return v, v != Unlimited
}

// freeOf is the guaranteed room left on nodes.
func freeOf(nodes []*candidate) Resources {
	var free Resources
	for _, n := range nodes {
		free = free.Add(n.free)
	}
	return free
}

// amsPending reports whether some runnable app waits for its AM container
// in a leaf with a max_am_share, so that holdAMs has work to do.
func (t *tree) amsPending() bool {
	for _, a := range t.apps {
		if a.runnable && a.app.AMPending && a.queue.queue.MaxAMShare != MaxAMShareOff {
			return true
		}
	}
	return false
}

// holdAMs applies max_am_share (YARN FSLeafQueue.canRunAppAM): in each leaf
// with a limit, the runnable apps waiting for their AM container are
// admitted by app priority (highest first), then submission order, while
// the leaf's AM usage (the AMs its apps hold, plus those admitted) stays
// within the leaf's amLimit; the others are held: they keep their place in
// fair shares (they are runnable), but their AM is no longer pending
// demand, so no pass tries to place it and no preemption is done for it —
// room freed by preemption would not let it run. free is the cluster's
// guaranteed room now.
func (t *tree) holdAMs(shares QueueShares, cluster, free Resources) {
	held := false
	for _, q := range t.byPath {
		if !q.queue.IsLeaf() || q.queue.MaxAMShare == MaxAMShareOff {
			continue
		}
		var waiting []*appNode
		for _, a := range q.apps {
			if a.runnable && a.app.AMPending {
				waiting = append(waiting, a)
			}
		}
		if len(waiting) == 0 {
			continue
		}
		sort.SliceStable(waiting, func(i, j int) bool { return waiting[i].app.Spec.Priority > waiting[j].app.Spec.Priority })
		limit, setting := amLimit(q.queue, shares.Instantaneous[q.queue.Path], free, cluster), "max_am_share"
		if q.cap != nil {
			limit, setting = q.cap.amLimit(q.queue.MaxAMShare), "maximum_am_resource_percent"
		}
		used := q.amUsage
		for _, a := range waiting {
			am := a.app.Spec.AMResources
			// A capacity leaf always lets one app run, however small its
			// AM limit (YARN's activateApplications).
			if used.Add(am).Fits(limit) || q.cap != nil && used.IsZero() {
				used = used.Add(am)
				continue
			}
			a.amHeld, held = true, true
			a.waiting = fmt.Sprintf("queue %s's AM containers hold %s of its AM limit %s (%s %g)",
				q.queue.Path, q.amUsage, limit, setting, q.queue.MaxAMShare)
			if ahead := used.Sub(q.amUsage); !ahead.IsZero() {
				a.waiting += fmt.Sprintf(", and the AMs of apps ahead of it will take %s more", ahead)
			}
			a.pending = a.pending.Sub(am)
			for p := q; p != nil; p = p.parent {
				p.pending = p.pending.Sub(am)
			}
		}
	}
	if held {
		t.resetStarts()
	}
}

// resetStarts recomputes each queue's oldest runnable app with pending work
// after pending demand changed.
func (t *tree) resetStarts() {
	for _, q := range t.byPath {
		q.start = ^uint64(0)
	}
	for _, a := range t.apps {
		if !a.runnable || a.pending.IsZero() {
			continue
		}
		for q := a.queue; q != nil; q = q.parent {
			q.start = min(q.start, a.app.CreateIndex)
		}
	}
	for _, q := range t.byPath {
		q.s.Start = q.start
	}
}
