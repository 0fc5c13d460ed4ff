package rpc

import "github.com/weft-sched/weft/scheduler"

// QueueApplyRequest replaces the whole queue configuration (Queue.Apply).
// DryRun changes nothing: the answer's Plan says what applying it would do
// (SPEC §20).
type QueueApplyRequest struct {
	RequestHeader
	Config *scheduler.QueueConfig `codec:"config"`
	DryRun bool                   `codec:"dry_run" json:"dry_run"`
}

// QueueApplyResponse answers Queue.Apply: the index it was applied at
// (0 for a dry run), warnings about the configuration, and for a dry run
// the plan.
type QueueApplyResponse struct {
	Index    uint64     `codec:"index" json:"index"`
	Warnings []string   `codec:"warnings" json:"warnings,omitempty"`
	Plan     *QueuePlan `codec:"plan" json:"plan,omitempty"`
	// Subclusters names the sub-clusters a federation's router applied
	// the configuration to (or planned it for): all that are not LOST or
	// DECOMMISSIONED.
	Subclusters []string `codec:"subclusters,omitempty" json:"subclusters,omitempty"`
}

// QueuePlan is what applying a queue configuration would do, computed by
// scheduler.PlanQueueConfig on the current state.
type QueuePlan struct {
	Queues      []QueueShareChange `codec:"queues" json:"queues"`
	Preemptable []PreemptableApp   `codec:"preemptable" json:"preemptable"`
}

// QueueShareChange is one queue's fair shares now and after. A queue only
// in the current configuration has Removed set, one only in the new has
// Added.
type QueueShareChange struct {
	Name                        string              `codec:"name" json:"name"`
	Subcluster                  string              `codec:"subcluster,omitempty" json:"subcluster,omitempty"`
	Added                       bool                `codec:"added" json:"added,omitempty"`
	Removed                     bool                `codec:"removed" json:"removed,omitempty"`
	SteadyFairShareNow          scheduler.Resources `codec:"steady_fair_share_now" json:"steady_fair_share_now"`
	SteadyFairShareAfter        scheduler.Resources `codec:"steady_fair_share_after" json:"steady_fair_share_after"`
	InstantaneousFairShareNow   scheduler.Resources `codec:"instantaneous_fair_share_now" json:"instantaneous_fair_share_now"`
	InstantaneousFairShareAfter scheduler.Resources `codec:"instantaneous_fair_share_after" json:"instantaneous_fair_share_after"`
}

// PreemptableApp is a running app that the new configuration would leave
// over its fair share by more than the preemption rules allow, so that
// starved apps may take containers from it.
type PreemptableApp struct {
	AppID          string              `codec:"app_id" json:"app_id"`
	Subcluster     string              `codec:"subcluster,omitempty" json:"subcluster,omitempty"`
	Queue          string              `codec:"queue" json:"queue"`
	Used           scheduler.Resources `codec:"used" json:"used"`
	FairShareNow   scheduler.Resources `codec:"fair_share_now" json:"fair_share_now"`
	FairShareAfter scheduler.Resources `codec:"fair_share_after" json:"fair_share_after"`
}

// QueueListRequest asks for every queue (Queue.List).
type QueueListRequest struct {
	RequestHeader
}

// QueueListResponse answers Queue.List.
type QueueListResponse struct {
	ResponseMeta
	Scheduler scheduler.SchedulerConfig `codec:"scheduler" json:"scheduler"`
	Queues    []QueueInfo               `codec:"queues" json:"queues"`
	// Unreachable names the sub-clusters a router could not list, each
	// with why: a federation's answer.
	Unreachable []string `codec:"unreachable,omitempty" json:"unreachable,omitempty"`
}

// QueueStatusRequest asks for one queue by full path (Queue.Status).
type QueueStatusRequest struct {
	RequestHeader
	Name string `codec:"name" json:"name"`
}

// QueueStatusResponse answers Queue.Status.
type QueueStatusResponse struct {
	ResponseMeta
	Queue QueueInfo `codec:"queue" json:"queue"`
	// Subclusters is the queue in each sub-cluster, when a federation's
	// router answers; Queue then totals their use, demand, shares and
	// apps. Unreachable names the sub-clusters that did not answer.
	Subclusters []QueueInfo `codec:"subclusters,omitempty" json:"subclusters,omitempty"`
	Unreachable []string    `codec:"unreachable,omitempty" json:"unreachable,omitempty"`
}

