package fsm

import (
	"bytes"
	"reflect"
	"strings"
	"testing"

	"github.com/weft-sched/weft/scheduler"
)

var oneCore = scheduler.Resources{MemoryMB: 512, Vcores: 1}

// runningApp submits an app and registers its first attempt on node.
func (h *harness) runningApp(node string) string {
	h.t.Helper()
	app := h.submit(4)
	am := h.placeAM(app, node, 1)
	h.ok(ContainerUpdateType, &ContainerUpdateRequest{NodeID: node, Updates: []ContainerStatus{{ID: am, State: scheduler.ContainerRunning, At: 1}}})
	h.ok(AppRegisterType, &AppRegisterRequest{AppID: app, Attempt: 1})
	return app
}

func TestOpportunisticContainersAreRecordedFromReports(t *testing.T) {
	h := newHarness(t)
	h.register("n1", 4096)
	app := h.runningApp("n1")
	used := h.app(app).Used
	h.ok(ContainerUpdateType, &ContainerUpdateRequest{NodeID: "n1", Records: []ContainerRecord{
		{ID: "o-n2-1-1", AppID: app, Attempt: 1, AskID: 1, Resources: oneCore, State: scheduler.ContainerQueued, AllocatedAt: 3},
		{ID: "o-n2-1-2", AppID: app, Attempt: 1, AskID: 1, Resources: oneCore, State: scheduler.ContainerRunning, AllocatedAt: 3, StartedAt: 7},
		{ID: "o-n2-1-3", AppID: "app-999", Attempt: 1, Resources: oneCore, State: scheduler.ContainerRunning}, // unknown app
		{ID: "o-n2-1-4", AppID: app, Attempt: 1, Resources: scheduler.Resources{MemoryMB: -1, Vcores: 1}, State: scheduler.ContainerRunning},
		{ID: "o-n2-1-5", AppID: app, Attempt: 1, Resources: oneCore, State: "BOGUS"},
		{ID: "", AppID: app, Attempt: 1, Resources: oneCore, State: scheduler.ContainerRunning},
		{ID: "c-99-0", AppID: app, Attempt: 1, Resources: oneCore, State: scheduler.ContainerRunning}, // a leader's ID
	}})
	n, _ := h.f.State().Node("n1")
	if n.RunningOpportunistic != 1 || n.Queued != 1 || n.AllocatedOpportunistic.String() != oneCore.String() {
		t.Fatalf("node accounting %+v: one running opportunistic container uses the node, one waits", n)
	}
	for _, id := range []string{"o-n2-1-3", "o-n2-1-4", "o-n2-1-5", "", "c-99-0"} {
		if _, ok := h.f.State().Container(id); ok {
			t.Fatalf("recorded the malformed or foreign record %q", id)
		}
	}
	if c := h.container("o-n2-1-2"); !c.Distributed || c.ExecutionType != scheduler.Opportunistic || c.AllocatedAt != 3 || c.StartedAt != 7 || c.AskID != 1 {
		t.Fatalf("recorded container %+v", c)
	}
	if a := h.app(app); a.Used.String() != used.String() {
		t.Fatalf("opportunistic containers counted toward the app's guaranteed usage: %v, was %v", a.Used, used)
	}
	// A record of a container already known changes nothing.
	before := h.container("o-n2-1-2")
	h.ok(ContainerUpdateType, &ContainerUpdateRequest{NodeID: "n1", Records: []ContainerRecord{
		{ID: "o-n2-1-2", AppID: app, Attempt: 1, Resources: oneCore, State: scheduler.ContainerQueued}}})
	if h.container("o-n2-1-2") != before {
		t.Fatalf("a repeated record replaced the container")
	}
	// The queued one starts: it moves from the queue into the node's usage.
	h.ok(ContainerUpdateType, &ContainerUpdateRequest{NodeID: "n1", Updates: []ContainerStatus{{ID: "o-n2-1-1", State: scheduler.ContainerRunning, At: 9}}})
	if n, _ := h.f.State().Node("n1"); n.RunningOpportunistic != 2 || n.Queued != 0 {
		t.Fatalf("node after the queued container started: %+v", n)
	}
	// When the app ends its opportunistic containers are stopped, and one
	// reported afterwards is recorded already marked for killing.
	h.ok(AppFinishType, &AppFinishRequest{AppID: app, State: scheduler.AppKilled})
	if c := h.container("o-n2-1-2"); !c.KillRequested {
		t.Fatalf("opportunistic container of a killed app not stopped: %+v", c)
	}
	h.ok(ContainerUpdateType, &ContainerUpdateRequest{NodeID: "n1", Records: []ContainerRecord{
		{ID: "o-n2-1-9", AppID: app, Attempt: 1, Resources: oneCore, State: scheduler.ContainerRunning}}})
	if c := h.container("o-n2-1-9"); !c.KillRequested || c.KillReason != scheduler.ReasonKilled {
		t.Fatalf("late report of a killed app's container not marked for killing: %+v", c)
	}
	// Records from an unregistered node are refused whole.
	h.refused(ContainerUpdateType, &ContainerUpdateRequest{NodeID: "n9", Records: []ContainerRecord{
		{ID: "o-n9-1-1", AppID: app, Attempt: 1, Resources: oneCore, State: scheduler.ContainerRunning}}}, "not registered")
}

