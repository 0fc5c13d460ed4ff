package fsm

import (
	"bytes"
	"io"
	"math"
	"reflect"
	"sort"
	"strings"
	"testing"

	"github.com/weft-sched/weft/scheduler"
)

// harness applies commands at increasing indexes and checks the FSM's
// invariants after each one.
type harness struct {
	t     testing.TB
	f     *FSM
	index uint64
}

func newHarness(t *testing.T) *harness { return &harness{t: t, f: New(nil)} }

func (h *harness) apply(mt MessageType, body any) any {
	h.t.Helper()
	h.index++
	res := h.f.Apply(command(h.t, h.index, mt, body))
	checkInvariants(h.t, h.f.State())
	return res
}

func (h *harness) ok(mt MessageType, body any) any {
	h.t.Helper()
	res := h.apply(mt, body)
	if err, isErr := res.(error); isErr {
		h.t.Fatalf("command %d refused: %v", mt, err)
	}
	return res
}

func (h *harness) refused(mt MessageType, body any, want string) {
	h.t.Helper()
	before := h.f.State()
	res := h.apply(mt, body)
	err, isErr := res.(error)
	if !isErr || !strings.Contains(err.Error(), want) {
		h.t.Fatalf("command %d: got %v, want an error mentioning %q", mt, res, want)
	}
	after := h.f.State()
	for tab := Table(0); tab < numTables; tab++ {
		if before.TableIndex(tab) != after.TableIndex(tab) {
			h.t.Fatalf("refused command changed table %s", tab)
		}
	}
}

// checkInvariants: every node's accounting equals the sum of its live
// containers; no node's guaranteed allocation exceeds its capacity; indexes
// agree with the main tables.
func checkInvariants(t testing.TB, st *State) {
	t.Helper()
	for _, n := range st.Nodes() {
		var g, o scheduler.Resources
		var rg, ro, queued int
		for _, c := range st.NodeLiveContainers(n.ID) {
			if !c.State.Live() {
				t.Fatalf("completed container %s in the live index", c.ID)
			}
			if c.ExecutionType == scheduler.Opportunistic {
				switch c.State {
				case scheduler.ContainerRunning:
					o = o.Add(c.Resources)
					ro++
				case scheduler.ContainerQueued:
					queued++
				}
			} else {
				g = g.Add(c.Resources)
				if c.State == scheduler.ContainerRunning {
					rg++
				}
			}
		}
		if g.String() != n.AllocatedGuaranteed.String() || o.String() != n.AllocatedOpportunistic.String() ||
			rg != n.RunningGuaranteed || ro != n.RunningOpportunistic || queued != n.Queued {
			t.Fatalf("node %s accounting %v/%v/%d/%d/%d queued, containers say %v/%v/%d/%d/%d",
				n.ID, n.AllocatedGuaranteed, n.AllocatedOpportunistic, n.RunningGuaranteed, n.RunningOpportunistic, n.Queued, g, o, rg, ro, queued)
		}
		if !n.AllocatedGuaranteed.Fits(n.Capacity) {
			t.Fatalf("node %s overcommitted: %v of %v", n.ID, n.AllocatedGuaranteed, n.Capacity)
		}
	}
	live := 0
	for _, c := range st.Containers() {
		if c.State.Live() {
			live++
		}
	}
	total := 0
	for _, n := range st.Nodes() {
		total += len(st.NodeLiveContainers(n.ID))
	}
	if total != live {
		t.Fatalf("live index holds %d containers, table has %d live", total, live)
	}
	// The container indexes are well-formed B+ trees.
	for name, ix := range map[string]index[*scheduler.Container]{"containers": st.containers, "byApp": st.byApp,
		"byAppChange": st.byAppChange, "liveByNode": st.liveByNode, "marked": st.marked, "unstarted": st.unstarted} {
		if err := ix.check(); err != nil {
			t.Fatalf("%s index: %v", name, err)
		}
	}
	// The time-ordered indexes hold exactly the containers they describe.
	var wantMarked, wantUnstarted []string
	for _, c := range st.Containers() {
		if markedKey(c) != "" {
			wantMarked = append(wantMarked, c.ID)
		}
		if unstartedKey(c) != "" {
			wantUnstarted = append(wantUnstarted, c.ID)
		}
	}
	ids := func(cs []*scheduler.Container) []string {
		var out []string
		for _, c := range cs {
			out = append(out, c.ID)
		}
		sort.Strings(out)
		return out
	}
	if got := ids(st.PreemptionMarked()); !reflect.DeepEqual(got, wantMarked) {
		t.Fatalf("marked index holds %v, want %v", got, wantMarked)
	}
	if got := ids(st.AllocatedBefore(math.MaxInt64)); !reflect.DeepEqual(got, wantUnstarted) {
		t.Fatalf("unstarted index holds %v, want %v", got, wantUnstarted)
	}
	// The change index holds each app's containers, by modify index.
	for _, a := range st.Apps() {
		all, changed := st.AppContainers(a.ID), st.AppContainersChangedSince(a.ID, 0)
		if got, want := ids(changed), ids(all); !reflect.DeepEqual(got, want) {
			t.Fatalf("app %s: change index holds %v, want %v", a.ID, got, want)
		}
		for i := 1; i < len(changed); i++ {
			if changed[i].ModifyIndex < changed[i-1].ModifyIndex {
				t.Fatalf("app %s: change index out of order at %s", a.ID, changed[i].ID)
			}
		}
	}
	checkIdentityInvariants(t, st)
	checkOpsInvariants(t, st)
	for _, a := range st.ActiveApps() {
		if a.State.Terminal() {
			t.Fatalf("terminal app %s in the active index", a.ID)
		}
	}
	for _, a := range st.Apps() {
		var used scheduler.Resources
		live := 0
		for _, c := range st.AppContainers(a.ID) {
			if c.State.Live() && c.ExecutionType == scheduler.Guaranteed {
				used, live = used.Add(c.Resources), live+1
			}
		}
		if used.String() != a.Used.String() || live != a.Live {
			t.Fatalf("app %s usage %v/%d, containers say %v/%d", a.ID, a.Used, a.Live, used, live)
		}
	}
}

