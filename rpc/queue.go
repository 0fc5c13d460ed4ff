package rpc

import "github.com/weft-sched/weft/scheduler"

// QueueApplyRequest replaces the whole queue configuration (Queue.Apply).
type QueueApplyRequest struct {
	RequestHeader
	Config *scheduler.QueueConfig `codec:"config"`
}

// QueueListRequest asks for every queue (Queue.List).
type QueueListRequest struct {
	RequestHeader
}

// QueueListResponse answers Queue.List.
type QueueListResponse struct {
	ResponseMeta
	Scheduler scheduler.SchedulerConfig `json:"scheduler"`
	Queues    []QueueInfo               `json:"queues"`
}

// QueueStatusRequest asks for one queue by full path (Queue.Status).
type QueueStatusRequest struct {
	RequestHeader
	Name string `json:"name"`
}

// QueueStatusResponse answers Queue.Status.
type QueueStatusResponse struct {
	ResponseMeta
	Queue QueueInfo `json:"queue"`
}

// QueueInfo is one queue as `weft queue list -json` shows it: the SPEC §14
// fields first, then the effective (inherited) configuration.
type QueueInfo struct {
	Name                   string               `json:"name"`
	Weight                 float64              `json:"weight"`
	Policy                 string               `json:"policy"`
	MinResources           scheduler.Resources  `json:"min_resources"`
	MaxResources           *scheduler.Resources `json:"max_resources"`
	SteadyFairShare        scheduler.Resources  `json:"steady_fair_share"`
	InstantaneousFairShare scheduler.Resources  `json:"instantaneous_fair_share"`
	Used                   scheduler.Resources  `json:"used"`
	Pending                scheduler.Resources  `json:"pending"`
	RunningApps            int                  `json:"running_apps"`

	Parent                       string   `json:"parent"`
	Depth                        int      `json:"depth"`
	Leaf                         bool     `json:"leaf"`
	Children                     []string `json:"children"`
	MaxRunningApps               *int     `json:"max_running_apps"`
	Preemptable                  bool     `json:"preemptable"`
	FairSharePreemptionThreshold float64  `json:"fair_share_preemption_threshold"`
	FairSharePreemptionTimeout   Duration `json:"fair_share_preemption_timeout"`
	MinSharePreemptionTimeout    Duration `json:"min_share_preemption_timeout"`
	MaxAMShare                   float64  `json:"max_am_share"` // -1: off
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
	}
}