func TestCompletedRecordKeepsItsTimes(t *testing.T) {
	h := newHarness(t)
	h.register("n1", 4096)
	app := h.runningApp("n1")
	code := 0
	h.ok(ContainerUpdateType, &ContainerUpdateRequest{NodeID: "n1", Records: []ContainerRecord{{
		ID: "o-n1-1-1", AppID: app, Attempt: 1, Resources: oneCore, State: scheduler.ContainerCompleted,
		ExitCode: &code, Reason: scheduler.ReasonExited, AllocatedAt: 10, StartedAt: 11, FinishedAt: 12}}})
	c := h.container("o-n1-1-1")
	if c.AllocatedAt != 10 || c.StartedAt != 11 || c.FinishedAt != 12 || c.Reason != scheduler.ReasonExited || *c.ExitCode != 0 {
		t.Fatalf("a container that ran between two heartbeats lost its history: %+v", c)
	}
	if n, _ := h.f.State().Node("n1"); n.RunningOpportunistic != 0 || n.Queued != 0 {
		t.Fatalf("a completed record holds node resources: %+v", n)
	}
}

// A container that started and ended between two heartbeats goes from
// ALLOCATED to COMPLETED in one report, and keeps its start time.
func TestCompletionReportKeepsTheStartTime(t *testing.T) {
	h := newHarness(t)
	h.register("n1", 4096)
	app := h.runningApp("n1")
	res := h.ok(PlanApplyType, &PlanApplyRequest{Placements: []scheduler.Placement{
		{AppID: app, Attempt: 1, AskID: 1, NodeID: "n1", Resources: small, Opportunistic: true}}, Now: 5}).(*PlanResult)
	code := 0
	h.ok(ContainerUpdateType, &ContainerUpdateRequest{NodeID: "n1", Updates: []ContainerStatus{
		{ID: res.IDs[0], State: scheduler.ContainerCompleted, ExitCode: &code, Reason: scheduler.ReasonExited, At: 9, StartedAt: 7}}})
	if c := h.container(res.IDs[0]); c.StartedAt != 7 || c.FinishedAt != 9 || c.AllocatedAt != 5 {
		t.Fatalf("container %+v: want allocated 5, started 7, finished 9", c)
	}
}

func TestCentralizedOpportunisticPlacement(t *testing.T) {
	h := newHarness(t)
	h.register("n1", 2048)
	app := h.runningApp("n1")
	// Opportunistic placements take no guaranteed capacity: eight of 1 GiB
	// on a 2 GiB node are accepted (the node queues what cannot start).
	var ps []scheduler.Placement
	for i := 0; i < 8; i++ {
		ps = append(ps, scheduler.Placement{AppID: app, Attempt: 1, AskID: 1, NodeID: "n1", Resources: small, Opportunistic: true})
	}
	ps = append(ps,
		scheduler.Placement{AppID: app, Attempt: 2, AskID: 1, NodeID: "n1", Resources: small, Opportunistic: true},
		scheduler.Placement{AppID: app, Attempt: 1, NodeID: "n1", Resources: small, Opportunistic: true, IsAM: true},
		scheduler.Placement{AppID: app, Attempt: 1, AskID: 1, NodeID: "n7", Resources: small, Opportunistic: true},
	)
	res := h.ok(PlanApplyType, &PlanApplyRequest{Placements: ps, Now: 5}).(*PlanResult)
	if len(res.Refused) != 3 || !strings.Contains(res.Refused[0], "attempt is not running") ||
		!strings.Contains(res.Refused[1], "AM container cannot be opportunistic") || !strings.Contains(res.Refused[2], "node is not ready") {
		t.Fatalf("refusals %q", res.Refused)
	}
	for i := 0; i < 8; i++ {
		c := h.container(res.IDs[i])
		if c.ExecutionType != scheduler.Opportunistic || c.State != scheduler.ContainerAllocated || c.Distributed || c.AllocatedAt != 5 {
			t.Fatalf("placed container %+v", c)
		}
	}
	if n, _ := h.f.State().Node("n1"); n.AllocatedGuaranteed.MemoryMB != 256 {
		t.Fatalf("opportunistic placements took guaranteed capacity: %+v", n)
	}
}

