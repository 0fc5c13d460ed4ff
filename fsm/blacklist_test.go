package fsm

import (
	"bytes"
	"fmt"
	"io"
	"slices"
	"strings"
	"testing"

	"github.com/weft-sched/weft/scheduler"
)

// An AM container taken away with its node — stopped gracefully, drained
// at the deadline, lost — or preempted starts a new attempt that does not
// count against max_am_attempts, even at max_am_attempts = 1; one that
// exits by itself counts.
func TestAnAMTakenAwayDoesNotCountAnAttempt(t *testing.T) {
	for _, reason := range []scheduler.ExitReason{scheduler.ReasonNodeStopped, scheduler.ReasonDrained, scheduler.ReasonLost,
		scheduler.ReasonPreempted, scheduler.ReasonExpired} {
		t.Run(string(reason), func(t *testing.T) {
			h := newHarness(t)
			h.register("n1", 4096)
			spec := scheduler.AppSpec{MaxAMAttempts: 1, DShell: scheduler.DShell{NumContainers: 1, Command: []string{"true"}, Resources: small}}
			app := h.ok(AppSubmitType, &AppSubmitRequest{Spec: spec, Now: 1}).(string)
			am := h.placeAM(app, "n1", 1)
			h.ok(AppRegisterType, &AppRegisterRequest{AppID: app, Attempt: 1})
			h.ok(AppBlacklistType, &AppBlacklistRequest{AppID: app, Attempt: 1, Additions: []string{"n9"}})
			h.ok(ContainerUpdateType, &ContainerUpdateRequest{NodeID: "n1", Updates: []ContainerStatus{{ID: am,
				State: scheduler.ContainerCompleted, Reason: reason}}})
			a := h.app(app)
			if a.State != scheduler.AppAccepted || !a.AMPending || !a.Attempts[0].NotCounted || a.CountedAttempts() != 0 ||
				!strings.Contains(a.Diagnostics, "does not count against max_am_attempts") {
				t.Fatalf("app after its AM was taken away (%s): %+v", reason, a)
			}
			if a.Blacklist != nil {
				t.Fatalf("the ended attempt's blacklist %v outlived it", a.Blacklist)
			}
			// The next AM fails by itself: with one attempt allowed, the app fails.
			am2 := h.placeAM(app, "n1", 2)
			one := 1
			h.ok(ContainerUpdateType, &ContainerUpdateRequest{NodeID: "n1", Updates: []ContainerStatus{{ID: am2,
				State: scheduler.ContainerCompleted, ExitCode: &one, Reason: scheduler.ReasonExited}}})
			if a := h.app(app); a.State != scheduler.AppFailed || a.CountedAttempts() != 1 || !strings.Contains(a.Diagnostics, "max_am_attempts 1") {
				t.Fatalf("app after a failing second attempt: %+v", a)
			}
		})
	}
}

// Attempts that do not count are still bounded: at MaxAMAttemptsLimit
// attempts the app fails, so an AM that keeps losing its node cannot grow
// the app's record without end.
func TestUncountedAttemptsAreBounded(t *testing.T) {
	h := newHarness(t)
	h.register("n1", 1<<20)
	app := h.submit(1)
	for attempt := 1; attempt <= scheduler.MaxAMAttemptsLimit; attempt++ {
		am := h.placeAM(app, "n1", attempt)
		h.ok(ContainerUpdateType, &ContainerUpdateRequest{NodeID: "n1", Updates: []ContainerStatus{{ID: am,
			State: scheduler.ContainerCompleted, Reason: scheduler.ReasonNodeStopped}}})
	}
	if a := h.app(app); a.State != scheduler.AppFailed || len(a.Attempts) != scheduler.MaxAMAttemptsLimit ||
		!strings.Contains(a.Diagnostics, "the most any app has") {
		t.Fatalf("after %d lost attempts: %s, %d attempts, %q", scheduler.MaxAMAttemptsLimit, a.State, len(a.Attempts), a.Diagnostics)
	}
}

// The blacklist of an app's current attempt changes by additions and
// removals; the same change again writes nothing; a bad one (malformed
// node, past the bound, an old attempt) is refused and changes nothing;
// it survives a snapshot.
func TestAppBlacklist(t *testing.T) {
	h := newHarness(t)
	h.register("n1", 4096)
	app := h.submit(1)
	h.placeAM(app, "n1", 1)
	h.ok(AppBlacklistType, &AppBlacklistRequest{AppID: app, Attempt: 1, Additions: []string{"n2"}}) // placed, not registered yet: its attempt all the same
	h.ok(AppRegisterType, &AppRegisterRequest{AppID: app, Attempt: 1})
	h.ok(AppBlacklistType, &AppBlacklistRequest{AppID: app, Attempt: 1, Additions: []string{"n3", "n2"}})
	if got := h.app(app).Blacklist; !slices.Equal(got, []string{"n2", "n3"}) {
		t.Fatalf("blacklist %v, want [n2 n3]", got)
	}
	req := &AppBlacklistRequest{AppID: app, Attempt: 1, Additions: []string{"n2"}}
	if h.f.State().AppBlacklistChanges(req) {
		t.Fatalf("blacklisting n2 again counts as a change")
	}
	before := h.app(app).ModifyIndex
	h.ok(AppBlacklistType, req)
	if h.app(app).ModifyIndex != before {
		t.Fatalf("blacklisting n2 again changed the app")
	}
	h.ok(AppBlacklistType, &AppBlacklistRequest{AppID: app, Attempt: 1, Removals: []string{"n3"}})
	if got := h.app(app).Blacklist; !slices.Equal(got, []string{"n2"}) {
		t.Fatalf("blacklist %v after removing n3, want [n2]", got)
	}
	h.refused(AppBlacklistType, &AppBlacklistRequest{AppID: app, Attempt: 1, Additions: []string{"a/b"}}, "blacklist_additions[0]")
	h.refused(AppBlacklistType, &AppBlacklistRequest{AppID: app, Attempt: 2, Additions: []string{"n4"}}, "not its current attempt")
	var many []string
	for i := range scheduler.MaxBlacklistedNodes {
		many = append(many, fmt.Sprintf("m%d", i))
	}
	h.refused(AppBlacklistType, &AppBlacklistRequest{AppID: app, Attempt: 1, Additions: many}, "at most")

	var buf bytes.Buffer
	if err := writeSnapshot(&buf, h.f.State()); err != nil {
		t.Fatal(err)
	}
	restored := New(nil)
	if err := restored.Restore(io.NopCloser(&buf)); err != nil {
		t.Fatal(err)
	}
	if a, _ := restored.State().App(app); !slices.Equal(a.Blacklist, []string{"n2"}) {
		t.Fatalf("blacklist after a snapshot: %v", a.Blacklist)
	}
}