var small = scheduler.Resources{MemoryMB: 1024, Vcores: 1}

func (h *harness) register(id string, mem int64) uint64 {
	return h.ok(NodeRegisterType, &NodeRegisterRequest{ID: id, Address: id + ":8049", Capacity: scheduler.Resources{MemoryMB: mem, Vcores: 8}}).(uint64)
}

func (h *harness) submit(n int) string {
	spec := scheduler.AppSpec{DShell: scheduler.DShell{NumContainers: n, Command: []string{"true"}, Resources: small}}
	return h.ok(AppSubmitType, &AppSubmitRequest{Spec: spec, Now: 1}).(string)
}

func (h *harness) placeAM(app, node string, attempt int) string {
	h.t.Helper()
	res := h.ok(PlanApplyType, &PlanApplyRequest{Placements: []scheduler.Placement{{
		AppID: app, Attempt: attempt, NodeID: node, Resources: scheduler.Resources{MemoryMB: 256, Vcores: 1}, IsAM: true,
	}}}).(*PlanResult)
	if res.IDs[0] == "" {
		h.t.Fatalf("AM placement refused: %v", res.Refused)
	}
	return res.IDs[0]
}

func (h *harness) app(id string) *scheduler.App {
	a, ok := h.f.State().App(id)
	if !ok {
		h.t.Fatalf("no app %s", id)
	}
	return a
}

func (h *harness) container(id string) *scheduler.Container {
	c, ok := h.f.State().Container(id)
	if !ok {
		h.t.Fatalf("no container %s", id)
	}
	return c
}

