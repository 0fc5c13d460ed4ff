package scheduler

import (
	"fmt"
	"math"
	"sort"
	"strings"
	"time"
)

// RootQueue is the name of the root of every queue tree.
const RootQueue = "root"

// DefaultQueue is the leaf that receives apps submitted without a queue.
const DefaultQueue = "root.default"

// Limits on the size of a queue configuration, so that a hostile or broken
// file cannot make every server allocate without bound.
const (
	MaxQueueDepth = 16
	MaxQueues     = 10000
)

// Policy orders the children (or, in a leaf, the apps) of a queue.
type Policy string

// The scheduling policies of SPEC §7 and §9.
const (
	PolicyFIFO Policy = "fifo"
	PolicyFair Policy = "fair" // by memory only
	PolicyDRF  Policy = "drf"  // Dominant Resource Fairness
)

// Valid reports whether p names a known policy.
func (p Policy) Valid() bool { return p == PolicyFIFO || p == PolicyFair || p == PolicyDRF }

// PlacementPolicy chooses among nodes that can take a guaranteed container.
type PlacementPolicy string

// Placement strategies: spread prefers the least allocated node, binpack the most.
const (
	PlacementSpread  PlacementPolicy = "spread"
	PlacementBinpack PlacementPolicy = "binpack"
)

// QueueConfig is the whole queue configuration: global scheduler settings
// and the queue tree. It is replaced atomically by `weft queue apply`.
type QueueConfig struct {
	Scheduler SchedulerConfig `codec:"scheduler"`
	Root      *QueueSpec      `codec:"root"`
}

// SchedulerConfig holds the global scheduler settings of SPEC §7.
type SchedulerConfig struct {
	Placement     PlacementPolicy     `codec:"placement"`
	Preemption    PreemptionConfig    `codec:"preemption"`
	Locality      LocalityConfig      `codec:"locality"`
	Opportunistic OpportunisticConfig `codec:"opportunistic"`
	Capacity      CapacityConfig      `codec:"capacity"`
}

// CapacityConfig holds what every capacity queue shares. Zero fields mean
// their defaults, so configurations written before they existed keep
// working.
type CapacityConfig struct {
	// MinimumAllocation is the step capacities and user limits are rounded
	// to (YARN's yarn.scheduler.minimum-allocation-mb and -vcores).
	// Containers are not rounded to it.
	MinimumAllocation Resources `codec:"minimum_allocation"`
	// ReservationTimeout is how long a node stays reserved for a container
	// that does not fit yet before it is given back (reservations.go).
	ReservationTimeout time.Duration `codec:"reservation_timeout"`
}

// Defaults of CapacityConfig.
var DefaultMinimumAllocation = Resources{MemoryMB: 1024, Vcores: 1}

const DefaultReservationTimeout = 5 * time.Minute

// MinAllocation is c's minimum allocation, or the default.
func (c CapacityConfig) MinAllocation() Resources {
	if c.MinimumAllocation.IsZero() {
		return DefaultMinimumAllocation
	}
	return c.MinimumAllocation
}

// ReservationWait is c's reservation timeout, or the default.
func (c CapacityConfig) ReservationWait() time.Duration {
	if c.ReservationTimeout <= 0 {
		return DefaultReservationTimeout
	}
	return c.ReservationTimeout
}

// PreemptionConfig holds the global fair-share preemption settings.
type PreemptionConfig struct {
	Enabled                     bool          `codec:"enabled"`
	ClusterUtilizationThreshold float64       `codec:"cluster_utilization_threshold"`
	WaitBeforeKill              time.Duration `codec:"wait_before_kill"`
}

// LocalityConfig holds the delay-scheduling thresholds.
type LocalityConfig struct {
	NodeDelay Delay `codec:"node_delay"`
	RackDelay Delay `codec:"rack_delay"`
}

// Delay is a delay-scheduling threshold: either a count of skipped
// scheduling opportunities or a duration. The zero Delay relaxes at once.
type Delay struct {
	Opportunities int           `codec:"opportunities"`
	Duration      time.Duration `codec:"duration"`
}

