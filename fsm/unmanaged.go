package fsm

import (
	"fmt"
	"strings"

	"github.com/weft-sched/weft/scheduler"
	"github.com/weft-sched/weft/scheduler/federation"
)

// AppSubmitUnmanagedRequest creates the unmanaged AM of an app that spans
// into this sub-cluster from its home (SPEC §18), or moves it to the
// home's next AM attempt. The app's record here has the federation's app
// ID, no AM container and is RUNNING from the start; its attempts follow
// the home's. The result is nil.
//
//   - No app AppID: it is created at Attempt, in Queue (a leaf).
//   - The app at Attempt, not ended: nothing changes (a retry, or another
//     router's call for the same span).
//   - The app at an older attempt: Attempt replaces it; every live
//     container of the older attempts is stopped (killed), as when an AM
//     attempt fails.
//   - The app at a newer attempt, or ended: ErrStale.
//   - AppID held by an app that is not this unmanaged AM's: ErrConflict.
type AppSubmitUnmanagedRequest struct {
	AppID string `codec:"app_id"`
	// Home is the sub-cluster the app's AM runs in; Subcluster this one.
	Home       string `codec:"home"`
	Subcluster string `codec:"subcluster"`
	Attempt    int    `codec:"attempt"`
	Queue      string `codec:"queue"`
	User       string `codec:"user"`
	Priority   int32  `codec:"priority"`
	Name       string `codec:"name"`
	Now        int64  `codec:"now"`
	// UIDs is the range the app's uid here is taken from (see
	// AppSubmitRequest.UIDs).
	UIDs UIDRange `codec:"uids,omitempty"`
}

// Validate checks the request's own fields (not whether its queue exists)
// and names the first bad one. Servers check it before proposing; the FSM
// checks it again, since the log may hold anything.
func (r *AppSubmitUnmanagedRequest) Validate() error {
	if err := federation.ValidateAppID("app_id", r.AppID); err != nil {
		return err
	}
	if err := federation.ValidateID(r.Home); err != nil {
		return fmt.Errorf("home: %v", err)
	}
	if err := federation.ValidateID(r.Subcluster); err != nil {
		return fmt.Errorf("subcluster: %v", err)
	}
	switch {
	case r.Home == r.Subcluster:
		return fmt.Errorf("home: %s is this sub-cluster: an app spans here only from another", r.Home)
	case r.Attempt < 1 || r.Attempt > scheduler.MaxAMAttemptsLimit:
		return fmt.Errorf("attempt: must be between 1 and %d, not %d", scheduler.MaxAMAttemptsLimit, r.Attempt)
	case strings.TrimSpace(r.User) == "":
		return fmt.Errorf("user: give the app's user")
	case len(r.Name) > scheduler.MaxAppNameLength:
		return fmt.Errorf("name: longer than %d characters", scheduler.MaxAppNameLength)
	}
	return nil
}

// applyAppSubmitUnmanaged creates or moves on an unmanaged AM's app (see
// AppSubmitUnmanagedRequest). Its work is bounded by the app's containers
// and its attempts (at most MaxAMAttemptsLimit: each one is newer).
func (t *txn) applyAppSubmitUnmanaged(req *AppSubmitUnmanagedRequest) error {
	if err := req.Validate(); err != nil {
		return reject(ErrInvalid, "%v", err)
	}
	app, ok := t.app(req.AppID)
	if !ok {
		queue, err := t.next.queues.CheckSubmitQueue(req.Queue)
		if err != nil {
			return reject(ErrInvalid, "%v", err)
		}
		var uid uint32
		if !req.UIDs.Empty() {
			if uid, ok = t.freeUID(req.UIDs); !ok {
				return reject(ErrConflict, "every uid of dynamic_uid_range %d-%d is held by a running app", req.UIDs.First, req.UIDs.Last)
			}
		}
		t.putApp(&scheduler.App{
			ID: req.AppID,
			// AMType unmanaged, no AM resources: nothing places or
			// launches an AM for it, and it takes no AM share.
			Spec: scheduler.AppSpec{Name: req.Name, Queue: req.Queue, User: req.User, Priority: req.Priority,
				AMType: scheduler.AMTypeUnmanaged},
			Queue:       queue,
			State:       scheduler.AppRunning,
			SubmittedAt: req.Now,
			Attempts:    []scheduler.Attempt{{Attempt: req.Attempt, StartedAt: req.Now}},
			Unmanaged:   &scheduler.Unmanaged{Home: req.Home, Subcluster: req.Subcluster},
			UID:         uid,
			CreateIndex: t.index,
		})
		return nil
	}
	switch u := app.Unmanaged; {
	case u == nil:
		return reject(ErrConflict, "app %s is this sub-cluster's own app, not an unmanaged AM's", req.AppID)
	case u.Home != req.Home || u.Subcluster != req.Subcluster:
		return reject(ErrConflict, "app %s spans from %s into %s here, not from %s into %s", req.AppID, u.Home, u.Subcluster, req.Home, req.Subcluster)
	case app.State.Terminal():
		return reject(ErrStale, "app %s has ended here (%s): its unmanaged AM is not created again", req.AppID, app.State)
	case req.Attempt == app.CurrentAttempt():
		return nil
	case req.Attempt < app.CurrentAttempt():
		return reject(ErrStale, "app %s is at attempt %d here: attempt %d is over", req.AppID, app.CurrentAttempt(), req.Attempt)
	}
	// The home's AM moved to a new attempt: its old attempt's containers
	// here go, as an attempt's containers go when its AM dies.
	a := app.Copy()
	last := &a.Attempts[len(a.Attempts)-1]
	last.FinishedAt = req.Now
	last.Diagnostics = fmt.Sprintf("replaced by attempt %d of the AM in %s", req.Attempt, req.Home)
	a.Attempts = append(a.Attempts, scheduler.Attempt{Attempt: req.Attempt, StartedAt: req.Now})
	a.Asks = nil
	t.putApp(a)
	for _, c := range t.appContainers(req.AppID) {
		t.stopContainer(c, scheduler.ReasonKilled, req.Now)
	}
	return nil
}
