package fsm

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/weft-sched/weft/scheduler"
)

// span is the request that creates app-f1's unmanaged AM here (sc2), at
// attempt; other fields as a router would send them.
func span(attempt int) *AppSubmitUnmanagedRequest {
	return &AppSubmitUnmanagedRequest{AppID: "app-f1", Home: "sc1", Subcluster: "sc2", Attempt: attempt,
		Queue: "prod", User: "alice", Priority: 4, Name: "wordcount", Now: int64(attempt) * 100}
}

// spanWithContainers creates app-f1's unmanaged AM at attempt 1 and places
// two containers for it on n1: one running, one not started.
func spanWithContainers(t *testing.T) (h *harness, running, allocated string) {
	h = newHarness(t)
	h.ok(QueueConfigApplyType, &QueueConfigApplyRequest{Config: testConfig(), Now: 1})
	h.register("n1", 8192)
	h.ok(AppSubmitUnmanagedType, span(1))
	h.ok(AskUpdateType, &AskUpdateRequest{AppID: "app-f1", Attempt: 1, SeenIndex: h.index,
		Asks: []scheduler.Ask{{AskID: 1, Count: 2, Resources: small, ExecutionType: scheduler.Guaranteed}}})
	ids := h.ok(PlanApplyType, &PlanApplyRequest{Now: 150, Placements: []scheduler.Placement{
		{AppID: "app-f1", Attempt: 1, AskID: 1, NodeID: "n1", Resources: small},
		{AppID: "app-f1", Attempt: 1, AskID: 1, NodeID: "n1", Resources: small}}}).(*PlanResult).IDs
	h.ok(ContainerUpdateType, &ContainerUpdateRequest{NodeID: "n1", Updates: []ContainerStatus{
		{ID: ids[0], State: scheduler.ContainerRunning, At: 160, StartedAt: 160}}})
	return h, ids[0], ids[1]
}

func TestUnmanagedAMIsCreatedRunningWithoutAnAMContainer(t *testing.T) {
	h := newHarness(t)
	h.ok(QueueConfigApplyType, &QueueConfigApplyRequest{Config: testConfig(), Now: 1})
	if res := h.ok(AppSubmitUnmanagedType, span(2)); res != nil {
		t.Fatalf("answered %v, want nil", res)
	}
	a := h.app("app-f1")
	switch {
	case a.State != scheduler.AppRunning || a.AMPending || a.Queue != "root.prod":
		t.Fatalf("state %s, am_pending %v, queue %s; want RUNNING, false, root.prod", a.State, a.AMPending, a.Queue)
	case a.Unmanaged == nil || *a.Unmanaged != (scheduler.Unmanaged{Home: "sc1", Subcluster: "sc2"}):
		t.Fatalf("unmanaged %+v", a.Unmanaged)
	case len(a.Attempts) != 1 || a.Attempts[0] != (scheduler.Attempt{Attempt: 2, StartedAt: 200}):
		t.Fatalf("attempts %+v, want one: attempt 2 with no container", a.Attempts)
	case a.Spec.AMType != scheduler.AMTypeUnmanaged || !a.Spec.AMResources.IsZero() || a.Spec.User != "alice" ||
		a.Spec.Priority != 4 || a.Spec.Name != "wordcount":
		t.Fatalf("spec %+v", a.Spec)
	case a.CreateIndex != h.index || len(h.f.State().AppContainers("app-f1")) != 0:
		t.Fatalf("create index %d (want %d), containers %v", a.CreateIndex, h.index, h.f.State().AppContainers("app-f1"))
	}
	if active := h.f.State().ActiveApps(); len(active) != 1 || active[0].ID != "app-f1" {
		t.Fatalf("active apps %v", active)
	}
}

