package fsm

import (
	"runtime"
	"testing"
	"time"

	"github.com/hashicorp/raft"
	"github.com/weft-sched/weft/scheduler"
)

// shortApps drives n short apps through the real apply path, in batches
// of 100 that each go through Raft entries the way a cluster's would:
// submit, AM placed and running, registered, one task asked for, placed,
// run and done, the app finished, its AM gone. With gc set, after each
// batch the leader's garbage collection command (State.Garbage, as
// server/gc.go proposes it) is applied too.
type shortApps struct {
	t     testing.TB
	f     *FSM
	index uint64
	now   int64
}

func (s *shortApps) batch(mt MessageType, bodies []any) []any {
	logs := make([]*raft.Log, len(bodies))
	for i, b := range bodies {
		s.index++
		logs[i] = command(s.t, s.index, mt, b)
	}
	out := s.f.ApplyBatch(logs)
	for i, r := range out {
		if err, ok := r.(error); ok {
			s.t.Fatalf("command %d (%d of batch): %v", mt, i, err)
		}
	}
	return out
}

func (s *shortApps) one(mt MessageType, body any) any { return s.batch(mt, []any{body})[0] }

func (s *shortApps) run(n int, gc *GCPolicy) {
	const per = 100
	task := scheduler.Resources{MemoryMB: 128, Vcores: 1}
	am := scheduler.Resources{MemoryMB: 256, Vcores: 1}
	s.one(NodeRegisterType, &NodeRegisterRequest{ID: "n1", Address: "n1:8049", Capacity: scheduler.Resources{MemoryMB: 1 << 30, Vcores: 1 << 20}})
	for done := 0; done < n; done += per {
		s.now += int64(time.Second)
		var bodies []any
		for i := 0; i < per; i++ {
			bodies = append(bodies, &AppSubmitRequest{Now: s.now, Spec: scheduler.AppSpec{User: "u", AMResources: am,
				DShell: scheduler.DShell{NumContainers: 1, Command: []string{"true"}, Resources: task}}})
		}
		var ids []string
		for _, r := range s.batch(AppSubmitType, bodies) {
			ids = append(ids, r.(string))
		}
		plan := &PlanApplyRequest{Now: s.now}
		for _, id := range ids {
			plan.Placements = append(plan.Placements, scheduler.Placement{AppID: id, Attempt: 1, NodeID: "n1", Resources: am, IsAM: true})
		}
		amIDs := s.one(PlanApplyType, plan).(*PlanResult).IDs
		up := &ContainerUpdateRequest{NodeID: "n1"}
		for _, c := range amIDs {
			up.Updates = append(up.Updates, ContainerStatus{ID: c, State: scheduler.ContainerRunning, At: s.now})
		}
		s.one(ContainerUpdateType, up)
		bodies = bodies[:0]
		for _, id := range ids {
			bodies = append(bodies, &AppRegisterRequest{AppID: id, Attempt: 1, Now: s.now})
		}
		s.batch(AppRegisterType, bodies)
		bodies = bodies[:0]
		for _, id := range ids {
			bodies = append(bodies, &AskUpdateRequest{AppID: id, Attempt: 1, SeenIndex: s.index,
				Asks: []scheduler.Ask{{AskID: 1, Count: 1, Resources: task, ExecutionType: scheduler.Guaranteed}}})
		}
		s.batch(AskUpdateType, bodies)
		plan = &PlanApplyRequest{Now: s.now}
		for _, id := range ids {
			plan.Placements = append(plan.Placements, scheduler.Placement{AppID: id, Attempt: 1, AskID: 1, NodeID: "n1", Resources: task})
		}
		taskIDs := s.one(PlanApplyType, plan).(*PlanResult).IDs
		zero := 0
		up = &ContainerUpdateRequest{NodeID: "n1"}
		for _, c := range taskIDs {
			up.Updates = append(up.Updates, ContainerStatus{ID: c, State: scheduler.ContainerCompleted, ExitCode: &zero,
				Reason: scheduler.ReasonExited, At: s.now, StartedAt: s.now})
		}
		s.one(ContainerUpdateType, up)
		bodies = bodies[:0]
		for _, id := range ids {
			bodies = append(bodies, &AppFinishRequest{AppID: id, Attempt: 1, State: scheduler.AppFinished, Now: s.now})
		}
		s.batch(AppFinishType, bodies)
		up = &ContainerUpdateRequest{NodeID: "n1"}
		for _, c := range amIDs {
			up.Updates = append(up.Updates, ContainerStatus{ID: c, State: scheduler.ContainerCompleted, ExitCode: &zero,
				Reason: scheduler.ReasonExited, At: s.now})
		}
		s.one(ContainerUpdateType, up)
		if gc != nil {
			p := *gc
			p.AppsBefore, p.NodesBefore = s.now-int64(24*time.Hour), s.now-int64(24*time.Hour)
			if req := s.f.State().Garbage(p); req != nil {
				s.one(GCType, req)
			}
		}
	}
}

// heapAfterGC is the live heap once the garbage collector has run.
func heapAfterGC() uint64 {
	var m runtime.MemStats
	runtime.GC()
	runtime.GC()
	runtime.ReadMemStats(&m)
	return m.HeapAlloc
}

// The 20,000-short-apps test of SPEC §20: without garbage collection the
// state grows with every app; with max_completed_apps 500 it stays at
// about 500 apps, 1,000 containers, whatever the number of apps run. The
// live heap and the snapshot size of both are logged (go test -v -run
// TwentyThousand ./fsm/); docs/operations.md quotes them.
func TestTwentyThousandShortAppsStayBounded(t *testing.T) {
	const n, keep = 20000, 500
	measure := func(gc *GCPolicy) (apps, containers int, heap uint64, snap int) {
		base := heapAfterGC()
		s := &shortApps{t: t, f: New(nil)}
		s.run(n, gc)
		st := s.f.State()
		if after := heapAfterGC(); after > base {
			heap = after - base
		}
		snap = len(persist(t, s.f))
		checkInvariants(t, st)
		apps, containers = len(st.Apps()), len(st.Containers())
		runtime.KeepAlive(s)
		return
	}
	apps0, cs0, heap0, snap0 := measure(nil)
	apps1, cs1, heap1, snap1 := measure(&GCPolicy{MaxCompletedApps: keep, Limit: 2000})
	t.Logf("%d short apps, no garbage collection: %d apps, %d containers in the state; heap %.1f MiB; snapshot %.1f MiB",
		n, apps0, cs0, float64(heap0)/(1<<20), float64(snap0)/(1<<20))
	t.Logf("%d short apps, max_completed_apps %d: %d apps, %d containers in the state; heap %.1f MiB; snapshot %.1f MiB",
		n, keep, apps1, cs1, float64(heap1)/(1<<20), float64(snap1)/(1<<20))
	if apps0 != n || cs0 != 2*n {
		t.Fatalf("without collection the state holds %d apps and %d containers, want %d and %d", apps0, cs0, n, 2*n)
	}
	if apps1 != keep || cs1 != 2*keep {
		t.Fatalf("with collection the state holds %d apps and %d containers, want %d and %d", apps1, cs1, keep, 2*keep)
	}
	if snap1*10 > snap0 {
		t.Fatalf("the collected state's snapshot is %d bytes, not a tenth of the %d bytes of the uncollected one", snap1, snap0)
	}
}
