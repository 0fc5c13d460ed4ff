package fsm

import (
	"fmt"
	"sort"

	"github.com/weft-sched/weft/scheduler"
)

// AppID is the ID of the app submitted at a Raft index.
func AppID(index uint64) string { return fmt.Sprintf("app-%d", index) }

// applyAppSubmit accepts an app into a leaf queue.
func (t *txn) applyAppSubmit(req *AppSubmitRequest) (string, error) {
	spec := req.Spec
	spec.SetDefaults()
	if err := spec.Validate(); err != nil {
		return "", err
	}
	queue, err := t.next.queues.CheckSubmitQueue(spec.Queue)
	if err != nil {
		return "", err
	}
	id := AppID(t.index)
	var uid uint32
	if !req.UIDs.Empty() {
		var ok bool
		if uid, ok = t.freeUID(req.UIDs); !ok {
			return "", reject(ErrConflict, "every uid of dynamic_uid_range %d-%d is held by a running app: "+
				"wait for apps to end, or give the servers a wider dynamic_uid_range", req.UIDs.First, req.UIDs.Last)
		}
	}
	t.putApp(&scheduler.App{
		ID:          id,
		Spec:        spec,
		Queue:       queue,
		State:       scheduler.AppAccepted,
		Diagnostics: "waiting for an AM container",
		SubmittedAt: req.Now,
		AMPending:   true,
		UID:         uid,
		CreateIndex: t.index,
	})
	return id, nil
}

func (t *txn) currentApp(id string, attempt int) (*scheduler.App, error) {
	app, ok := t.app(id)
	if !ok {
		return nil, reject(ErrNotFound, "app %s not found", id)
	}
	if app.State.Terminal() {
		return nil, reject(ErrConflict, "app %s is %s", id, app.State)
	}
	if attempt != app.CurrentAttempt() || app.AMPending {
		return nil, reject(ErrConflict, "attempt %d of app %s is not its current attempt", attempt, id)
	}
	return app, nil
}

// applyAppRegister marks the app RUNNING when its current AM registers.
func (t *txn) applyAppRegister(req *AppRegisterRequest) error {
	app, err := t.currentApp(req.AppID, req.Attempt)
	if err != nil {
		return err
	}
	if app.State == scheduler.AppRunning {
		return nil
	}
	a := app.Copy()
	a.State = scheduler.AppRunning
	a.Diagnostics = ""
	t.putApp(a)
	return nil
}

// applyAppFinish ends an app and stops its live containers (an AM that
// reports its own end keeps its container: it exits by itself).
func (t *txn) applyAppFinish(req *AppFinishRequest) error {
	if err := scheduler.ValidateCounters(req.Counters); err != nil {
		return reject(ErrInvalid, "%v", err)
	}
	if req.Attempt == 0 && req.Counters != nil {
		return reject(ErrInvalid, "counters come from the app's AM, not with an end by a user or the leader")
	}
	app, ok := t.app(req.AppID)
	if !ok {
		return reject(ErrNotFound, "app %s not found", req.AppID)
	}
	if app.State.Terminal() {
		if app.State == req.State {
			return nil
		}
		return reject(ErrConflict, "app %s is already %s", req.AppID, app.State)
	}
	// An unmanaged AM ends its app KILLED when its home app was killed:
	// it speaks for its attempt like any AM.
	ownEnd := req.State == scheduler.AppFinished || req.State == scheduler.AppFailed ||
		req.State == scheduler.AppKilled && app.Unmanaged != nil
	switch {
	case req.Attempt == 0 && req.State == scheduler.AppKilled:
	case req.Attempt != 0 && ownEnd:
		if _, err := t.currentApp(req.AppID, req.Attempt); err != nil {
			return err
		}
	default:
		return reject(ErrInvalid, "an app cannot be ended as %s here", req.State)
	}
	a := app.Copy()
	a.State = req.State
	a.Diagnostics = req.Diagnostics
	a.FinishedAt = req.Now
	a.AMPending = false
	a.Asks = nil
	if req.Counters != nil {
		a.Counters = ownCounters(req.Counters)
	}
	if n := len(a.Attempts); n > 0 && req.Attempt != 0 {
		a.Attempts[n-1].FinishedAt = req.Now
	}
	t.putApp(a)
	for _, c := range t.appContainers(req.AppID) {
		if c.IsAM && req.Attempt != 0 && c.Attempt == req.Attempt {
			continue
		}
		t.stopContainer(c, scheduler.ReasonKilled, req.Now)
	}
	return nil
}