// QueueInfo is one queue as `weft queue list -json` shows it: the SPEC §14
// fields first, then the effective (inherited) configuration.
type QueueInfo struct {
	Name                   string               `codec:"name" json:"name"`
	Weight                 float64              `codec:"weight" json:"weight"`
	Policy                 string               `codec:"policy" json:"policy"`
	MinResources           scheduler.Resources  `codec:"min_resources" json:"min_resources"`
	MaxResources           *scheduler.Resources `codec:"max_resources" json:"max_resources"`
	SteadyFairShare        scheduler.Resources  `codec:"steady_fair_share" json:"steady_fair_share"`
	InstantaneousFairShare scheduler.Resources  `codec:"instantaneous_fair_share" json:"instantaneous_fair_share"`
	Used                   scheduler.Resources  `codec:"used" json:"used"`
	Pending                scheduler.Resources  `codec:"pending" json:"pending"`
	RunningApps            int                  `codec:"running_apps" json:"running_apps"`

	Parent                       string   `codec:"parent" json:"parent"`
	Depth                        int      `codec:"depth" json:"depth"`
	Leaf                         bool     `codec:"leaf" json:"leaf"`
	Children                     []string `codec:"children" json:"children"`
	MaxRunningApps               *int     `codec:"max_running_apps" json:"max_running_apps"`
	Preemptable                  bool     `codec:"preemptable" json:"preemptable"`
	FairSharePreemptionThreshold float64  `codec:"fair_share_preemption_threshold" json:"fair_share_preemption_threshold"`
	FairSharePreemptionTimeout   Duration `codec:"fair_share_preemption_timeout" json:"fair_share_preemption_timeout"`
	MinSharePreemptionTimeout    Duration `codec:"min_share_preemption_timeout" json:"min_share_preemption_timeout"`
	MaxAMShare                   float64  `codec:"max_am_share" json:"max_am_share"` // -1: off
	// Subcluster is the queue's sub-cluster, when a federation's router
	// answers (each sub-cluster has its own queues).
	Subcluster string `codec:"subcluster,omitempty" json:"subcluster,omitempty"`
	// Type is "capacity" in a capacity subtree (SPEC §19); Capacity holds
	// the limits of a queue below its root.
	Type     string             `codec:"type,omitempty" json:"type,omitempty"`
	Capacity *QueueCapacityInfo `codec:"capacity,omitempty" json:"capacity,omitempty"`
}

// QueueCapacityInfo is a capacity queue's limits (percent of its parent),
// its absolute capacity and max capacity (percent of the capacity
// subtree's root), and what it uses as a percent of its capacity (above
// 100 while it borrows).
type QueueCapacityInfo struct {
	Capacity        float64 `codec:"capacity" json:"capacity"`
	MaxCapacity     float64 `codec:"max_capacity" json:"max_capacity"`
	UserLimitFactor float64 `codec:"user_limit_factor" json:"user_limit_factor"` // -1: none short of max capacity
	// MinimumUserLimitPercent and MaximumAMResourcePercent (a fraction)
	// are YARN's knobs of the same names.
	MinimumUserLimitPercent  float64 `codec:"minimum_user_limit_percent" json:"minimum_user_limit_percent"`
	MaximumAMResourcePercent float64 `codec:"maximum_am_resource_percent" json:"maximum_am_resource_percent"`
	AbsoluteCapacity         float64 `codec:"absolute_capacity" json:"absolute_capacity"`
	AbsoluteMaxCapacity      float64 `codec:"absolute_max_capacity" json:"absolute_max_capacity"`
	UsedCapacity             float64 `codec:"used_capacity" json:"used_capacity"`
}

// NewQueueInfo describes a resolved queue. Usage and fair-share figures are
// left for the caller to fill.
func NewQueueInfo(q *scheduler.Queue) QueueInfo {
	return QueueInfo{
		Name:                         q.Path,
		Weight:                       q.Weight,
		Policy:                       string(q.Policy),
		MinResources:                 q.MinResources,
		MaxResources:                 q.MaxResources,
		Parent:                       q.Parent,
		Depth:                        q.Depth,
		Leaf:                         q.IsLeaf(),
		Children:                     q.Children,
		MaxRunningApps:               q.MaxRunningApps,
		Preemptable:                  q.Preemptable,
		FairSharePreemptionThreshold: q.FairSharePreemptionThreshold,
		FairSharePreemptionTimeout:   Duration(q.FairSharePreemptionTimeout),
		MinSharePreemptionTimeout:    Duration(q.MinSharePreemptionTimeout),
		MaxAMShare:                   q.MaxAMShare,
		Type:                         string(q.Type),
	}
}