// String formats d as the count or the duration it holds.
func (d Delay) String() string {
	switch {
	case d.Duration > 0:
		return d.Duration.String()
	case d.Opportunities > 0:
		return fmt.Sprintf("%d", d.Opportunities)
	}
	return "0"
}

// QueueSpec is one queue of the configured tree. Optional properties are
// pointers: nil means "not set here", so that preemption properties can be
// inherited from the parent and max values can mean "unlimited".
type QueueSpec struct {
	Name                         string         `codec:"name"`
	Weight                       float64        `codec:"weight"`
	MinResources                 Resources      `codec:"min_resources"`
	MaxResources                 *Resources     `codec:"max_resources"`
	Policy                       Policy         `codec:"policy"`
	MaxRunningApps               *int           `codec:"max_running_apps"`
	Preemptable                  *bool          `codec:"preemptable"`
	FairSharePreemptionThreshold *float64       `codec:"fair_share_preemption_threshold"`
	FairSharePreemptionTimeout   *time.Duration `codec:"fair_share_preemption_timeout"`
	MinSharePreemptionTimeout    *time.Duration `codec:"min_share_preemption_timeout"`
	MaxAMShare                   *float64       `codec:"max_am_share"`
	Children                     []*QueueSpec   `codec:"children"`
	// Type "capacity" gives the queue's whole subtree YARN Capacity
	// Scheduler semantics (SPEC §19): every queue below it sets Capacity
	// (percent of its parent, siblings summing to 100) and may set
	// MaxCapacity [100] and UserLimitFactor [1].
	Type            QueueType `codec:"type,omitempty"`
	Capacity        *float64  `codec:"capacity,omitempty"`
	MaxCapacity     *float64  `codec:"max_capacity,omitempty"`
	UserLimitFactor *float64  `codec:"user_limit_factor,omitempty"`
	// MinimumUserLimitPercent [100] and MaximumAMResourcePercent [0.1,
	// inherited] are YARN's minimum-user-limit-percent and
	// maximum-am-resource-percent (capacity.go, userlimit.go).
	MinimumUserLimitPercent  *float64 `codec:"minimum_user_limit_percent,omitempty"`
	MaximumAMResourcePercent *float64 `codec:"maximum_am_resource_percent,omitempty"`
}

// max_am_share (SPEC §7): the fraction of a leaf's instantaneous fair share
// that its apps' AM containers may hold. DefaultMaxAMShare is root's
// default, which every queue inherits unless it sets its own;
// MaxAMShareOff turns the limit off.
const (
	DefaultMaxAMShare = 0.5
	MaxAMShareOff     = -1.0
)

// NewQueueSpec returns a queue with the SPEC §7 defaults: weight 1, fair
// policy, no limits, preemption properties inherited.
func NewQueueSpec(name string) *QueueSpec {
	return &QueueSpec{Name: name, Weight: 1, Policy: PolicyFair}
}

// DefaultSchedulerConfig returns the SPEC §7 global defaults.
func DefaultSchedulerConfig() SchedulerConfig {
	return SchedulerConfig{
		Placement: PlacementSpread,
		Preemption: PreemptionConfig{
			ClusterUtilizationThreshold: 0.8,
			WaitBeforeKill:              15 * time.Second,
		},
		Opportunistic: DefaultOpportunisticConfig(),
	}
}

// DefaultQueueConfig returns the initial configuration of a new cluster:
// root with a single leaf, root.default.
func DefaultQueueConfig() *QueueConfig {
	root := NewQueueSpec(RootQueue)
	root.Children = []*QueueSpec{NewQueueSpec("default")}
	return &QueueConfig{Scheduler: DefaultSchedulerConfig(), Root: root}
}

// FieldError is a validation failure of one field of one queue (Queue is
// the full path) or of the scheduler block (Queue is empty).
type FieldError struct {
	Queue  string
	Field  string
	Reason string
}