func TestPromotion(t *testing.T) {
	h := newHarness(t)
	h.register("n1", 2048) // 2 GiB: the AM (256 MiB) leaves 1792 MiB of guaranteed room
	app := h.runningApp("n1")
	big := scheduler.Resources{MemoryMB: 1024, Vcores: 1}
	h.ok(ContainerUpdateType, &ContainerUpdateRequest{NodeID: "n1", Records: []ContainerRecord{
		{ID: "o-a", AppID: app, Attempt: 1, Resources: big, State: scheduler.ContainerRunning},
		{ID: "o-b", AppID: app, Attempt: 1, Resources: big, State: scheduler.ContainerRunning},
		{ID: "o-q", AppID: app, Attempt: 1, Resources: big, State: scheduler.ContainerQueued},
	}})
	usedBefore := h.app(app).Used
	// The last asks again for o-a: promotion is idempotent.
	res := h.ok(PromoteType, &PromoteRequest{AppID: app, Attempt: 1, IDs: []string{"o-a", "o-b", "o-q", "o-zz", "o-a"}}).(*PromoteResult)
	want := []string{"", "exceeds the node's free guaranteed capacity", "not running", "not a container of this app attempt", ""}
	for i, w := range want {
		if w == "" && res.Refused[i] != "" || !strings.Contains(res.Refused[i], w) {
			t.Fatalf("promotion %d: %q, want %q", i, res.Refused[i], w)
		}
	}
	c := h.container("o-a")
	if c.ExecutionType != scheduler.Guaranteed || !c.Promoted || !c.Distributed {
		t.Fatalf("promoted container %+v", c)
	}
	n, _ := h.f.State().Node("n1")
	if n.AllocatedGuaranteed.MemoryMB != 256+1024 || n.RunningGuaranteed != 2 || n.RunningOpportunistic != 1 {
		t.Fatalf("node after promotion %+v: the container's resources move from (O) to (G)", n)
	}
	if a := h.app(app); a.Used.MemoryMB != usedBefore.MemoryMB+1024 || a.Live != 2 {
		t.Fatalf("app usage after promotion %v/%d: the promoted container now counts (once)", a.Used, a.Live)
	}
	// A container guaranteed from the start is not promoted.
	am := h.app(app).Attempts[0].ContainerID
	h.refusedResult(PromoteType, &PromoteRequest{AppID: app, Attempt: 1, IDs: []string{am}}, "already guaranteed")
	// An attempt that is over promotes nothing.
	h.refusedResult(PromoteType, &PromoteRequest{AppID: app, Attempt: 7, IDs: []string{"o-b"}}, "current attempt is not running")
	// The promoted container completing returns its guaranteed resources.
	h.ok(ContainerUpdateType, &ContainerUpdateRequest{NodeID: "n1", Updates: []ContainerStatus{{ID: "o-a", State: scheduler.ContainerCompleted, Reason: scheduler.ReasonExited}}})
	if a := h.app(app); a.Used.String() != usedBefore.String() {
		t.Fatalf("app usage after the promoted container ended: %v, want %v", a.Used, usedBefore)
	}
}

// refusedResult applies a command whose result reports a refusal for its
// only item, and checks it changed nothing.
func (h *harness) refusedResult(mt MessageType, body any, want string) {
	h.t.Helper()
	before := h.f.State().TableIndex(TableContainers)
	res := h.ok(mt, body).(*PromoteResult)
	if len(res.Refused) != 1 || !strings.Contains(res.Refused[0], want) {
		h.t.Fatalf("result %q, want a refusal mentioning %q", res.Refused, want)
	}
	if h.f.State().TableIndex(TableContainers) != before {
		h.t.Fatalf("a refused promotion changed the containers table")
	}
}

