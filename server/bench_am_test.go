package server

import (
	"reflect"
	"testing"

	"github.com/hashicorp/raft"
	"github.com/weft-sched/weft/fsm"
	wrpc "github.com/weft-sched/weft/rpc"
	"github.com/weft-sched/weft/scheduler"
)

// largeApp builds a state in which one running app holds total task
// containers, completed of them completed (and a second app one), and
// returns it with the index an AM had seen just before the last entry
// (which completed 10 more).
func largeApp(b testing.TB, total, completed int) (st *fsm.State, appID string, seen uint64) {
	f := fsm.New(nil)
	var index uint64
	apply := func(t fsm.MessageType, body any) any {
		index++
		buf, err := fsm.Encode(t, body)
		if err != nil {
			b.Fatal(err)
		}
		res := f.Apply(&raft.Log{Index: index, Term: 1, Type: raft.LogCommand, Data: buf})
		if err, ok := res.(error); ok {
			b.Fatalf("command %d: %v", t, err)
		}
		return res
	}
	apply(fsm.QueueConfigApplyType, &fsm.QueueConfigApplyRequest{Config: scheduler.DefaultQueueConfig()})
	apply(fsm.WorkloadKeyType, &fsm.WorkloadKeyRequest{Secret: make([]byte, 32), RetainRetired: 1, Now: 1})
	apply(fsm.NodeRegisterType, &fsm.NodeRegisterRequest{ID: "n1", Address: "127.0.0.1:1",
		Capacity: scheduler.Resources{MemoryMB: 1 << 30, Vcores: 1 << 20}})
	appID = apply(fsm.AppSubmitType, &fsm.AppSubmitRequest{Spec: testSpec("large")}).(string)
	app, _ := f.State().App(appID)
	apply(fsm.PlanApplyType, &fsm.PlanApplyRequest{Placements: []scheduler.Placement{
		{AppID: appID, Attempt: 1, NodeID: "n1", Resources: app.Spec.AMResources, IsAM: true}}})
	apply(fsm.AppRegisterType, &fsm.AppRegisterRequest{AppID: appID, Attempt: 1})
	small := scheduler.Resources{MemoryMB: 64, Vcores: 1}
	apply(fsm.AskUpdateType, &fsm.AskUpdateRequest{AppID: appID, Attempt: 1, SeenIndex: index,
		Asks: []scheduler.Ask{{AskID: 1, Count: total, Resources: small, ExecutionType: scheduler.Guaranteed}}})
	var ids []string
	for len(ids) < total {
		plan := make([]scheduler.Placement, min(5000, total-len(ids)))
		for i := range plan {
			plan[i] = scheduler.Placement{AppID: appID, Attempt: 1, AskID: 1, NodeID: "n1", Resources: small}
		}
		res := apply(fsm.PlanApplyType, &fsm.PlanApplyRequest{Placements: plan}).(*fsm.PlanResult)
		ids = append(ids, res.IDs...)
	}
	complete := func(ids []string) {
		zero := 0
		var u []fsm.ContainerStatus
		for _, id := range ids {
			u = append(u, fsm.ContainerStatus{ID: id, State: scheduler.ContainerCompleted, ExitCode: &zero, Reason: scheduler.ReasonExited, At: 1})
		}
		apply(fsm.ContainerUpdateType, &fsm.ContainerUpdateRequest{NodeID: "n1", Updates: u})
	}
	for i := 0; i < completed; i += 5000 {
		complete(ids[i:min(i+5000, completed)])
	}
	seen = index
	complete(ids[completed : completed+10])
	return f.State(), appID, seen
}

// BenchmarkAMAnswer measures building an AM.Allocate answer for an app
// holding 50,000 containers, 49,000 completed: "news" when the last entry
// completed 10 of them since the AM's index, "nothing-new" when the query
// wakes for a change that is not the app's. "changed" reads the app's
// containers changed since the AM's index (today's amAnswer); "rescan" is
// the answer as it was built before, from every container of the app,
// kept here as the baseline.
func BenchmarkAMAnswer(b *testing.B) {
	st, appID, seen := largeApp(b, 50000, 49000)
	for _, c := range []struct {
		name string
		min  uint64
		want int
	}{{"news", seen, 10}, {"nothing-new", st.Index(), 0}} {
		args := &wrpc.AMAllocateRequest{AppID: appID, Attempt: 1}
		args.MinQueryIndex = c.min
		for _, impl := range []struct {
			name   string
			answer func(*fsm.State, *wrpc.AMAllocateRequest, *wrpc.AMAllocateResponse) (uint64, error)
		}{{"changed", amAnswer}, {"rescan", rescanAnswer}} {
			b.Run(c.name+"/"+impl.name, func(b *testing.B) {
				var reply wrpc.AMAllocateResponse
				b.ReportAllocs()
				for i := 0; i < b.N; i++ {
					if _, err := impl.answer(st, args, &reply); err != nil {
						b.Fatal(err)
					}
				}
				if len(reply.Completed) != c.want {
					b.Fatalf("%d completed in the answer, want %d", len(reply.Completed), c.want)
				}
			})
		}
	}
}

