package agent

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/weft-sched/weft/internal/clock"
	"github.com/weft-sched/weft/rpc"
	"github.com/weft-sched/weft/scheduler"
)

func newTestManager(t *testing.T, capMem int64, queue int) *manager {
	m := newManager(hclog.NewNullLogger(), clock.Real{}, "n1", t.TempDir(), scheduler.Resources{MemoryMB: capMem, Vcores: 16}, queue, scheduler.LocalPolicy{}, 2*time.Second, nil, func() {})
	t.Cleanup(func() { m.stopAll(scheduler.ReasonKilled) })
	return m
}

func info(id string, mem int64, et scheduler.ExecutionType) rpc.ContainerInfo {
	return rpc.ContainerInfo{ID: id, AppID: "app-1", NodeID: "n1", Resources: scheduler.Resources{MemoryMB: mem, Vcores: 1}, ExecutionType: string(et)}
}

func (m *manager) report(id string) rpc.ContainerReport {
	for _, r := range m.reports() {
		if r.ID == id {
			return r
		}
	}
	return rpc.ContainerReport{}
}

func waitState(t *testing.T, m *manager, id string, state scheduler.ContainerState) rpc.ContainerReport {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		r := m.report(id)
		if r.State == state {
			return r
		}
		if time.Now().After(deadline) {
			t.Fatalf("container %s is %s, want %s", id, r.State, state)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

var sleepLong = rpc.LaunchSpec{Command: []string{"sleep", "300"}}

func TestManagerEvictsNewestOpportunisticForGuaranteed(t *testing.T) {
	m := newTestManager(t, 1000, 10)
	if r := m.start(info("o1", 400, scheduler.Opportunistic), sleepLong); r.State != "RUNNING" {
		t.Fatalf("o1 %+v", r)
	}
	if r := m.start(info("o2", 400, scheduler.Opportunistic), sleepLong); r.State != "RUNNING" {
		t.Fatalf("o2 %+v", r)
	}
	// 200 free; g1 needs 500: o2 (started last) is evicted, o1 keeps running.
	if r := m.start(info("g1", 500, scheduler.Guaranteed), sleepLong); r.State != "QUEUED" {
		t.Fatalf("g1 %+v", r)
	}
	ev := waitState(t, m, "o2", scheduler.ContainerCompleted)
	if ev.Reason != scheduler.ReasonEvicted || ev.ExitCode != nil {
		t.Fatalf("o2 ended %+v, want evicted with no exit code", ev)
	}
	waitState(t, m, "g1", scheduler.ContainerRunning)
	if m.report("o1").State != scheduler.ContainerRunning {
		t.Fatalf("o1 was evicted too")
	}
	// The start is idempotent.
	if r := m.start(info("g1", 500, scheduler.Guaranteed), sleepLong); r.State != "RUNNING" {
		t.Fatalf("second start of g1: %+v", r)
	}
}

func TestManagerQueueRejectsAndDrains(t *testing.T) {
	m := newTestManager(t, 1000, 1)
	m.start(info("g1", 1000, scheduler.Guaranteed), rpc.LaunchSpec{Command: []string{"sh", "-c", "sleep 0.3"}})
	if r := m.start(info("o1", 100, scheduler.Opportunistic), rpc.LaunchSpec{Command: []string{"echo", "queued"}}); r.State != "QUEUED" {
		t.Fatalf("o1 %+v", r)
	}
	if r := m.start(info("o2", 100, scheduler.Opportunistic), sleepLong); r.State != "COMPLETED" || r.Reason != "rejected" {
		t.Fatalf("o2 %+v, want rejected", r)
	}
	// g1 exits by itself; o1 then starts, prints and exits 0.
	r := waitState(t, m, "o1", scheduler.ContainerCompleted)
	if r.Reason != scheduler.ReasonExited || r.ExitCode == nil || *r.ExitCode != 0 {
		t.Fatalf("o1 ended %+v", r)
	}
	logs, err := m.logs(&rpc.ContainerLogsRequest{ID: "o1"}, "app-1")
	if err != nil || string(logs.Data) != "queued\n" || !logs.Done {
		t.Fatalf("logs %+v %v", logs, err)
	}
	// Acked completed containers are forgotten; their logs stay readable.
	m.ack([]string{"o1", "g1"})
	if m.report("o1").ID != "" {
		t.Fatalf("acked container still reported")
	}
	if logs, err := m.logs(&rpc.ContainerLogsRequest{ID: "o1", Offset: 3}, "app-1"); err != nil || string(logs.Data) != "ued\n" {
		t.Fatalf("logs after ack at offset 3: %+v %v", logs, err)
	}
	if _, err := m.logs(&rpc.ContainerLogsRequest{ID: "nope"}, "app-1"); err == nil || !strings.Contains(err.Error(), "not found") {
		t.Fatalf("logs of an unknown container: %v", err)
	}
}

func TestManagerStopAndFailedStart(t *testing.T) {
	m := newTestManager(t, 1000, 10)
	m.start(info("g1", 100, scheduler.Guaranteed), sleepLong)
	m.stop("g1", scheduler.ReasonKilled)
	if r := waitState(t, m, "g1", scheduler.ContainerCompleted); r.Reason != scheduler.ReasonKilled {
		t.Fatalf("g1 ended %+v", r)
	}
	r := m.start(info("bad", 100, scheduler.Guaranteed), rpc.LaunchSpec{Command: []string{"/nonexistent"}})
	if r.State != "COMPLETED" || r.Reason != "failed" || !strings.Contains(r.Diagnostics, "no such file") {
		t.Fatalf("bad start: %+v", r)
	}
	// The failed container released its resources.
	if l := m.load(); !l.Used.IsZero() {
		t.Fatalf("resources leaked: %+v", l)
	}
}

func TestManagerShedsNewestQueuedAboveTheLimit(t *testing.T) {
	m := newTestManager(t, 1000, 10)
	m.start(info("g1", 1000, scheduler.Guaranteed), sleepLong)
	for i := 1; i <= 4; i++ {
		if r := m.start(info(fmt.Sprintf("o%d", i), 100, scheduler.Opportunistic), sleepLong); r.State != "QUEUED" {
			t.Fatalf("o%d %+v", i, r)
		}
	}
	m.shed(2)
	for id, want := range map[string]scheduler.ContainerState{"o1": scheduler.ContainerQueued, "o2": scheduler.ContainerQueued,
		"o3": scheduler.ContainerCompleted, "o4": scheduler.ContainerCompleted} {
		r := m.report(id)
		if r.State != want || want == scheduler.ContainerCompleted && r.Reason != scheduler.ReasonShed {
			t.Fatalf("%s after shedding to 2: %+v", id, r)
		}
	}
	if l := m.load(); l.Queued != 2 || l.QueueCapacity != 10 {
		t.Fatalf("load %+v", l)
	}
}

// With pausing on, a guaranteed arrival stops the opportunistic container
// in its way (its process in state T, reported PAUSED), starts at once,
// and when it ends the paused one goes on.
func TestManagerPausesForGuaranteedAndResumes(t *testing.T) {
	m := newManager(hclog.NewNullLogger(), clock.Real{}, "n1", t.TempDir(), scheduler.Resources{MemoryMB: 1000, Vcores: 1}, 10,
		scheduler.LocalPolicy{Pause: true, MaxPause: time.Minute}, 2*time.Second, nil, func() {})
	t.Cleanup(func() { m.stopAll(scheduler.ReasonKilled) })
	if r := m.start(info("o1", 400, scheduler.Opportunistic), sleepLong); r.State != "RUNNING" {
		t.Fatalf("o1 %+v", r)
	}
	m.mu.Lock()
	pid := m.byID["o1"].proc.pgid
	m.mu.Unlock()
	if r := m.start(info("g1", 400, scheduler.Guaranteed), rpc.LaunchSpec{Command: []string{"sh", "-c", "sleep 0.5"}}); r.State != "RUNNING" {
		t.Fatalf("g1 %+v: want it started at once, o1 paused for its vcore", r)
	}
	waitState(t, m, "o1", scheduler.ContainerPaused)
	if s := procState(pid); s != "T" {
		t.Fatalf("o1's process is in state %q, want T (stopped)", s)
	}
	if l := m.load(); l.RunningOpportunistic != 0 || l.Used.MemoryMB != 800 {
		t.Fatalf("load %+v: a paused container runs no more, and keeps its memory", l)
	}
	waitState(t, m, "g1", scheduler.ContainerCompleted)
	waitState(t, m, "o1", scheduler.ContainerRunning)
	if s := procState(pid); s == "T" || s == "" {
		t.Fatalf("o1's process is in state %q after the resume", s)
	}
}

// shortest_first: when room frees, the queued container whose ask said it
// runs shortest starts first, whatever the order they came in.
func TestManagerRunsTheShortestFirst(t *testing.T) {
	m := newManager(hclog.NewNullLogger(), clock.Real{}, "n1", t.TempDir(), scheduler.Resources{MemoryMB: 1000, Vcores: 1}, 10,
		scheduler.LocalPolicy{QueuePolicy: scheduler.QueueShortestFirst}, 2*time.Second, nil, func() {})
	t.Cleanup(func() { m.stopAll(scheduler.ReasonKilled) })
	m.start(info("g1", 400, scheduler.Guaranteed), rpc.LaunchSpec{Command: []string{"sh", "-c", "sleep 0.3"}})
	long, short := info("long", 400, scheduler.Opportunistic), info("short", 400, scheduler.Opportunistic)
	long.ExpectedDuration, short.ExpectedDuration = time.Minute, time.Second
	if r := m.start(long, sleepLong); r.State != "QUEUED" {
		t.Fatalf("long %+v", r)
	}
	if r := m.start(short, sleepLong); r.State != "QUEUED" {
		t.Fatalf("short %+v", r)
	}
	waitState(t, m, "short", scheduler.ContainerRunning)
	if r := m.report("long"); r.State != scheduler.ContainerQueued {
		t.Fatalf("long is %s while short runs: want it still queued", r.State)
	}
}
