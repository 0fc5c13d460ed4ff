package fsm

import (
	"maps"

	"github.com/weft-sched/weft/scheduler"
)

// AppCountersRequest replaces the counters of an app with those its
// current AM attempt reported (SPEC §19). The app must be active and at
// Attempt. The result is nil.
type AppCountersRequest struct {
	AppID    string             `codec:"app_id"`
	Attempt  int                `codec:"attempt"`
	Counters scheduler.Counters `codec:"counters"`
}

// applyAppCounters stores an AM's counters with its app; the same
// counters again change nothing (the app's modify index stays).
func (t *txn) applyAppCounters(req *AppCountersRequest) error {
	if err := scheduler.ValidateCounters(req.Counters); err != nil {
		return reject(ErrInvalid, "%v", err)
	}
	app, err := t.currentApp(req.AppID, req.Attempt)
	if err != nil {
		return err
	}
	if app.Counters.Equal(req.Counters) {
		return nil
	}
	a := app.Copy()
	a.Counters = ownCounters(req.Counters)
	t.putApp(a)
	return nil
}

// ownCounters is the copy of c an app record keeps (nil for none): the
// record's map is never shared with a request, nor changed once stored.
func ownCounters(c scheduler.Counters) scheduler.Counters {
	if len(c) == 0 {
		return nil
	}
	return maps.Clone(c)
}

// AppCountersChange reports whether applying req to s would change
// anything (or be refused), so that an AM which sends the same counters
// with every Allocate costs no Raft write.
func (s *State) AppCountersChange(req *AppCountersRequest) bool {
	t := &txn{prev: s, next: *s, index: s.index + 1}
	before := t.next.tableIndex[TableApps]
	if err := t.applyAppCounters(req); err != nil {
		return true // let the FSM refuse it, with its reason
	}
	return t.next.tableIndex[TableApps] != before
}
