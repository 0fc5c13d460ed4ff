package rpc

import "github.com/weft-sched/weft/scheduler"

// AppSubmitRequest submits an app (App.Submit).
type AppSubmitRequest struct {
	RequestHeader
	Spec scheduler.AppSpec `codec:"spec"`
}

// AppSubmitResponse answers App.Submit; it is the `weft app submit -json` shape.
type AppSubmitResponse struct {
	AppID string `codec:"app_id" json:"app_id"`
	Index uint64 `codec:"index" json:"-"`
	// RequestID is the submit's request ID: a retry with it gets this answer.
	RequestID string `codec:"request_id" json:"request_id"`
}

// AppListRequest lists apps, optionally by queue, state and user
// (App.List), in numeric ID order.
type AppListRequest struct {
	RequestHeader
	Queue string `codec:"queue" json:"queue"`
	State string `codec:"state" json:"state"`
	User  string `codec:"user" json:"user"`
}

// AppListResponse answers App.List.
type AppListResponse struct {
	ResponseMeta `codec:"meta" json:"-"`
	Apps         []AppInfo `codec:"apps" json:"apps"`
	// Unreachable names the sub-clusters a router could not list (their
	// apps are missing, not gone), each with why: a federation's answer.
	Unreachable []string `codec:"unreachable,omitempty" json:"unreachable,omitempty"`
}

// AppRequest names one app (App.Status, App.Kill).
type AppRequest struct {
	RequestHeader
	AppID string `codec:"app_id" json:"app_id"`
}

// AppStatusResponse answers App.Status.
type AppStatusResponse struct {
	ResponseMeta `codec:"meta" json:"-"`
	App          AppInfo `codec:"app" json:"app"`
}

// AttemptInfo is one AM attempt.
type AttemptInfo struct {
	Attempt     int    `codec:"attempt" json:"attempt"`
	ContainerID string `codec:"container_id" json:"container_id"`
	NodeID      string `codec:"node_id" json:"node_id"`
	Diagnostics string `codec:"diagnostics" json:"diagnostics,omitempty"`
}

// Preemption records one container taken from an app (SPEC §11).
type Preemption struct {
	ContainerID string `codec:"container_id" json:"container_id"`
	NodeID      string `codec:"node_id" json:"node_id"`
	Reason      string `codec:"reason" json:"reason"`
	ForApp      string `codec:"for_app" json:"for_app"`
	At          int64  `codec:"at" json:"at"`
}

// AppInfo is one app as `weft app status -json` shows it.
type AppInfo struct {
	ID string `codec:"id" json:"id"`
	// Home is the sub-cluster that holds the app, when a federation's
	// router answered (SPEC §18).
	Home        string              `codec:"home,omitempty" json:"home,omitempty"`
	Name        string              `codec:"name" json:"name"`
	Queue       string              `codec:"queue" json:"queue"`
	User        string              `codec:"user" json:"user"`
	Priority    int32               `codec:"priority" json:"priority"`
	State       string              `codec:"state" json:"state"`
	Diagnostics string              `codec:"diagnostics" json:"diagnostics"`
	AMAttempts  int                 `codec:"am_attempts" json:"am_attempts"`
	Attempts    []AttemptInfo       `codec:"attempts" json:"attempts"`
	Preemptions []Preemption        `codec:"preemptions" json:"preemptions"`
	SubmittedAt int64               `codec:"submitted_at" json:"submitted_at"`
	FinishedAt  int64               `codec:"finished_at" json:"finished_at,omitempty"`
	Pending     scheduler.Resources `codec:"pending" json:"pending"`
	Containers  ContainerCounts     `codec:"containers" json:"containers"`
	// WhyPending says why the app's AM or next container is not placed,
	// while it is not (SPEC §16).
	WhyPending *PendingInfo `codec:"why_pending" json:"why_pending,omitempty"`
	// Headroom, for an active app in a capacity queue and in its status
	// only, is what AM.Allocate answers its AM: what its user may still be
	// given there.
	Headroom *scheduler.Resources `codec:"headroom,omitempty" json:"headroom,omitempty"`
	// Reservations are the nodes held for the app's containers that do
	// not fit yet (capacity queues).
	Reservations []*ReservationInfo `codec:"reservations,omitempty" json:"reservations,omitempty"`
	// UnmanagedFor is the app's home, when this record is an unmanaged
	// AM's: the app spans here from that sub-cluster (SPEC §18).
	UnmanagedFor string `codec:"unmanaged_for,omitempty" json:"unmanaged_for,omitempty"`
	// Spans is, when a router answered for an app that spans
	// sub-clusters, its containers in each: the home first.
	Spans []AppSpan `codec:"spans,omitempty" json:"spans,omitempty"`
	// Counters are the figures the app's AM reported last (SPEC §19).
	Counters scheduler.Counters `codec:"counters,omitempty" json:"counters,omitempty"`
	// MaxFailuresPerNode is the app's max_failures_per_node (0: its AM
	// never blacklists a node).
	MaxFailuresPerNode int `codec:"max_failures_per_node" json:"max_failures_per_node"`
	// Blacklist is the nodes the current AM attempt blacklisted;
	// BlacklistIgnored says it is not in force (it names at least
	// scheduler.BlacklistIgnorePercent of the READY nodes).
	Blacklist        []string `codec:"blacklist,omitempty" json:"blacklist,omitempty"`
	BlacklistIgnored bool     `codec:"blacklist_ignored,omitempty" json:"blacklist_ignored,omitempty"`
}

