package fsm

import (
	"testing"

	"github.com/weft-sched/weft/scheduler"
)

// AppContainersChangedSince returns only the containers changed after the
// index given, and a container changed again moves to its new index.
func TestAppContainersChangedSince(t *testing.T) {
	h := seeded(t)
	st := h.f.State()
	app, am := st.ActiveApps()[0].ID, st.Containers()[0].ID
	seen := st.Index()
	if got := st.AppContainersChangedSince(app, seen); len(got) != 0 {
		t.Fatalf("nothing changed since %d, got %d containers", seen, len(got))
	}
	if got := st.AppContainersChangedSince(app, 0); len(got) != 1 || got[0].ID != am {
		t.Fatalf("since 0: %v, want the AM container", got)
	}
	h.ok(ContainerUpdateType, &ContainerUpdateRequest{NodeID: "n1",
		Records: []ContainerRecord{{ID: "o-n1-1-1", AppID: app, Attempt: 1, AskID: 2, Resources: small,
			State: scheduler.ContainerCompleted, AllocatedAt: 3, FinishedAt: 4}}})
	mid := h.f.State().Index()
	h.ok(ContainerUpdateType, &ContainerUpdateRequest{NodeID: "n1",
		Updates: []ContainerStatus{{ID: am, State: scheduler.ContainerRunning, At: 5, StartedAt: 5}}})
	st = h.f.State()
	if got := st.AppContainersChangedSince(app, seen); len(got) != 2 || got[0].ID != "o-n1-1-1" || got[1].ID != am {
		t.Fatalf("since %d: %v, want the record then the AM", seen, got)
	}
	if got := st.AppContainersChangedSince(app, mid); len(got) != 1 || got[0].ID != am || got[0].State != scheduler.ContainerRunning {
		t.Fatalf("since %d: %v, want only the AM, running", mid, got)
	}
	if got := st.AppContainersChangedSince("app-nope", 0); len(got) != 0 {
		t.Fatalf("an unknown app: %v", got)
	}
}
