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
// preempted. Each user of a leaf is held to a user limit (userlimit.go),
// and its AM containers to maximum_am_resource_percent of it.

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

// Defaults of a capacity queue's limits, YARN's.
const (
	DefaultMaxCapacity             = 100.0
	DefaultUserLimitFactor         = 1.0
	DefaultMinimumUserLimitPercent = 100.0
	// DefaultMaximumAMResourcePercent is the fraction of a capacity leaf
	// that its apps' AM containers may hold (YARN's
	// maximum-am-resource-percent, which despite its name is a fraction).
	DefaultMaximumAMResourcePercent = 0.1
	// UserLimitOff as user_limit_factor caps a user only at the leaf's max
	// capacity; as max_capacity it means 100, as YARN writes both.
	UserLimitOff   = -1.0
	MaxCapacityOff = -1.0
	// capacitySumSlack is how far from 100 siblings' capacities may sum
	// (decimal percentages such as 33.3 + 33.3 + 33.4).
	capacitySumSlack = 1e-6
)

// CapacityLimits are a capacity queue's limits as configured (percent of
// its parent) and as fractions of its subtree's root.
type CapacityLimits struct {
	Capacity        float64 // percent of the parent
	MaxCapacity     float64 // percent of the parent
	UserLimitFactor float64 // UserLimitOff: no user limit short of max capacity
	// MinimumUserLimitPercent is the least percent of the leaf's current
	// capacity each active user's limit gives (user limits: userlimit.go).
	MinimumUserLimitPercent float64
	// MaximumAMResourcePercent is the fraction of the leaf its AM
	// containers may hold (holdAMs), inherited down the subtree.
	MaximumAMResourcePercent float64
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
			"user_limit_factor": q.UserLimitFactor != nil, "minimum_user_limit_percent": q.MinimumUserLimitPercent != nil} {
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
		case q.MaxCapacity != nil && *q.MaxCapacity != MaxCapacityOff && !(*q.MaxCapacity >= *q.Capacity && *q.MaxCapacity <= 100):
			add("max_capacity", "must be between capacity (%v) and 100, or -1 (100), not %v", *q.Capacity, *q.MaxCapacity)
		}
		if f := q.UserLimitFactor; f != nil && !(*f > 0 && !math.IsInf(*f, 0) || *f == UserLimitOff) {
			add("user_limit_factor", "must be a positive number, or -1 (no user limit short of max_capacity), not %v", *f)
		}
		if p := q.MinimumUserLimitPercent; p != nil && !(*p > 0 && *p <= 100) {
			add("minimum_user_limit_percent", "must be more than 0 and at most 100, not %v", *p)
		}
		if q.MaxAMShare != nil {
			add("max_am_share", "capacity queues limit their AMs with maximum_am_resource_percent instead")
		}
		if !q.MinResources.IsZero() {
			add("min_resources", "capacity queues are guaranteed their capacity instead")
		}
		if q.FairSharePreemptionTimeout != nil || q.MinSharePreemptionTimeout != nil || q.Preemptable != nil {
			add("", "capacity queues never preempt: preemption settings do not apply")
		}
	}
	if p := q.MaximumAMResourcePercent; p != nil {
		switch {
		case !in && q.Type != QueueCapacity:
			add("maximum_am_resource_percent", "only capacity queues have it (fair queues have max_am_share)")
		case !(*p > 0 && *p <= 1):
			add("maximum_am_resource_percent", "must be a fraction more than 0 and at most 1 (YARN's 0.1 is 10%%), not %v", *p)
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
	amPercent := DefaultMaximumAMResourcePercent
	switch {
	case q.MaximumAMResourcePercent != nil:
		amPercent = *q.MaximumAMResourcePercent
	case inTree && parent.Capacity != nil:
		amPercent = parent.Capacity.MaximumAMResourcePercent
	case inTree && parent.capacityAMPercent > 0:
		amPercent = parent.capacityAMPercent
	}
	r.capacityAMPercent = amPercent
	if inTree {
		c := &CapacityLimits{Capacity: *q.Capacity, MaxCapacity: DefaultMaxCapacity, UserLimitFactor: DefaultUserLimitFactor,
			MinimumUserLimitPercent: DefaultMinimumUserLimitPercent, MaximumAMResourcePercent: amPercent}
		if q.MaxCapacity != nil && *q.MaxCapacity != MaxCapacityOff {
			c.MaxCapacity = *q.MaxCapacity
		}
		if q.UserLimitFactor != nil {
			c.UserLimitFactor = *q.UserLimitFactor
		}
		if q.MinimumUserLimitPercent != nil {
			c.MinimumUserLimitPercent = *q.MinimumUserLimitPercent
		}
		abs, absMax, root := 1.0, 1.0, parent.Path
		if pc := parent.Capacity; pc != nil {
			abs, absMax, root = pc.Abs, pc.AbsMax, pc.Root
		}
		c.Abs, c.AbsMax, c.Root = abs*c.Capacity/100, absMax*c.MaxCapacity/100, root
		r.Capacity = c
		r.MaxAMShare = amPercent
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
	// It orders siblings at every step of a pass: no allocation (Names
	// would make a slice each call).
	use, over := 0.0, false
	visit := func(used, guaranteed int64) {
		switch {
		case guaranteed > 0:
			use = math.Max(use, float64(used)/float64(guaranteed))
		case used > 0:
			over = true
		}
	}
	visit(s.Usage.MemoryMB, s.Min.MemoryMB)
	visit(s.Usage.Vcores, s.Min.Vcores)
	for k, g := range s.Min.Extended {
		visit(s.Usage.Extended[k], g)
	}
	for k, u := range s.Usage.Extended {
		if _, ok := s.Min.Extended[k]; !ok {
			visit(u, 0)
		}
	}
	if over {
		return math.Inf(1)
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