// AppSpan is a spanning app's part in one sub-cluster.
type AppSpan struct {
	Subcluster string          `codec:"subcluster" json:"subcluster"`
	Home       bool            `codec:"home" json:"home"`
	State      string          `codec:"state" json:"state"`
	Containers ContainerCounts `codec:"containers" json:"containers"`
	// Unreachable says why the part could not be read ("" when it was).
	Unreachable string `codec:"unreachable,omitempty" json:"unreachable,omitempty"`
}

// PendingInfo is why something is not placed: a stable code and a line
// for people.
type PendingInfo struct {
	Code    string `codec:"code" json:"code"`
	Message string `codec:"message" json:"message"`
}

// ContainerCounts counts an app's containers by state.
type ContainerCounts struct {
	Allocated int `codec:"allocated" json:"allocated"`
	Queued    int `codec:"queued" json:"queued"`
	Running   int `codec:"running" json:"running"`
	// Paused counts opportunistic containers their agents paused to make
	// room for guaranteed work.
	Paused    int `codec:"paused,omitempty" json:"paused,omitempty"`
	Completed int `codec:"completed" json:"completed"`
}

// NewAppInfo describes an app and its containers.
func NewAppInfo(a *scheduler.App, containers []*scheduler.Container) AppInfo {
	info := AppInfo{
		ID: a.ID, Name: a.Spec.Name, Queue: a.Queue, User: a.Spec.User, Priority: a.Spec.Priority,
		State: string(a.State), Diagnostics: a.Diagnostics, AMAttempts: len(a.Attempts),
		Attempts: []AttemptInfo{}, Preemptions: []Preemption{},
		SubmittedAt: a.SubmittedAt, FinishedAt: a.FinishedAt, Pending: a.Pending(),
		MaxFailuresPerNode: a.Spec.FailuresPerNode(), Blacklist: a.Blacklist,
	}
	if a.Unmanaged != nil {
		info.UnmanagedFor = a.Unmanaged.Home
	}
	for _, at := range a.Attempts {
		info.Attempts = append(info.Attempts, AttemptInfo{Attempt: at.Attempt, ContainerID: at.ContainerID, NodeID: at.NodeID, Diagnostics: at.Diagnostics})
	}
	for _, p := range a.Preemptions {
		info.Preemptions = append(info.Preemptions, Preemption{ContainerID: p.ContainerID, NodeID: p.NodeID, Reason: p.Reason, ForApp: p.ForApp, At: p.At})
	}
	for _, c := range containers {
		switch c.State {
		case scheduler.ContainerAllocated:
			info.Containers.Allocated++
		case scheduler.ContainerQueued:
			info.Containers.Queued++
		case scheduler.ContainerRunning:
			info.Containers.Running++
		case scheduler.ContainerPaused:
			info.Containers.Paused++
		default:
			info.Containers.Completed++
		}
	}
	return info
}
