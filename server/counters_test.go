package server

import (
	"errors"
	"net/http/httptest"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/weft-sched/weft/fsm"
	"github.com/weft-sched/weft/internal/metrics"
	"github.com/weft-sched/weft/internal/testutil"
	wrpc "github.com/weft-sched/weft/rpc"
	"github.com/weft-sched/weft/scheduler"
)

// An AM's counters (SPEC §19), sent with AM.Allocate through a follower,
// reach the app's status; the same counters again write nothing; bad ones
// are refused naming the field, changing nothing; the final ones sent
// with AM.Finish stay on the ended app, which Allocate no longer changes.
// The containers the AM gets name their node's rack.
func TestAMCountersReachTheAppStatus(t *testing.T) {
	c := startThree(t)
	l := c.leader()
	var reg wrpc.NodeRegisterResponse
	if err := c.call(l, "Node.Register", &wrpc.NodeRegisterRequest{ID: "x", Address: "127.0.0.1:1", Rack: "/dc1/r7",
		Capacity: fourCores, Secret: nodeSecret("x")}, &reg); err != nil {
		t.Fatal(err)
	}
	x := &fakeNode{c: c, id: "x", secret: nodeSecret("x"), epoch: reg.Epoch}
	app := submit(t, c, l, "counted")
	tok, amInfo := x.amToken(t, l, app)
	if amInfo.Rack != "/dc1/r7" {
		t.Fatalf("the AM container to launch names rack %q, want its node's /dc1/r7", amInfo.Rack)
	}
	var ar wrpc.AMRegisterResponse
	if err := c.call(l, "AM.Register", &wrpc.AMRegisterRequest{AppID: app, Attempt: 1, Token: tok}, &ar); err != nil {
		t.Fatal(err)
	}
	status := func() wrpc.AppInfo {
		t.Helper()
		var st wrpc.AppStatusResponse
		if err := c.call(l, "App.Status", &wrpc.AppRequest{AppID: app}, &st); err != nil {
			t.Fatal(err)
		}
		return st.App
	}
	if got := status().Counters; got != nil {
		t.Fatalf("a new app's status has counters %v", got)
	}

	// Counters and an ask, through a follower; the container names its rack.
	counters := scheduler.Counters{"maps.data_local": 3, "shuffle.bytes.off_rack": 1_500_000}
	ask := scheduler.Ask{AskID: 1, Count: 1, Resources: scheduler.Resources{MemoryMB: 256, Vcores: 1}}
	var got wrpc.ContainerInfo
	testutil.WaitFor(t, 10*time.Second, func() bool {
		req := &wrpc.AMAllocateRequest{AppID: app, Attempt: 1, Token: tok, Asks: []scheduler.Ask{ask}, Counters: counters}
		req.MaxWait = 200 * time.Millisecond
		var resp wrpc.AMAllocateResponse
		if err := c.call(c.follower(), "AM.Allocate", req, &resp); err != nil {
			t.Fatal(err)
		}
		if len(resp.Allocated) > 0 {
			got = resp.Allocated[0]
			return true
		}
		return false
	})
	if got.Rack != "/dc1/r7" || got.NodeID != "x" {
		t.Fatalf("allocated %+v: want node x in rack /dc1/r7", got)
	}
	var list wrpc.ContainerListResponse
	if err := c.call(l, "Container.List", &wrpc.ContainerListRequest{AppID: app}, &list); err != nil || len(list.Containers) != 2 {
		t.Fatalf("Container.List: %+v, %v", list.Containers, err)
	}
	for _, ci := range list.Containers {
		if ci.Rack != "/dc1/r7" {
			t.Fatalf("Container.List: %s names rack %q", ci.ID, ci.Rack)
		}
	}
	info := status()
	if !info.Counters.Equal(counters) {
		t.Fatalf("App.Status counters %v, want %v", info.Counters, counters)
	}
	a, _ := l.State().App(app)
	written, appsIndex := a.ModifyIndex, l.State().TableIndex(fsm.TableApps)
	// Every server has applied the write before the count is taken, so
	// only a new entry can raise it.
	idx := l.State().Index()
	testutil.WaitFor(t, 5*time.Second, func() bool {
		for _, s := range c.servers {
			if s.State().Index() < idx {
				return false
			}
		}
		return true
	})
	applied := countersApplied(t)
	if applied == 0 {
		t.Fatalf("no app_counters command counted as applied: the count cannot show a needless write")
	}

	// The same counters again (a copy): no write.
	allocate := func(cs scheduler.Counters) (*wrpc.AMAllocateResponse, error) {
		req := &wrpc.AMAllocateRequest{AppID: app, Attempt: 1, Token: tok, Counters: cs}
		req.MinQueryIndex, req.MaxWait = l.State().Index(), time.Millisecond
		var resp wrpc.AMAllocateResponse
		err := c.call(l, "AM.Allocate", req, &resp)
		return &resp, err
	}
	if _, err := allocate(scheduler.Counters{"maps.data_local": 3, "shuffle.bytes.off_rack": 1_500_000}); err != nil {
		t.Fatal(err)
	}
	if a, _ := l.State().App(app); a.ModifyIndex != written || l.State().TableIndex(fsm.TableApps) != appsIndex {
		t.Fatalf("the same counters again were written: app modify index %d (was %d), apps table %d (was %d)",
			a.ModifyIndex, written, l.State().TableIndex(fsm.TableApps), appsIndex)
	}
	// Nor proposed: the leader applies what it proposed before it answers,
	// so a needless entry would be counted by now.
	if n := countersApplied(t); n != applied {
		t.Fatalf("the same counters again cost a Raft entry: %d app_counters commands applied, %d before", n, applied)
	}

	// A bad name: refused, one line naming the field, nothing written.
	_, err := allocate(scheduler.Counters{"maps.data_local": 4, "Shuffle Bytes": 1})
	if !errors.Is(err, wrpc.ErrBadRequest) || !strings.Contains(err.Error(), "counters: name") || strings.Contains(err.Error(), "\n") {
		t.Fatalf("bad counter name answered %v; want one line of bad_request naming counters", err)
	}
	if a, _ := l.State().App(app); a.ModifyIndex != written || !a.Counters.Equal(counters) {
		t.Fatalf("refused counters changed the app: %v at %d", a.Counters, a.ModifyIndex)
	}
	var wr wrpc.WriteResponse
	err = c.call(l, "AM.Finish", &wrpc.AMFinishRequest{AppID: app, Attempt: 1, Token: tok, FinalState: "FINISHED",
		Counters: scheduler.Counters{"": 1}}, &wr)
	if !errors.Is(err, wrpc.ErrBadRequest) || !strings.Contains(err.Error(), "counters: name") {
		t.Fatalf("AM.Finish with a bad counter name answered %v", err)
	}
	if a, _ := l.State().App(app); a.State.Terminal() {
		t.Fatalf("a refused AM.Finish ended the app (%s)", a.State)
	}

	// Finish with the final counters, through a follower.
	final := scheduler.Counters{"maps.data_local": 4, "shuffle.bytes.off_rack": 2_000_000, "reduce.0.wtnd": 16}
	if err := c.call(c.follower(), "AM.Finish", &wrpc.AMFinishRequest{AppID: app, Attempt: 1, Token: tok, FinalState: "FINISHED",
		Counters: final}, &wr); err != nil {
		t.Fatal(err)
	}
	if info := status(); info.State != string(scheduler.AppFinished) || !info.Counters.Equal(final) {
		t.Fatalf("finished app: %s with counters %v, want FINISHED with %v", info.State, info.Counters, final)
	}
	// An AM that calls Allocate after the end changes nothing.
	resp, err := allocate(scheduler.Counters{"maps.data_local": 0})
	if err != nil || resp.AppState != string(scheduler.AppFinished) {
		t.Fatalf("Allocate after the end: %+v, %v; want the app's state", resp, err)
	}
	if info := status(); !info.Counters.Equal(final) {
		t.Fatalf("Allocate changed an ended app's counters to %v", info.Counters)
	}
	// App.List leaves counters out.
	var apps wrpc.AppListResponse
	if err := c.call(l, "App.List", &wrpc.AppListRequest{}, &apps); err != nil || len(apps.Apps) != 1 || apps.Apps[0].Counters != nil {
		t.Fatalf("App.List: %+v, %v; want the app without its counters", apps.Apps, err)
	}
}

var countersAppliedLine = regexp.MustCompile(`(?m)^weft_fsm_apply_seconds_count\{command="app_counters"\} (\d+)$`)

// countersApplied is how many app_counters commands the servers of this
// process have applied (the FSM times each command it applies).
func countersApplied(t *testing.T) int {
	t.Helper()
	rec := httptest.NewRecorder()
	metrics.Handler().ServeHTTP(rec, httptest.NewRequest("GET", "/v1/metrics", nil))
	m := countersAppliedLine.FindStringSubmatch(rec.Body.String())
	if m == nil {
		return 0
	}
	n, _ := strconv.Atoi(m[1])
	return n
}
