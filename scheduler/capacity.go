package scheduler

import (
	"fmt"
	"math"
)

// Capacity queues (SPEC §19, seed 003): a subtree with YARN Capacity
// Scheduler semantics instead of fair sharing. Each queue below a queue of
// type capacity is guaranteed `capacity` percent of its parent's
// capacity; a freed slot goes to the child using least of its capacity
// (used ÷ capacity, of its dominant resource); inside a leaf, apps are
// served FIFO by priority, then submission. Capacity a queue leaves idle
// is lent to its busy siblings up to their `max_capacity` and comes back
// as their containers finish: capacity queues never preempt nor are
// preempted. One user's containers in a leaf may use at most
// `user_limit_factor` × the leaf's capacity.

// QueueType says how a queue shares among its children.
type QueueType string

// The queue types: fair (the default; SPEC §7) and capacity.
const (
	QueueFair     QueueType = "fair"
	QueueCapacity QueueType = "capacity"
)

// PolicyCapacity orders the children of a capacity queue: least used ÷
// capacity first. It is never configured; Resolve gives it to the queues
// of a capacity subtree that have children.
const PolicyCapacity Policy = "capacity"

// Defaults of a capacity queue's limits.
const (
	DefaultMaxCapacity     = 100.0
	DefaultUserLimitFactor = 1.0
	// capacitySumSlack is how far from 100 siblings' capacities may sum
	// (decimal percentages such as 33.3 + 33.3 + 33.4).
	capacitySumSlack = 1e-6
)

// CapacityLimits are a capacity queue's limits as configured (percent of
// its parent) and as fractions of its subtree's root.
type CapacityLimits struct {
	Capacity        float64 // percent of the parent
	MaxCapacity     float64 // percent of the parent
	UserLimitFactor float64
	// Abs and AbsMax are the capacity and max capacity as fractions of
	// the capacity subtree's root (Root): products down the tree.
	Abs, AbsMax float64
	Root        string
}

// validateCapacity checks q's capacity fields: below a queue of type
// capacity (in) each queue sets capacity and may set max_capacity and
// user_limit_factor; elsewhere none may. A capacity parent's children's
// capacities sum to 100.
func validateCapacity(q *QueueSpec, path string, in bool) []*FieldError {
	var errs []*FieldError
	add := func(f, format string, a ...any) {
		errs = append(errs, &FieldError{Queue: path, Field: f, Reason: fmt.Sprintf(format, a...)})
	}
	if !in {
		for f, set := range map[string]bool{"capacity": q.Capacity != nil, "max_capacity": q.MaxCapacity != nil,
			"user_limit_factor": q.UserLimitFactor != nil} {
			if set {
				add(f, "only queues below a queue of type \"capacity\" have it")
			}
		}
	} else {
		switch {
		case q.Type == QueueFair:
			add("type", "a capacity subtree cannot hold a fair one")
		case q.Capacity == nil:
			add("capacity", "required below a queue of type \"capacity\" (percent of the parent)")
		case !(*q.Capacity > 0 && *q.Capacity <= 100):
			add("capacity", "must be more than 0 and at most 100 (percent of the parent), not %v", *q.Capacity)
		case q.MaxCapacity != nil && !(*q.MaxCapacity >= *q.Capacity && *q.MaxCapacity <= 100):
			add("max_capacity", "must be between capacity (%v) and 100, not %v", *q.Capacity, *q.MaxCapacity)
		}
		if f := q.UserLimitFactor; f != nil && !(*f > 0) || f != nil && math.IsInf(*f, 0) {
			add("user_limit_factor", "must be a positive number, not %v", *f)
		}
		if !q.MinResources.IsZero() {
			add("min_resources", "capacity queues are guaranteed their capacity instead")
		}
		if q.FairSharePreemptionTimeout != nil || q.MinSharePreemptionTimeout != nil || q.Preemptable != nil {
			add("", "capacity queues never preempt: preemption settings do not apply")
		}
	}
	if (in || q.Type == QueueCapacity) && len(q.Children) > 0 {
		sum := 0.0
		for _, ch := range q.Children {
			if ch != nil && ch.Capacity != nil {
				sum += *ch.Capacity
			}
		}
		if math.Abs(sum-100) > capacitySumSlack {
			add("", "the capacities of its children sum to %v, not 100", sum)
		}
	}
	return errs
}

// resolveCapacity sets r's capacity type and limits from q and its
// resolved parent: a capacity queue's children are ordered by capacity,
// its leaves' apps FIFO, and none of them preempts.
func resolveCapacity(q *QueueSpec, r, parent *Queue) {
	inTree := parent != nil && parent.Type == QueueCapacity
	if !inTree && q.Type != QueueCapacity {
		return
	}
	r.Type = QueueCapacity
	if inTree {
		c := &CapacityLimits{Capacity: *q.Capacity, MaxCapacity: DefaultMaxCapacity, UserLimitFactor: DefaultUserLimitFactor}
		if q.MaxCapacity != nil {
			c.MaxCapacity = *q.MaxCapacity
		}
		if q.UserLimitFactor != nil {
			c.UserLimitFactor = *q.UserLimitFactor
		}
		abs, absMax, root := 1.0, 1.0, parent.Path
		if pc := parent.Capacity; pc != nil {
			abs, absMax, root = pc.Abs, pc.AbsMax, pc.Root
		}
		c.Abs, c.AbsMax, c.Root = abs*c.Capacity/100, absMax*c.MaxCapacity/100, root
		r.Capacity = c
	}
	r.Preemptable = false
	r.FairSharePreemptionTimeout, r.MinSharePreemptionTimeout = 0, 0
	if len(q.Children) > 0 {
		r.Policy = PolicyCapacity
	} else {
		r.Policy = PolicyFIFO
	}
}

// compareCapacity orders two capacity queues by how much of its capacity
// (Min: the guaranteed resources) each uses, of its dominant resource;
// one with no capacity left to guarantee comes last.
func compareCapacity(a, b *Schedulable) int {
	return sign(capacityUse(a) - capacityUse(b))
}

func capacityUse(s *Schedulable) float64 {
	use := 0.0
	for _, name := range s.Usage.Add(s.Min).Names() {
		used, guaranteed := s.Usage.Get(name), s.Min.Get(name)
		switch {
		case guaranteed > 0:
			use = math.Max(use, float64(used)/float64(guaranteed))
		case used > 0:
			return math.Inf(1)
		}
	}
	return use
}

// UsedOf is how much of guaranteed used uses, of its dominant resource
// among those guaranteed (1: all of it; more while a capacity queue
// borrows). A resource guaranteed none (a small cluster's share rounded
// down) is left out; nothing guaranteed at all is 0.
func UsedOf(used, guaranteed Resources) float64 {
	use := 0.0
	for _, name := range guaranteed.Names() {
		if g := guaranteed.Get(name); g > 0 {
			use = math.Max(use, float64(used.Get(name))/float64(g))
		}
	}
	return use
}