func TestAppLifecycle(t *testing.T) {
	h := newHarness(t)
	h.register("n1", 8192)
	app := h.submit(3)
	if a := h.app(app); a.State != scheduler.AppAccepted || !a.AMPending || a.Queue != scheduler.DefaultQueue {
		t.Fatalf("submitted app %+v", a)
	}
	am := h.placeAM(app, "n1", 1)
	if a := h.app(app); a.AMPending || a.CurrentAttempt() != 1 || a.Attempts[0].ContainerID != am {
		t.Fatalf("after AM placement: %+v", a)
	}
	// Asks are refused before the AM registers.
	h.refused(AskUpdateType, &AskUpdateRequest{AppID: app, Attempt: 1, Asks: []scheduler.Ask{{AskID: 1, Count: 3, Resources: small, ExecutionType: scheduler.Guaranteed}}}, "not registered")
	h.ok(AppRegisterType, &AppRegisterRequest{AppID: app, Attempt: 1})
	if h.app(app).State != scheduler.AppRunning {
		t.Fatalf("not RUNNING after register")
	}
	seen := h.f.State().Index()
	h.ok(AskUpdateType, &AskUpdateRequest{AppID: app, Attempt: 1, SeenIndex: seen,
		Asks: []scheduler.Ask{{AskID: 1, Count: 3, Resources: small, ExecutionType: scheduler.Guaranteed}}})

	// Three placements fit the ask; a fourth (which the node has room for)
	// has no outstanding ask left.
	var ps []scheduler.Placement
	for i := 0; i < 4; i++ {
		ps = append(ps, scheduler.Placement{AppID: app, Attempt: 1, AskID: 1, NodeID: "n1", Resources: small})
	}
	res := h.ok(PlanApplyType, &PlanApplyRequest{Placements: ps}).(*PlanResult)
	if res.IDs[0] == "" || res.IDs[2] == "" || res.IDs[3] != "" || len(res.Refused) != 1 || !strings.Contains(res.Refused[0], "no outstanding ask") {
		t.Fatalf("plan result %+v", res)
	}
	// An AM that had not seen those placements asks for 3 again: nothing new.
	h.ok(AskUpdateType, &AskUpdateRequest{AppID: app, Attempt: 1, SeenIndex: seen,
		Asks: []scheduler.Ask{{AskID: 1, Count: 3, Resources: small, ExecutionType: scheduler.Guaranteed}}})
	if p := h.app(app).Pending(); !p.IsZero() {
		t.Fatalf("stale ask re-opened placements: pending %v", p)
	}

	// The agent reports them running, then one exits 0.
	zero := 0
	h.ok(ContainerUpdateType, &ContainerUpdateRequest{NodeID: "n1", Updates: []ContainerStatus{
		{ID: res.IDs[0], State: scheduler.ContainerRunning, At: 5},
		{ID: res.IDs[1], State: scheduler.ContainerRunning, At: 5},
		{ID: am, State: scheduler.ContainerRunning, At: 4},
	}})
	h.ok(ContainerUpdateType, &ContainerUpdateRequest{NodeID: "n1", Updates: []ContainerStatus{
		{ID: res.IDs[0], State: scheduler.ContainerCompleted, ExitCode: &zero, Reason: scheduler.ReasonExited, At: 9},
		{ID: res.IDs[0], State: scheduler.ContainerRunning, At: 10}, // late report: ignored
	}})
	if c := h.container(res.IDs[0]); c.State != scheduler.ContainerCompleted || *c.ExitCode != 0 || c.FinishedAt != 9 {
		t.Fatalf("completed container %+v", c)
	}
	// Reports from the wrong node are ignored.
	h.ok(ContainerUpdateType, &ContainerUpdateRequest{NodeID: "n2", Updates: []ContainerStatus{{ID: res.IDs[1], State: scheduler.ContainerCompleted}}})
	if h.container(res.IDs[1]).State != scheduler.ContainerRunning {
		t.Fatalf("a report from another node changed a container")
	}

	// The AM finishes: started containers are marked for killing, the one
	// never started completes, the AM's own container is left to exit.
	h.ok(AppFinishType, &AppFinishRequest{AppID: app, Attempt: 1, State: scheduler.AppFinished, Now: 20})
	if a := h.app(app); a.State != scheduler.AppFinished || len(h.f.State().ActiveApps()) != 0 {
		t.Fatalf("app after finish: %+v", a)
	}
	if c := h.container(res.IDs[1]); !c.KillRequested || c.State != scheduler.ContainerRunning {
		t.Fatalf("running container after finish: %+v", c)
	}
	if c := h.container(res.IDs[2]); c.State != scheduler.ContainerCompleted || c.Reason != scheduler.ReasonKilled {
		t.Fatalf("allocated container after finish: %+v", c)
	}
	if c := h.container(am); c.KillRequested {
		t.Fatalf("the finishing AM's container was marked for killing")
	}
	// Its AM exiting now does not start another attempt.
	h.ok(ContainerUpdateType, &ContainerUpdateRequest{NodeID: "n1", Updates: []ContainerStatus{{ID: am, State: scheduler.ContainerCompleted, ExitCode: &zero, Reason: scheduler.ReasonExited}}})
	if a := h.app(app); a.State != scheduler.AppFinished || a.AMPending {
		t.Fatalf("app after AM exit: %+v", a)
	}
}