func TestUnmanagedAMRefusesBadRequests(t *testing.T) {
	for _, tc := range []struct {
		name   string
		change func(*AppSubmitUnmanagedRequest)
		want   string
	}{
		{"local app ID", func(r *AppSubmitUnmanagedRequest) { r.AppID = "app-7" }, "app_id"},
		{"no home", func(r *AppSubmitUnmanagedRequest) { r.Home = "" }, "home"},
		{"home is here", func(r *AppSubmitUnmanagedRequest) { r.Home = "sc2" }, "home"},
		{"bad subcluster", func(r *AppSubmitUnmanagedRequest) { r.Subcluster = "SC2" }, "subcluster"},
		{"attempt 0", func(r *AppSubmitUnmanagedRequest) { r.Attempt = 0 }, "attempt"},
		{"attempt too high", func(r *AppSubmitUnmanagedRequest) { r.Attempt = scheduler.MaxAMAttemptsLimit + 1 }, "attempt"},
		{"blank user", func(r *AppSubmitUnmanagedRequest) { r.User = " " }, "user"},
		{"long name", func(r *AppSubmitUnmanagedRequest) { r.Name = strings.Repeat("n", scheduler.MaxAppNameLength+1) }, "name"},
		{"no such queue", func(r *AppSubmitUnmanagedRequest) { r.Queue = "nope" }, "nope"},
		{"parent queue", func(r *AppSubmitUnmanagedRequest) { r.Queue = "root" }, "root"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t)
			h.ok(QueueConfigApplyType, &QueueConfigApplyRequest{Config: testConfig(), Now: 1})
			req := span(1)
			tc.change(req)
			h.refused(AppSubmitUnmanagedType, req, tc.want)
			if st := h.f.State(); len(st.Apps()) != 0 {
				t.Fatalf("a refused span created an app")
			}
		})
	}
}

func TestUnmanagedAMAtItsAttemptIsLeftAsItIs(t *testing.T) {
	h, running, _ := spanWithContainers(t)
	before := h.f.State()
	again := span(1)
	again.Now = 999 // a retry, later
	if res := h.ok(AppSubmitUnmanagedType, again); res != nil {
		t.Fatalf("answered %v, want nil", res)
	}
	for tab := Table(0); tab < numTables; tab++ {
		if before.TableIndex(tab) != h.f.State().TableIndex(tab) {
			t.Fatalf("the same attempt again changed table %s", tab)
		}
	}
	if c := h.container(running); c.KillRequested || !c.State.Live() {
		t.Fatalf("its container was stopped: %+v", c)
	}
}

// The home's AM moves to its next attempt: the unmanaged AM follows, and
// the old attempt's containers are stopped, killed, as when an AM attempt
// fails — the running one ordered killed, the unstarted one completed.
func TestNewerAttemptReplacesTheUnmanagedAMAndStopsItsContainers(t *testing.T) {
	h, running, allocated := spanWithContainers(t)
	h.ok(AppSubmitUnmanagedType, span(2))
	a := h.app("app-f1")
	if a.State != scheduler.AppRunning || a.CurrentAttempt() != 2 || len(a.Attempts) != 2 || len(a.Asks) != 0 {
		t.Fatalf("state %s, attempt %d, attempts %+v, asks %v", a.State, a.CurrentAttempt(), a.Attempts, a.Asks)
	}
	if old := a.Attempts[0]; old.FinishedAt != 200 || !strings.Contains(old.Diagnostics, "replaced by attempt 2") {
		t.Fatalf("old attempt %+v", old)
	}
	if c := h.container(running); !c.KillRequested || c.KillReason != scheduler.ReasonKilled {
		t.Fatalf("running container of the old attempt %+v, want a kill order (killed)", c)
	}
	if c := h.container(allocated); c.State != scheduler.ContainerCompleted || c.Reason != scheduler.ReasonKilled {
		t.Fatalf("unstarted container of the old attempt %+v, want completed (killed)", c)
	}
	// The new attempt asks and is placed like any app.
	h.ok(AskUpdateType, &AskUpdateRequest{AppID: "app-f1", Attempt: 2, SeenIndex: h.index,
		Asks: []scheduler.Ask{{AskID: 1, Count: 1, Resources: small, ExecutionType: scheduler.Guaranteed}}})
	res := h.ok(PlanApplyType, &PlanApplyRequest{Now: 300, Placements: []scheduler.Placement{
		{AppID: "app-f1", Attempt: 2, AskID: 1, NodeID: "n1", Resources: small}}}).(*PlanResult)
	if c := h.container(res.IDs[0]); c.Attempt != 2 || !strings.HasPrefix(c.ID, "sc2.c-") {
		t.Fatalf("new attempt's container %+v", c)
	}
}