func (e *FieldError) Error() string {
	if e.Queue == "" {
		return fmt.Sprintf("scheduler %s: %s", e.Field, e.Reason)
	}
	if e.Field == "" {
		return fmt.Sprintf("queue %s: %s", e.Queue, e.Reason)
	}
	return fmt.Sprintf("queue %s: %s: %s", e.Queue, e.Field, e.Reason)
}

// Validate checks the whole configuration and returns every problem found,
// in tree order. A nil result means the configuration may be applied.
func (c *QueueConfig) Validate() []*FieldError {
	var errs []*FieldError
	add := func(q, f, format string, a ...any) {
		errs = append(errs, &FieldError{Queue: q, Field: f, Reason: fmt.Sprintf(format, a...)})
	}
	s := c.Scheduler
	if s.Placement != PlacementSpread && s.Placement != PlacementBinpack {
		add("", "placement", "must be %q or %q, not %q", PlacementSpread, PlacementBinpack, s.Placement)
	}
	if t := s.Preemption.ClusterUtilizationThreshold; !(t >= 0 && t <= 1) {
		add("", "preemption.cluster_utilization_threshold", "must be between 0 and 1, not %v", t)
	}
	if s.Preemption.WaitBeforeKill < 0 {
		add("", "preemption.wait_before_kill", "must not be negative")
	}
	for name, d := range map[string]Delay{"locality.node_delay": s.Locality.NodeDelay, "locality.rack_delay": s.Locality.RackDelay} {
		if d.Opportunities < 0 || d.Duration < 0 || d.Opportunities > 0 && d.Duration > 0 {
			add("", name, "must be one non-negative count or duration")
		}
	}
	o := s.Opportunistic
	switch {
	case o.SortingNodesInterval <= 0:
		add("", "opportunistic.sorting_nodes_interval", "must be positive")
	case o.NodesUsed < 1:
		add("", "opportunistic.nodes_used", "must be at least 1")
	case !(o.QueueLimitStdev >= 0) || math.IsInf(o.QueueLimitStdev, 0):
		add("", "opportunistic.queue_limit_stdev", "must be a non-negative number")
	case o.MinQueueLength < 0 || o.MaxQueueLength < o.MinQueueLength:
		add("", "opportunistic.min_queue_length", "must be between 0 and max_queue_length (%d)", o.MaxQueueLength)
	case o.LoadComparator != "" && o.LoadComparator != LoadQueueLength && o.LoadComparator != LoadQueueWaitTime:
		add("", "opportunistic.load_comparator", "must be %q or %q, not %q", LoadQueueLength, LoadQueueWaitTime, o.LoadComparator)
	case o.MaxAllocationsPerAMHeartbeat < 0:
		add("", "opportunistic.max_allocations_per_am_heartbeat", "must not be negative (0: no cap)")
	}
	if m := s.Capacity.MinimumAllocation; m.Validate() != nil || !m.IsZero() && (m.MemoryMB <= 0 || m.Vcores <= 0) {
		add("", "capacity.minimum_allocation", "must give positive memory_mb and vcores, not %s", m)
	}
	if s.Capacity.ReservationTimeout < 0 {
		add("", "capacity.reservation_timeout", "must not be negative")
	}
	sort.SliceStable(errs, func(i, j int) bool { return errs[i].Field < errs[j].Field })

	if c.Root == nil {
		add(RootQueue, "", "the configuration has no root queue")
		return errs
	}
	if c.Root.Name != RootQueue {
		add(c.Root.Name, "", "the top queue must be named %q", RootQueue)
	}
	count := 0
	capacityTree := map[string]bool{} // queues below a queue of type capacity
	var walk func(q *QueueSpec, path string, depth int)
	walk = func(q *QueueSpec, path string, depth int) {
		count++
		if depth > MaxQueueDepth {
			add(path, "", "the tree is deeper than %d levels", MaxQueueDepth)
			return
		}
		if !(q.Weight > 0) || math.IsInf(q.Weight, 0) {
			add(path, "weight", "must be a positive number, not %v", q.Weight)
		}
		if !q.Policy.Valid() {
			add(path, "policy", "must be fifo, fair or drf, not %q", q.Policy)
		}
		if q.Type != "" && q.Type != QueueFair && q.Type != QueueCapacity {
			add(path, "type", "must be fair or capacity, not %q", q.Type)
		}
		if err := q.MinResources.Validate(); err != nil {
			add(path, "min_resources", "%v", err)
		}
		if q.MaxResources != nil {
			if err := q.MaxResources.Validate(); err != nil {
				add(path, "max_resources", "%v", err)
			} else if !q.MinResources.WithinLimit(*q.MaxResources) {
				add(path, "min_resources", "%s exceeds max_resources %s", q.MinResources, *q.MaxResources)
			}
		}
		if q.MaxRunningApps != nil && *q.MaxRunningApps < 0 {
			add(path, "max_running_apps", "must not be negative")
		}
		if t := q.FairSharePreemptionThreshold; t != nil && !(*t >= 0 && *t <= 1) {
			add(path, "fair_share_preemption_threshold", "must be between 0 and 1, not %v", *t)
		}
		if t := q.FairSharePreemptionTimeout; t != nil && *t < 0 {
			add(path, "fair_share_preemption_timeout", "must not be negative")
		}
		if t := q.MinSharePreemptionTimeout; t != nil && *t < 0 {
			add(path, "min_share_preemption_timeout", "must not be negative")
		}
		if m := q.MaxAMShare; m != nil && !(*m == MaxAMShareOff || *m > 0 && *m <= 1) {
			add(path, "max_am_share", "must be more than 0 and at most 1, or -1 (off), not %v", *m)
		}
		errs = append(errs, validateCapacity(q, path, capacityTree[path])...)
		if q.Type == QueueCapacity || capacityTree[path] {
			for _, ch := range q.Children {
				if ch != nil {
					capacityTree[path+"."+ch.Name] = true
				}
			}
		}
		seen := make(map[string]bool, len(q.Children))
		for _, ch := range q.Children {
			if ch == nil {
				add(path, "", "has an empty child queue")
				continue
			}
			if err := ValidateQueueName(ch.Name); err != nil {
				add(path, "queue", "%v", err)
				continue
			}
			if seen[ch.Name] {
				add(path+"."+ch.Name, "", "is defined twice")
				continue
			}
			seen[ch.Name] = true
			walk(ch, path+"."+ch.Name, depth+1)
		}
	}
	walk(c.Root, RootQueue, 1)
	if count > MaxQueues {
		add(RootQueue, "", "the tree has %d queues, more than the limit of %d", count, MaxQueues)
	}
	return errs
}