func TestPlanNeverOvercommits(t *testing.T) {
	h := newHarness(t)
	h.register("n1", 1000)
	// Four AM containers of 256 MiB do not fit in 1000 MiB.
	a1, a2, a3, a4 := h.submit(1), h.submit(1), h.submit(1), h.submit(1)
	var ps []scheduler.Placement
	for _, id := range []string{a1, a2, a3, a4} {
		ps = append(ps, scheduler.Placement{AppID: id, Attempt: 1, NodeID: "n1", Resources: scheduler.Resources{MemoryMB: 256, Vcores: 1}, IsAM: true})
	}
	res := h.ok(PlanApplyType, &PlanApplyRequest{Placements: ps}).(*PlanResult)
	placed := 0
	for _, id := range res.IDs {
		if id != "" {
			placed++
		}
	}
	if placed != 3 || len(res.Refused) != 1 || !strings.Contains(res.Refused[0], "exceeds the node's free guaranteed capacity") {
		t.Fatalf("plan %+v", res)
	}
	// IDs come from the plan's index and position: they never repeat.
	if res.IDs[0] != scheduler.GuaranteedContainerID(h.index, 0) {
		t.Fatalf("container ID %s", res.IDs[0])
	}
}

func TestNodeDownLosesContainersAndRetriesAM(t *testing.T) {
	h := newHarness(t)
	epoch := h.register("n1", 4096)
	h.register("n2", 4096)
	app := h.submit(1)
	am := h.placeAM(app, "n1", 1)
	h.ok(AppRegisterType, &AppRegisterRequest{AppID: app, Attempt: 1})

	// A stale decision (old epoch) changes nothing.
	h.ok(NodeStatusType, &NodeStatusRequest{ID: "n1", Epoch: epoch + 7, Status: scheduler.NodeDown})
	if n, _ := h.f.State().Node("n1"); n.Status != scheduler.NodeReady {
		t.Fatalf("stale epoch downed the node")
	}
	h.ok(NodeStatusType, &NodeStatusRequest{ID: "n1", Epoch: epoch, Status: scheduler.NodeDown, Reason: "heartbeat TTL expired"})
	if c := h.container(am); c.State != scheduler.ContainerCompleted || c.Reason != scheduler.ReasonLost {
		t.Fatalf("AM container on a down node: %+v", c)
	}
	a := h.app(app)
	if a.State != scheduler.AppAccepted || !a.AMPending || !strings.Contains(a.Diagnostics, "starting a new attempt") {
		t.Fatalf("app after losing its AM: %+v", a)
	}
	// Placements on a down node are refused.
	res := h.ok(PlanApplyType, &PlanApplyRequest{Placements: []scheduler.Placement{{AppID: app, Attempt: 2, NodeID: "n1",
		Resources: scheduler.Resources{MemoryMB: 256, Vcores: 1}, IsAM: true}}}).(*PlanResult)
	if res.IDs[0] != "" {
		t.Fatalf("placed on a down node")
	}
	// The first attempt was lost with its node: it does not count against
	// max_am_attempts (2), so two AMs that fail by themselves are needed.
	one := 1
	for attempt := 2; attempt <= 3; attempt++ {
		am := h.placeAM(app, "n2", attempt)
		h.ok(ContainerUpdateType, &ContainerUpdateRequest{NodeID: "n2", Updates: []ContainerStatus{{ID: am, State: scheduler.ContainerCompleted, ExitCode: &one, Reason: scheduler.ReasonExited}}})
	}
	if a := h.app(app); a.State != scheduler.AppFailed || !strings.Contains(a.Diagnostics, "no attempts left") || len(a.Attempts) != 3 ||
		!a.Attempts[0].NotCounted || a.Attempts[1].NotCounted || a.Attempts[2].NotCounted {
		t.Fatalf("app after one lost and two failed attempts: %+v", a)
	}

	// Re-registration raises the epoch and brings the node back.
	if e := h.register("n1", 4096); e != epoch+1 {
		t.Fatalf("epoch %d, want %d", e, epoch+1)
	}
}

