package fsm

import (
	"bytes"
	"io"
	"math"
	"reflect"
	"sort"
	"testing"

	"github.com/weft-sched/weft/scheduler"
)

// checkOpsInvariants: the draining, down and finished indexes hold exactly
// the nodes and apps they describe, and every container belongs to an app
// the state holds.
func checkOpsInvariants(t testing.TB, st *State) {
	t.Helper()
	var wantDraining, wantDown, gotDraining, gotDown, wantFinished, gotFinished []string
	for _, n := range st.Nodes() {
		switch n.Status {
		case scheduler.NodeDraining:
			wantDraining = append(wantDraining, n.ID)
		case scheduler.NodeDown:
			wantDown = append(wantDown, n.ID)
		}
	}
	for _, n := range st.DrainingNodes() {
		gotDraining = append(gotDraining, n.ID)
	}
	for _, n := range st.DownNodesBefore(math.MaxInt64) {
		gotDown = append(gotDown, n.ID)
	}
	for _, a := range st.Apps() {
		if a.State.Terminal() {
			wantFinished = append(wantFinished, a.ID)
		}
	}
	last := int64(-1)
	st.FinishedApps(func(a *scheduler.App) bool {
		if a.FinishedAt < last {
			t.Fatalf("finished index out of order at %s", a.ID)
		}
		last = a.FinishedAt
		gotFinished = append(gotFinished, a.ID)
		return true
	})
	sort.Strings(gotDown)
	sort.Strings(gotFinished)
	if !reflect.DeepEqual(gotDraining, wantDraining) || !reflect.DeepEqual(gotDown, wantDown) ||
		!reflect.DeepEqual(gotFinished, wantFinished) || st.NumFinishedApps() != len(wantFinished) {
		t.Fatalf("indexes: draining %v want %v, down %v want %v, finished %v (%d) want %v",
			gotDraining, wantDraining, gotDown, wantDown, gotFinished, st.NumFinishedApps(), wantFinished)
	}
	n := 0
	for _, a := range st.Apps() {
		n += len(st.AppContainers(a.ID))
	}
	if cs := st.Containers(); n != len(cs) {
		t.Fatalf("%d containers, %d of them under apps the state holds", len(cs), n)
	}
}

func TestNodeDrainCommand(t *testing.T) {
	h := newHarness(t)
	h.register("n1", 4096)
	h.register("n2", 4096)
	app := h.submit(1)
	am := h.placeAM(app, "n1", 1)

	h.refused(NodeDrainType, &NodeDrainRequest{ID: "nx", Drain: true, Deadline: 100, Now: 10}, "not registered")
	h.refused(NodeDrainType, &NodeDrainRequest{ID: "n1", Drain: true, Now: 10}, "deadline")
	h.ok(NodeDrainType, &NodeDrainRequest{ID: "n1", Drain: true, Deadline: 100, Now: 10})
	n1, _ := h.f.State().Node("n1")
	if n1.Status != scheduler.NodeDraining || n1.DrainDeadline != 100 || n1.StatusAt != 10 {
		t.Fatalf("drained node: %+v", n1)
	}
	// Running containers stay; nothing new is placed there.
	if c := h.container(am); !c.State.Live() {
		t.Fatalf("drain stopped %s", am)
	}
	other := h.submit(1)
	res := h.ok(PlanApplyType, &PlanApplyRequest{Placements: []scheduler.Placement{{
		AppID: other, Attempt: 1, NodeID: "n1", Resources: scheduler.Resources{MemoryMB: 256, Vcores: 1}, IsAM: true}}}).(*PlanResult)
	if res.IDs[0] != "" {
		t.Fatalf("a placement on a DRAINING node was committed")
	}
	// A restarted agent keeps the drain; a new deadline replaces the old.
	h.ok(NodeRegisterType, &NodeRegisterRequest{ID: "n1", Address: "n1:8049", Capacity: scheduler.Resources{MemoryMB: 4096, Vcores: 8}, Now: 20})
	h.ok(NodeDrainType, &NodeDrainRequest{ID: "n1", Drain: true, Deadline: 200, Now: 30})
	n1, _ = h.f.State().Node("n1")
	if n1.Status != scheduler.NodeDraining || n1.DrainDeadline != 200 || n1.StatusAt != 10 {
		t.Fatalf("re-registered, re-drained node: %+v", n1)
	}
	h.ok(NodeDrainType, &NodeDrainRequest{ID: "n1", Now: 40})
	n1, _ = h.f.State().Node("n1")
	if n1.Status != scheduler.NodeReady || n1.DrainDeadline != 0 || len(h.f.State().DrainingNodes()) != 0 {
		t.Fatalf("undrained node: %+v", n1)
	}
	// A DOWN node cannot be drained.
	h.ok(NodeStatusType, &NodeStatusRequest{ID: "n2", Epoch: 1, Status: scheduler.NodeDown, Now: 50})
	h.refused(NodeDrainType, &NodeDrainRequest{ID: "n2", Drain: true, Deadline: 100, Now: 60}, "DOWN")
}