// ValidateQueueName checks one path component: letters, digits, '_' and
// '-', at most 64 bytes. Dots separate components and are not allowed.
func ValidateQueueName(name string) error {
	if name == "" || len(name) > 64 {
		return fmt.Errorf("queue name %q must be 1 to 64 characters", name)
	}
	for _, c := range name {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c == '-') {
			return fmt.Errorf("queue name %q: use letters, digits, '_' and '-' only", name)
		}
	}
	return nil
}

// Queue is one queue of a resolved tree: its full path and its effective
// properties after inheritance and defaults.
type Queue struct {
	Path                         string
	Parent                       string // empty for root
	Depth                        int    // root is 0
	Children                     []string
	Weight                       float64
	MinResources                 Resources
	MaxResources                 *Resources // nil: unlimited
	Policy                       Policy
	MaxRunningApps               *int // nil: unlimited
	Preemptable                  bool
	FairSharePreemptionThreshold float64
	FairSharePreemptionTimeout   time.Duration // 0: off
	MinSharePreemptionTimeout    time.Duration // 0: off
	MaxAMShare                   float64       // MaxAMShareOff: off; counts in leaves only
	// Type is QueueCapacity for the root of a capacity subtree and every
	// queue below it; Capacity is set for the queues below it.
	Type     QueueType
	Capacity *CapacityLimits
	// capacityAMPercent is the maximum_am_resource_percent a capacity
	// subtree's root hands down (its queues below hold theirs in Capacity).
	capacityAMPercent float64
}