func TestKillAndStop(t *testing.T) {
	h := newHarness(t)
	h.register("n1", 4096)
	app := h.submit(1)
	am := h.placeAM(app, "n1", 1)
	h.refused(ContainerStopType, &ContainerStopRequest{AppID: "app-999", IDs: []string{am}, Reason: scheduler.ReasonKilled}, "belongs to")
	h.refused(ContainerStopType, &ContainerStopRequest{IDs: []string{"c-1-1"}, Reason: scheduler.ReasonKilled}, "not found")
	h.ok(AppFinishType, &AppFinishRequest{AppID: app, State: scheduler.AppKilled, Diagnostics: "killed by user"})
	if c := h.container(am); c.State != scheduler.ContainerCompleted || c.Reason != scheduler.ReasonKilled {
		t.Fatalf("unstarted AM after kill: %+v", c)
	}
	h.ok(AppFinishType, &AppFinishRequest{AppID: app, State: scheduler.AppKilled}) // idempotent
	h.refused(AppFinishType, &AppFinishRequest{AppID: app, Attempt: 1, State: scheduler.AppFinished}, "already KILLED")
}

func TestSubmitValidation(t *testing.T) {
	h := newHarness(t)
	h.refused(AppSubmitType, &AppSubmitRequest{Spec: scheduler.AppSpec{Queue: "root", DShell: scheduler.DShell{NumContainers: 1, Command: []string{"x"}}}}, "parent queue")
	h.refused(AppSubmitType, &AppSubmitRequest{Spec: scheduler.AppSpec{DShell: scheduler.DShell{NumContainers: 0, Command: []string{"x"}}}}, "num_containers")
	h.refused(AppSubmitType, &AppSubmitRequest{Spec: scheduler.AppSpec{DShell: scheduler.DShell{NumContainers: 1}}}, "command")
	app := h.submit(1)
	// A queue with active apps cannot be removed.
	cfg := scheduler.DefaultQueueConfig()
	cfg.Root.Children[0].Name = "other"
	h.refused(QueueConfigApplyType, &QueueConfigApplyRequest{Config: cfg}, "has active apps")
	h.ok(AppFinishType, &AppFinishRequest{AppID: app, State: scheduler.AppKilled})
	h.ok(QueueConfigApplyType, &QueueConfigApplyRequest{Config: cfg})
}

func TestSnapshotRestoreWithTables(t *testing.T) {
	h := newHarness(t)
	h.register("n1", 4096)
	h.register("n2", 2048)
	done := h.submit(1)
	h.placeAM(done, "n1", 1)
	h.ok(AppFinishType, &AppFinishRequest{AppID: done, State: scheduler.AppKilled})
	live := h.submit(2)
	h.placeAM(live, "n2", 1)
	h.ok(AppRegisterType, &AppRegisterRequest{AppID: live, Attempt: 1})

	data := persist(t, h.f)
	g := New(nil)
	if err := g.Restore(io.NopCloser(bytes.NewReader(data))); err != nil {
		t.Fatal(err)
	}
	a, b := h.f.State(), g.State()
	checkInvariants(t, b)
	if !reflect.DeepEqual(a.Nodes(), b.Nodes()) || !reflect.DeepEqual(a.Apps(), b.Apps()) ||
		!reflect.DeepEqual(a.Containers(), b.Containers()) || !reflect.DeepEqual(a.ActiveApps(), b.ActiveApps()) ||
		!reflect.DeepEqual(a.NodeLiveContainers("n2"), b.NodeLiveContainers("n2")) || !statesEqual(a, b) {
		t.Fatalf("restored tables differ")
	}
	if !bytes.Equal(persist(t, g), data) {
		t.Fatalf("snapshot of the restored state differs")
	}
}