// amCompleted handles the end of an AM container: if it was the current
// attempt of an active app, the attempt is over; the app retries with a
// new attempt or fails when max_am_attempts are used up. An attempt whose
// AM container was taken away (its node stopped, went down or was
// drained; preempted; never started in time) does not count against
// max_am_attempts, as YARN does not count an AM container preempted or
// lost with its node; every attempt counts against MaxAMAttemptsLimit,
// which bounds the record. Either way the old attempt's containers are
// stopped and its blacklist is dropped.
func (t *txn) amCompleted(c *scheduler.Container, now int64) {
	app, ok := t.app(c.AppID)
	if !ok || app.State.Terminal() || c.Attempt != app.CurrentAttempt() || app.AMPending {
		return
	}
	a := app.Copy()
	why := fmt.Sprintf("AM attempt %d ended without finishing the app (container %s %s", c.Attempt, c.ID, c.Reason)
	if c.ExitCode != nil {
		why += fmt.Sprintf(", exit code %d", *c.ExitCode)
	}
	why += ")"
	last := &a.Attempts[len(a.Attempts)-1]
	last.FinishedAt = now
	last.Diagnostics = why
	last.NotCounted = c.Reason.Retryable()
	a.Asks = nil
	a.Blacklist = nil
	switch {
	case a.CountedAttempts() < a.Spec.MaxAMAttempts && len(a.Attempts) < scheduler.MaxAMAttemptsLimit:
		a.State = scheduler.AppAccepted
		a.AMPending = true
		a.Diagnostics = why + "; starting a new attempt"
		if last.NotCounted {
			a.Diagnostics += " (this one does not count against max_am_attempts: its container was taken away)"
		}
	case len(a.Attempts) >= scheduler.MaxAMAttemptsLimit:
		a.State = scheduler.AppFailed
		a.FinishedAt = now
		a.Diagnostics = fmt.Sprintf("%s; no attempts left (%d attempts, the most any app has)", why, len(a.Attempts))
	default:
		a.State = scheduler.AppFailed
		a.FinishedAt = now
		a.Diagnostics = fmt.Sprintf("%s; no attempts left (max_am_attempts %d)", why, a.Spec.MaxAMAttempts)
	}
	t.putApp(a)
	for _, other := range t.appContainers(c.AppID) {
		if other.Attempt == c.Attempt {
			t.stopContainer(other, scheduler.ReasonKilled, now)
		}
	}
}

// applyAskUpdate sets the current attempt's outstanding guaranteed asks.
func (t *txn) applyAskUpdate(req *AskUpdateRequest) error {
	app, err := t.currentApp(req.AppID, req.Attempt)
	if err != nil {
		return err
	}
	if app.State != scheduler.AppRunning {
		return reject(ErrConflict, "app %s has not registered its AM", req.AppID)
	}
	for _, ask := range req.Asks {
		if err := ask.Validate(); err != nil {
			return err
		}
		if ask.ExecutionType != scheduler.Guaranteed {
			return reject(ErrInvalid, "ask %d: execution_type must be GUARANTEED here, not %q", ask.AskID, ask.ExecutionType)
		}
	}
	// Containers placed after SeenIndex are ones the AM has not heard of yet.
	// (Placed after it means changed after it: the change index has them.)
	placedAfter := scheduler.PlacedSince(t.appContainersChangedSince(req.AppID, req.SeenIndex), req.Attempt, req.SeenIndex)
	a := app.Copy()
	changed := false
	for _, ask := range req.Asks {
		want := max(0, ask.Count-placedAfter[ask.AskID])
		k := askIndex(a.Asks, ask.AskID)
		ask.Count = want
		switch {
		case k < 0 && want > 0:
			a.Asks = append(a.Asks, ask)
			changed = true
		case k >= 0 && want == 0:
			a.Asks = append(a.Asks[:k], a.Asks[k+1:]...)
			changed = true
		case k >= 0 && !sameAsk(a.Asks[k], ask):
			a.Asks[k] = ask
			changed = true
		}
	}
	if changed {
		sort.Slice(a.Asks, func(i, j int) bool { return a.Asks[i].AskID < a.Asks[j].AskID })
		t.putApp(a)
	}
	return nil
}

func sameAsk(a, b scheduler.Ask) bool {
	return a.Count == b.Count && a.Priority == b.Priority && a.Resources.String() == b.Resources.String() &&
		a.ExecutionType == b.ExecutionType && a.Locality.Relax == b.Locality.Relax &&
		fmt.Sprint(a.Locality.Nodes, a.Locality.Racks) == fmt.Sprint(b.Locality.Nodes, b.Locality.Racks)
}

// AskUpdateChanges reports whether applying req to s would change anything
// (or be refused), so the leader proposes ask updates only when they matter.
func (s *State) AskUpdateChanges(req *AskUpdateRequest) bool {
	t := &txn{prev: s, next: *s, index: s.index + 1}
	before := t.next.tableIndex[TableApps]
	if err := t.applyAskUpdate(req); err != nil {
		return true // let the FSM refuse it, with its reason
	}
	return t.next.tableIndex[TableApps] != before
}