func TestSnapshotKeepsOpportunisticState(t *testing.T) {
	h := newHarness(t)
	h.register("n1", 4096)
	app := h.runningApp("n1")
	h.ok(ContainerUpdateType, &ContainerUpdateRequest{NodeID: "n1", Records: []ContainerRecord{
		{ID: "o-a", AppID: app, Attempt: 1, Resources: oneCore, State: scheduler.ContainerRunning},
		{ID: "o-q", AppID: app, Attempt: 1, Resources: oneCore, State: scheduler.ContainerQueued},
	}})
	h.ok(PromoteType, &PromoteRequest{AppID: app, Attempt: 1, IDs: []string{"o-a"}})
	var buf bytes.Buffer
	if err := writeSnapshot(&buf, h.f.State()); err != nil {
		t.Fatal(err)
	}
	restored, err := readSnapshot(&buf)
	if err != nil {
		t.Fatal(err)
	}
	for _, id := range []string{"o-a", "o-q"} {
		a, _ := h.f.State().Container(id)
		b, _ := restored.Container(id)
		if !reflect.DeepEqual(a, b) {
			t.Fatalf("container %s after restore %+v, was %+v", id, b, a)
		}
	}
	n1, _ := h.f.State().Node("n1")
	n2, _ := restored.Node("n1")
	if !reflect.DeepEqual(n1, n2) || n2.Queued != 1 {
		t.Fatalf("node after restore %+v, was %+v", n2, n1)
	}
}

// A node pauses an opportunistic container to make room and resumes it:
// paused, it counts as neither running nor queued; resumed, it keeps the
// time it first started. A guaranteed container is never paused.
func TestPausedContainers(t *testing.T) {
	h := newHarness(t)
	h.register("n1", 4096)
	app := h.runningApp("n1")
	h.ok(ContainerUpdateType, &ContainerUpdateRequest{NodeID: "n1", Records: []ContainerRecord{
		{ID: "o-n1-1-1", AppID: app, Attempt: 1, AskID: 1, Resources: oneCore, State: scheduler.ContainerRunning, AllocatedAt: 3, StartedAt: 7}}})
	h.ok(ContainerUpdateType, &ContainerUpdateRequest{NodeID: "n1", Updates: []ContainerStatus{{ID: "o-n1-1-1", State: scheduler.ContainerPaused, At: 9}}})
	if c := h.container("o-n1-1-1"); c.State != scheduler.ContainerPaused || c.StartedAt != 7 {
		t.Fatalf("paused container %+v", c)
	}
	if n, _ := h.f.State().Node("n1"); n.RunningOpportunistic != 0 || n.Queued != 0 || !n.AllocatedOpportunistic.IsZero() {
		t.Fatalf("node with a paused container %+v: it is neither running nor queued", n)
	}
	h.ok(ContainerUpdateType, &ContainerUpdateRequest{NodeID: "n1", Updates: []ContainerStatus{{ID: "o-n1-1-1", State: scheduler.ContainerRunning, At: 11}}})
	if c := h.container("o-n1-1-1"); c.State != scheduler.ContainerRunning || c.StartedAt != 7 {
		t.Fatalf("resumed container %+v: want RUNNING, started at 7", c)
	}
	if n, _ := h.f.State().Node("n1"); n.RunningOpportunistic != 1 {
		t.Fatalf("node after the resume %+v", n)
	}
	// The AM container is guaranteed: a PAUSED report of it changes nothing.
	for _, c := range h.f.State().NodeLiveContainers("n1") {
		if c.IsAM {
			h.ok(ContainerUpdateType, &ContainerUpdateRequest{NodeID: "n1", Updates: []ContainerStatus{{ID: c.ID, State: scheduler.ContainerPaused, At: 12}}})
			if got := h.container(c.ID); got.State != scheduler.ContainerRunning {
				t.Fatalf("a guaranteed container was recorded %s", got.State)
			}
		}
	}
	// A record may arrive already paused.
	h.ok(ContainerUpdateType, &ContainerUpdateRequest{NodeID: "n1", Records: []ContainerRecord{
		{ID: "o-n1-1-2", AppID: app, Attempt: 1, AskID: 1, Resources: oneCore, State: scheduler.ContainerPaused, AllocatedAt: 3, StartedAt: 8}}})
	if c := h.container("o-n1-1-2"); c.State != scheduler.ContainerPaused {
		t.Fatalf("record of a paused container %+v", c)
	}
}