func TestGCRemovesExactlyWhatIsStillGarbage(t *testing.T) {
	h := newHarness(t)
	h.register("n1", 8192)
	h.register("n2", 4096)
	done, running, dying := h.submit(1), h.submit(1), h.submit(1)
	h.placeAM(done, "n1", 1)
	amRunning := h.placeAM(running, "n1", 1)
	amDying := h.placeAM(dying, "n1", 1)
	h.ok(ContainerUpdateType, &ContainerUpdateRequest{NodeID: "n1", Updates: []ContainerStatus{
		{ID: amDying, State: scheduler.ContainerRunning, At: 5}}})
	h.ok(AppFinishType, &AppFinishRequest{AppID: done, State: scheduler.AppKilled, Now: 10})  // AM never started: gone at once
	h.ok(AppFinishType, &AppFinishRequest{AppID: dying, State: scheduler.AppKilled, Now: 11}) // AM still being killed
	h.ok(NodeStatusType, &NodeStatusRequest{ID: "n2", Epoch: 1, Status: scheduler.NodeDown, Now: 12})
	if h.f.State().NumFinishedApps() != 2 {
		t.Fatalf("%d finished apps, want 2", h.f.State().NumFinishedApps())
	}

	res := h.ok(GCType, &GCRequest{AppIDs: []string{done, running, dying, "app-999"}, NodeIDs: []string{"n1", "n2", "n9"}}).(*GCResult)
	if *res != (GCResult{Apps: 1, Containers: 1, Nodes: 1}) {
		t.Fatalf("removed %+v, want the finished app, its container and the DOWN node", *res)
	}
	st := h.f.State()
	if _, ok := st.App(done); ok {
		t.Fatalf("%s is still there", done)
	}
	if _, ok := st.Node("n2"); ok {
		t.Fatal("n2 is still there")
	}
	for _, id := range []string{running, dying} {
		if _, ok := st.App(id); !ok {
			t.Fatalf("%s was removed", id)
		}
	}
	if _, ok := st.Container(amRunning); !ok {
		t.Fatal("a running app's container was removed")
	}
	// Once its AM is reported gone, the killed app is garbage too.
	h.ok(ContainerUpdateType, &ContainerUpdateRequest{NodeID: "n1", Updates: []ContainerStatus{
		{ID: amDying, State: scheduler.ContainerCompleted, Reason: scheduler.ReasonKilled, At: 20}}})
	res = h.ok(GCType, &GCRequest{AppIDs: []string{dying}}).(*GCResult)
	if res.Apps != 1 || h.f.State().NumFinishedApps() != 0 {
		t.Fatalf("second collection: %+v, %d finished left", *res, h.f.State().NumFinishedApps())
	}

	// Snapshot and restore keep the indexes.
	data := persist(t, h.f)
	g := New(nil)
	if err := g.Restore(io.NopCloser(bytes.NewReader(data))); err != nil {
		t.Fatal(err)
	}
	checkInvariants(t, g.State())
	if !sameTables(h.f.State(), g.State()) || !bytes.Equal(persist(t, g), data) {
		t.Fatal("restored state differs")
	}
}
