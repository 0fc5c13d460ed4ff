package fsm

import (
	"bytes"
	"errors"
	"testing"

	"github.com/weft-sched/weft/scheduler"
)

func TestAppCountersAreStoredAndTheSameOnesWriteNothing(t *testing.T) {
	h := newHarness(t)
	h.register("n1", 8192)
	app := h.runningApp("n1")
	first := scheduler.Counters{"maps.data_local": 3, "shuffle.bytes.off_rack": 1 << 20}
	req := &AppCountersRequest{AppID: app, Attempt: 1, Counters: first}
	if !h.f.State().AppCountersChange(req) {
		t.Fatalf("new counters: AppCountersChange says nothing would change")
	}
	h.ok(AppCountersType, req)
	a := h.app(app)
	if !a.Counters.Equal(first) || a.ModifyIndex != h.index {
		t.Fatalf("app counters %v at modify index %d, want %v at %d", a.Counters, a.ModifyIndex, first, h.index)
	}
	first["maps.data_local"] = 99 // the request's map, changed after it applied
	if a := h.app(app); a.Counters["maps.data_local"] != 3 {
		t.Fatalf("the stored counters share the request's map: %v", a.Counters)
	}

	same := &AppCountersRequest{AppID: app, Attempt: 1, Counters: scheduler.Counters{"maps.data_local": 3, "shuffle.bytes.off_rack": 1 << 20}}
	if h.f.State().AppCountersChange(same) {
		t.Fatalf("the same counters again: AppCountersChange says they would change the app")
	}
	before := h.f.State().TableIndex(TableApps)
	h.ok(AppCountersType, same)
	if got := h.f.State().TableIndex(TableApps); got != before {
		t.Fatalf("the same counters again wrote the apps table (index %d, was %d)", got, before)
	}

	// Counters are replaced whole, not merged.
	next := scheduler.Counters{"maps.rack_local": 1}
	h.ok(AppCountersType, &AppCountersRequest{AppID: app, Attempt: 1, Counters: next})
	if a := h.app(app); !a.Counters.Equal(next) {
		t.Fatalf("app counters %v, want exactly %v", a.Counters, next)
	}
}

func TestAppCountersRefusals(t *testing.T) {
	h := newHarness(t)
	h.register("n1", 8192)
	app := h.runningApp("n1")
	for _, tc := range []struct {
		name string
		req  *AppCountersRequest
		kind error
		want string
	}{
		{"bad name", &AppCountersRequest{AppID: app, Attempt: 1, Counters: scheduler.Counters{"Maps Local": 1}}, ErrInvalid, "counters: name"},
		{"old attempt", &AppCountersRequest{AppID: app, Attempt: 2, Counters: scheduler.Counters{"a": 1}}, ErrConflict, "not its current attempt"},
		{"no app", &AppCountersRequest{AppID: "app-999", Attempt: 1, Counters: scheduler.Counters{"a": 1}}, ErrNotFound, "not found"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if !h.f.State().AppCountersChange(tc.req) {
				t.Fatalf("AppCountersChange is false for a command the FSM refuses: it would never reach the FSM for its reason")
			}
			h.refused(AppCountersType, tc.req, tc.want)
			if err, _ := h.apply(AppCountersType, tc.req).(error); !errors.Is(err, tc.kind) {
				t.Fatalf("refusal %v is not %v", err, tc.kind)
			}
		})
	}
}

func TestAppFinishRecordsTheFinalCountersAndAnEndedAppKeepsThem(t *testing.T) {
	h := newHarness(t)
	h.register("n1", 8192)
	app := h.runningApp("n1")
	h.ok(AppCountersType, &AppCountersRequest{AppID: app, Attempt: 1, Counters: scheduler.Counters{"maps.data_local": 1}})
	final := scheduler.Counters{"maps.data_local": 4, "reduce.0.wtnd": 8}
	h.ok(AppFinishType, &AppFinishRequest{AppID: app, Attempt: 1, State: scheduler.AppFinished, Counters: final, Now: 5})
	a := h.app(app)
	if a.State != scheduler.AppFinished || !a.Counters.Equal(final) {
		t.Fatalf("finished app is %s with counters %v, want FINISHED with %v", a.State, a.Counters, final)
	}
	h.refused(AppCountersType, &AppCountersRequest{AppID: app, Attempt: 1, Counters: scheduler.Counters{"maps.data_local": 0}}, "is FINISHED")
	// A retried finish with other counters changes nothing either.
	h.ok(AppFinishType, &AppFinishRequest{AppID: app, Attempt: 1, State: scheduler.AppFinished, Counters: scheduler.Counters{"x": 1}, Now: 6})
	if a := h.app(app); !a.Counters.Equal(final) {
		t.Fatalf("an ended app's counters changed to %v", a.Counters)
	}
}

func TestAppFinishWithoutCountersKeepsTheLastReported(t *testing.T) {
	h := newHarness(t)
	h.register("n1", 8192)
	app := h.runningApp("n1")
	last := scheduler.Counters{"maps.off_rack": 2}
	h.ok(AppCountersType, &AppCountersRequest{AppID: app, Attempt: 1, Counters: last})
	h.refused(AppFinishType, &AppFinishRequest{AppID: app, Attempt: 1, State: scheduler.AppFailed, Counters: scheduler.Counters{"": 1}}, "counters: name")
	h.refused(AppFinishType, &AppFinishRequest{AppID: app, State: scheduler.AppKilled, Counters: last}, "counters come from the app's AM")
	h.ok(AppFinishType, &AppFinishRequest{AppID: app, Attempt: 1, State: scheduler.AppFailed, Now: 5})
	if a := h.app(app); a.State != scheduler.AppFailed || !a.Counters.Equal(last) {
		t.Fatalf("failed app is %s with counters %v, want FAILED with %v", a.State, a.Counters, last)
	}
}

func TestAppCountersSurviveASnapshotAndAppsWithoutThemEncodeAsBefore(t *testing.T) {
	h := newHarness(t)
	h.register("n1", 8192)
	app := h.runningApp("n1")
	other := h.runningApp("n1")
	h.ok(AppCountersType, &AppCountersRequest{AppID: app, Attempt: 1, Counters: scheduler.Counters{"maps.data_local": 7, "tnd": 12}})
	h.ok(AppFinishType, &AppFinishRequest{AppID: app, Attempt: 1, State: scheduler.AppFinished, Now: 5,
		Counters: scheduler.Counters{"maps.data_local": 8, "tnd": 14}})
	g := restoreBytes(t, persist(t, h.f))
	if err := sameState(h.f.State(), g.State()); err != nil {
		t.Fatalf("restored state differs: %v", err)
	}
	a, _ := g.State().App(app)
	if !a.Counters.Equal(scheduler.Counters{"maps.data_local": 8, "tnd": 14}) {
		t.Fatalf("restored counters %v", a.Counters)
	}
	// omitempty: the record of an app that has no counters holds no
	// counters key, so records and snapshots of such apps are what they
	// were before counters existed.
	b, _ := g.State().App(other)
	data, err := Encode(0, b)
	if err != nil {
		t.Fatal(err)
	}
	if bytes.Contains(data, []byte("counters")) {
		t.Fatalf("an app without counters encodes a counters key")
	}
}