func TestStaleUnmanagedAMsAreRefused(t *testing.T) {
	h, _, _ := spanWithContainers(t)
	h.ok(AppSubmitUnmanagedType, span(3))
	h.refused(AppSubmitUnmanagedType, span(2), "attempt 2 is over")
	if err, _ := h.apply(AppSubmitUnmanagedType, span(1)).(error); !errors.Is(err, ErrStale) {
		t.Fatalf("an older attempt: %v, want ErrStale", err)
	}
	// The same app from another home: a conflict, not a new span.
	other := span(3)
	other.Home = "sc9"
	if err, _ := h.apply(AppSubmitUnmanagedType, other).(error); !errors.Is(err, ErrConflict) || !strings.Contains(err.Error(), "spans from sc1") {
		t.Fatalf("another home: %v, want ErrConflict", err)
	}

	// Ended: never created again, at any attempt.
	h.ok(AppFinishType, &AppFinishRequest{AppID: "app-f1", State: scheduler.AppKilled, Diagnostics: "killed by user", Now: 400})
	for _, attempt := range []int{3, 4} {
		err, _ := h.apply(AppSubmitUnmanagedType, span(attempt)).(error)
		if !errors.Is(err, ErrStale) || !strings.Contains(err.Error(), "has ended") {
			t.Fatalf("attempt %d of an ended app: %v, want ErrStale", attempt, err)
		}
	}
}

// A retried request keeps its kind: a stale refusal replays as stale.
func TestStaleRefusalReplaysAsStale(t *testing.T) {
	h, _, _ := spanWithContainers(t)
	h.ok(AppSubmitUnmanagedType, span(2))
	t0 := time.Unix(1000, 0)
	h.request("late", t0, AppSubmitUnmanagedType, span(1))
	r, ok := h.request("late", t0, AppSubmitUnmanagedType, span(1)).(*Replay)
	if !ok {
		t.Fatalf("the retry was applied again")
	}
	if err, _ := r.Result.(error); !errors.Is(err, ErrStale) {
		t.Fatalf("replayed %v, want ErrStale", r.Result)
	}
}

// The AMRMProxy ends an unmanaged AM KILLED when its home app was killed:
// every container of the app here stops. A managed AM may not.
func TestUnmanagedAMFinishesKilled(t *testing.T) {
	h, running, allocated := spanWithContainers(t)
	h.ok(AppFinishType, &AppFinishRequest{AppID: "app-f1", Attempt: 1, State: scheduler.AppKilled, Diagnostics: "the home app was killed", Now: 500})
	if a := h.app("app-f1"); a.State != scheduler.AppKilled || a.FinishedAt != 500 {
		t.Fatalf("app %s at %d", a.State, a.FinishedAt)
	}
	if c := h.container(running); !c.KillRequested {
		t.Fatalf("running container not ordered killed: %+v", c)
	}
	if c := h.container(allocated); c.State != scheduler.ContainerCompleted {
		t.Fatalf("unstarted container not completed: %+v", c)
	}

	m := h.runningApp("n1")
	h.refused(AppFinishType, &AppFinishRequest{AppID: m, Attempt: 1, State: scheduler.AppKilled, Now: 500}, "cannot be ended as KILLED")
}

func TestUnmanagedAMsContainersCarryTheSubcluster(t *testing.T) {
	h, running, allocated := spanWithContainers(t)
	for _, id := range []string{running, allocated} {
		if !strings.HasPrefix(id, "sc2.c-") {
			t.Fatalf("container %s of an unmanaged AM, want sc2.c-…", id)
		}
	}
	// Centrally allocated opportunistic containers too; a managed app's
	// are plain.
	res := h.ok(PlanApplyType, &PlanApplyRequest{Now: 170, Placements: []scheduler.Placement{
		{AppID: "app-f1", Attempt: 1, AskID: 2, NodeID: "n1", Resources: small, Opportunistic: true}}}).(*PlanResult)
	if !strings.HasPrefix(res.IDs[0], "sc2.c-") {
		t.Fatalf("opportunistic container %q", res.IDs[0])
	}
	m := h.runningApp("n1")
	if am := h.app(m).Attempts[0].ContainerID; strings.Contains(am, ".") {
		t.Fatalf("a managed app's AM container %q", am)
	}
	// And it cannot get an AM container.
	res = h.ok(PlanApplyType, &PlanApplyRequest{Now: 180, Placements: []scheduler.Placement{
		{AppID: "app-f1", Attempt: 2, NodeID: "n1", Resources: small, IsAM: true}}}).(*PlanResult)
	if res.IDs[0] != "" {
		t.Fatalf("an unmanaged AM got an AM container %s", res.IDs[0])
	}
}