// rescanAnswer is amAnswer as it was before the change index: every
// container of the app is read on every run.
func rescanAnswer(st *fsm.State, args *wrpc.AMAllocateRequest, reply *wrpc.AMAllocateResponse) (uint64, error) {
	reply.Allocated, reply.Completed, reply.PreemptionWarnings = reply.Allocated[:0], reply.Completed[:0], reply.PreemptionWarnings[:0]
	app, ok := st.App(args.AppID)
	if !ok {
		return 0, wrpc.Errorf(wrpc.CodeNotFound, "app %s not found", args.AppID)
	}
	reply.AppState = string(app.State)
	ring := keyringOf(st)
	index := app.CreateIndex
	if app.State.Terminal() {
		index = app.ModifyIndex
	}
	for _, c := range st.AppContainers(args.AppID) {
		if c.IsAM || c.Attempt != args.Attempt {
			continue
		}
		index = max(index, c.ModifyIndex)
		node, _ := st.Node(c.NodeID)
		if c.CreateIndex > args.MinQueryIndex && !c.Distributed {
			info := wrpc.NewContainerInfo(c, node)
			info.User, info.UID = app.Spec.User, app.UID
			if c.State == scheduler.ContainerAllocated {
				tok, err := ring.Sign(containerClaims(c, app))
				if err != nil {
					return 0, noKey(err)
				}
				info.Token = tok
			}
			reply.Allocated = append(reply.Allocated, info)
		}
		if c.State == scheduler.ContainerCompleted && c.ModifyIndex > args.MinQueryIndex {
			reply.Completed = append(reply.Completed, wrpc.NewContainerInfo(c, node))
		}
		if c.State.Live() && c.PreemptKillAt > 0 {
			reply.PreemptionWarnings = append(reply.PreemptionWarnings, c.ID)
		}
	}
	reply.Index = index
	return index, nil
}

// An answer built from the change index is the answer the full rescan
// gave, from every index an AM may hold.
func TestAMAnswerMatchesRescan(t *testing.T) {
	st, appID, seen := largeApp(t, 300, 200)
	for _, min := range []uint64{0, 1, 5, 7, 8, 9, 10, seen - 1, seen, st.Index(), st.Index() + 5} {
		args := &wrpc.AMAllocateRequest{AppID: appID, Attempt: 1}
		args.MinQueryIndex = min
		var got, want wrpc.AMAllocateResponse
		gi, err1 := amAnswer(st, args, &got)
		wi, err2 := rescanAnswer(st, args, &want)
		if err1 != nil || err2 != nil {
			t.Fatalf("min %d: %v, %v", min, err1, err2)
		}
		if wi > min && gi != wi {
			t.Fatalf("min %d: index %d, rescan %d", min, gi, wi)
		}
		if min == 0 && (len(got.Allocated) != 300 || len(got.Completed) != 210) {
			t.Fatalf("from 0: %d allocated, %d completed; want 300, 210", len(got.Allocated), len(got.Completed))
		}
		if (gi > min) != (wi > min) {
			t.Fatalf("min %d: index %d and rescan's %d disagree on news", min, gi, wi)
		}
		// The tokens differ in their proofs (one answer signs its lot in a
		// batch): each must carry the same claims; the rest must be equal.
		ring := keyringOf(st)
		for i := range got.Allocated {
			if i >= len(want.Allocated) {
				break
			}
			g, gerr := ring.Verify(got.Allocated[i].Token, 0)
			w, werr := ring.Verify(want.Allocated[i].Token, 0)
			if (gerr == nil) != (werr == nil) || gerr == nil && !reflect.DeepEqual(g, w) {
				t.Fatalf("min %d: container %s: token claims %+v (%v), rescan %+v (%v)", min, got.Allocated[i].ID, g, gerr, w, werr)
			}
			got.Allocated[i].Token, want.Allocated[i].Token = "", ""
		}
		if !reflect.DeepEqual(got.Allocated, want.Allocated) || !reflect.DeepEqual(got.Completed, want.Completed) {
			t.Fatalf("min %d: %d allocated, %d completed; rescan %d, %d", min, len(got.Allocated), len(got.Completed), len(want.Allocated), len(want.Completed))
		}
	}
}