// IsLeaf reports whether apps may be submitted to q.
func (q *Queue) IsLeaf() bool { return len(q.Children) == 0 }

// Resolve flattens the tree in depth-first order (parents before children)
// with inheritance applied: unset preemption properties and max_am_share
// come from the parent, and root's from the SPEC defaults (preemptable,
// threshold 0.5, timeouts off, max_am_share 0.5). It assumes c validates.
func (c *QueueConfig) Resolve() []*Queue {
	var out []*Queue
	var walk func(q *QueueSpec, parent *Queue)
	walk = func(q *QueueSpec, parent *Queue) {
		r := &Queue{
			Path:                         q.Name,
			Weight:                       q.Weight,
			MinResources:                 q.MinResources,
			MaxResources:                 q.MaxResources,
			Policy:                       q.Policy,
			MaxRunningApps:               q.MaxRunningApps,
			Preemptable:                  true,
			FairSharePreemptionThreshold: 0.5,
			MaxAMShare:                   DefaultMaxAMShare,
		}
		if parent != nil {
			r.Path = parent.Path + "." + q.Name
			r.Parent = parent.Path
			r.Depth = parent.Depth + 1
			r.Preemptable = parent.Preemptable
			r.FairSharePreemptionThreshold = parent.FairSharePreemptionThreshold
			r.FairSharePreemptionTimeout = parent.FairSharePreemptionTimeout
			r.MinSharePreemptionTimeout = parent.MinSharePreemptionTimeout
			r.MaxAMShare = parent.MaxAMShare
			parent.Children = append(parent.Children, r.Path)
		}
		if q.Preemptable != nil {
			r.Preemptable = *q.Preemptable
		}
		if q.FairSharePreemptionThreshold != nil {
			r.FairSharePreemptionThreshold = *q.FairSharePreemptionThreshold
		}
		if q.FairSharePreemptionTimeout != nil {
			r.FairSharePreemptionTimeout = *q.FairSharePreemptionTimeout
		}
		if q.MinSharePreemptionTimeout != nil {
			r.MinSharePreemptionTimeout = *q.MinSharePreemptionTimeout
		}
		if q.MaxAMShare != nil {
			r.MaxAMShare = *q.MaxAMShare
		}
		resolveCapacity(q, r, parent)
		out = append(out, r)
		for _, ch := range q.Children {
			walk(ch, r)
		}
	}
	if c.Root != nil {
		walk(c.Root, nil)
	}
	return out
}

// Leaves returns the full paths of the leaf queues in tree order.
func (c *QueueConfig) Leaves() []string {
	var out []string
	for _, q := range c.Resolve() {
		if q.IsLeaf() {
			out = append(out, q.Path)
		}
	}
	return out
}

// SubmitQueuePath is the full path a submission's queue name means: ""
// is the default queue, and a name not under root is taken under it
// ("dev" is root.dev).
func SubmitQueuePath(name string) string {
	if name == "" {
		return DefaultQueue
	}
	if !strings.HasPrefix(name, RootQueue+".") && name != RootQueue {
		return RootQueue + "." + name
	}
	return name
}

// CheckSubmitQueue returns the leaf an app should go to: DefaultQueue when
// name is empty, else name itself when it is a leaf. Any other name is
// refused with the list of leaves.
func (c *QueueConfig) CheckSubmitQueue(name string) (string, error) {
	name = SubmitQueuePath(name)
	for _, q := range c.Resolve() {
		if q.Path == name {
			if q.IsLeaf() {
				return name, nil
			}
			return "", fmt.Errorf("queue %s is a parent queue; submit to a leaf: %s", name, strings.Join(c.Leaves(), ", "))
		}
	}
	return "", fmt.Errorf("queue %s does not exist; leaf queues are: %s", name, strings.Join(c.Leaves(), ", "))
}
