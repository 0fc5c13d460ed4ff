package rpc

import "github.com/weft-sched/weft/scheduler"

// AppSubmitRequest submits an app (App.Submit).
type AppSubmitRequest struct {
	RequestHeader
	Spec scheduler.AppSpec `codec:"spec"`
}

// AppSubmitResponse answers App.Submit; it is the `weft app submit -json` shape.
type AppSubmitResponse struct {
	AppID string `json:"app_id"`
	Index uint64 `codec:"index" json:"-"`
	// RequestID is the submit's request ID: a retry with it gets this answer.
	RequestID string `codec:"request_id" json:"request_id"`
}

// AppListRequest lists apps, optionally by queue and state (App.List).
type AppListRequest struct {
	RequestHeader
	Queue string `json:"queue"`
	State string `json:"state"`
}

// AppListResponse answers App.List.
type AppListResponse struct {
	ResponseMeta `codec:"meta" json:"-"`
	Apps         []AppInfo `json:"apps"`
}

// AppRequest names one app (App.Status, App.Kill).
type AppRequest struct {
	RequestHeader
	AppID string `json:"app_id"`
}

// AppStatusResponse answers App.Status.
type AppStatusResponse struct {
	ResponseMeta `codec:"meta" json:"-"`
	App          AppInfo `json:"app"`
}

// AttemptInfo is one AM attempt.
type AttemptInfo struct {
	Attempt     int    `json:"attempt"`
	ContainerID string `json:"container_id"`
	NodeID      string `json:"node_id"`
	Diagnostics string `json:"diagnostics,omitempty"`
}

// Preemption records one container taken from an app (SPEC §11).
type Preemption struct {
	ContainerID string `json:"container_id"`
	NodeID      string `json:"node_id"`
	Reason      string `json:"reason"`
	ForApp      string `json:"for_app"`
	At          int64  `json:"at"`
}

// AppInfo is one app as `weft app status -json` shows it.
type AppInfo struct {
	ID          string              `json:"id"`
	Name        string              `json:"name"`
	Queue       string              `json:"queue"`
	User        string              `json:"user"`
	Priority    int32               `json:"priority"`
	State       string              `json:"state"`
	Diagnostics string              `json:"diagnostics"`
	AMAttempts  int                 `json:"am_attempts"`
	Attempts    []AttemptInfo       `json:"attempts"`
	Preemptions []Preemption        `json:"preemptions"`
	SubmittedAt int64               `json:"submitted_at"`
	FinishedAt  int64               `json:"finished_at,omitempty"`
	Pending     scheduler.Resources `json:"pending"`
	Containers  ContainerCounts     `json:"containers"`
	// WhyPending says why the app's AM or next container is not placed,
	// while it is not (SPEC §16).
	WhyPending *PendingInfo `json:"why_pending,omitempty"`
}

// PendingInfo is why something is not placed: a stable code and a line
// for people.
type PendingInfo struct {
	Code    string `json:"code"`
	Message string `json:"message"`
}

// ContainerCounts counts an app's containers by state.
type ContainerCounts struct {
	Allocated int `json:"allocated"`
	Queued    int `json:"queued"`
	Running   int `json:"running"`
	Completed int `json:"completed"`
}

// NewAppInfo describes an app and its containers.
func NewAppInfo(a *scheduler.App, containers []*scheduler.Container) AppInfo {
	info := AppInfo{
		ID: a.ID, Name: a.Spec.Name, Queue: a.Queue, User: a.Spec.User, Priority: a.Spec.Priority,
		State: string(a.State), Diagnostics: a.Diagnostics, AMAttempts: len(a.Attempts),
		Attempts: []AttemptInfo{}, Preemptions: []Preemption{},
		SubmittedAt: a.SubmittedAt, FinishedAt: a.FinishedAt, Pending: a.Pending(),
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
		default:
			info.Containers.Completed++
		}
	}
	return info
}
