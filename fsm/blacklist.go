package fsm

import (
	"slices"

	"github.com/weft-sched/weft/scheduler"
)

// AppBlacklistRequest changes the node blacklist of an app's current AM
// attempt: Additions are added, then Removals taken out (a node in both is
// removed). The app must be active and at Attempt; the result is nil. A
// malformed node ID, or a list past scheduler.MaxBlacklistedNodes, is
// refused and changes nothing.
type AppBlacklistRequest struct {
	AppID     string   `codec:"app_id"`
	Attempt   int      `codec:"attempt"`
	Additions []string `codec:"additions"`
	Removals  []string `codec:"removals"`
}

// applyAppBlacklist stores the app's new blacklist; one that comes out
// the same changes nothing (the app's modify index stays).
func (t *txn) applyAppBlacklist(req *AppBlacklistRequest) error {
	app, err := t.currentApp(req.AppID, req.Attempt)
	if err != nil {
		return err
	}
	list, err := scheduler.UpdateBlacklist(app.Blacklist, req.Additions, req.Removals)
	if err != nil {
		return reject(ErrInvalid, "%v", err)
	}
	if slices.Equal(list, app.Blacklist) {
		return nil
	}
	a := app.Copy()
	a.Blacklist = list
	t.putApp(a)
	return nil
}

// AppBlacklistChanges reports whether applying req to s would change
// anything (or be refused), so that an AM that sends a node it blacklisted
// before costs no Raft write.
func (s *State) AppBlacklistChanges(req *AppBlacklistRequest) bool {
	t := &txn{prev: s, next: *s, index: s.index + 1}
	before := t.next.tableIndex[TableApps]
	if err := t.applyAppBlacklist(req); err != nil {
		return true // let the FSM refuse it, with its reason
	}
	return t.next.tableIndex[TableApps] != before
}
