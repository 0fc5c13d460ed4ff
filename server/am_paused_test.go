package server

import (
	"slices"
	"testing"

	"github.com/hashicorp/raft"
	"github.com/weft-sched/weft/fsm"
	wrpc "github.com/weft-sched/weft/rpc"
	"github.com/weft-sched/weft/scheduler"
)

// An AM is told of its containers that a node paused since its last
// answer, and only once: the next answer, from the later index, is quiet.
func TestAMAnswerTellsOfPausedContainers(t *testing.T) {
	f := fsm.New(nil)
	var index uint64
	apply := func(typ fsm.MessageType, body any) any {
		index++
		buf, err := fsm.Encode(typ, body)
		if err != nil {
			t.Fatal(err)
		}
		res := f.Apply(&raft.Log{Index: index, Term: 1, Type: raft.LogCommand, Data: buf})
		if err, ok := res.(error); ok {
			t.Fatalf("command %d: %v", typ, err)
		}
		return res
	}
	apply(fsm.QueueConfigApplyType, &fsm.QueueConfigApplyRequest{Config: scheduler.DefaultQueueConfig()})
	apply(fsm.WorkloadKeyType, &fsm.WorkloadKeyRequest{Secret: make([]byte, 32), RetainRetired: 1, Now: 1})
	apply(fsm.NodeRegisterType, &fsm.NodeRegisterRequest{ID: "n1", Address: "127.0.0.1:1", Capacity: scheduler.Resources{MemoryMB: 4096, Vcores: 4}})
	appID := apply(fsm.AppSubmitType, &fsm.AppSubmitRequest{Spec: testSpec("paused")}).(string)
	app, _ := f.State().App(appID)
	apply(fsm.PlanApplyType, &fsm.PlanApplyRequest{Placements: []scheduler.Placement{
		{AppID: appID, Attempt: 1, NodeID: "n1", Resources: app.Spec.AMResources, IsAM: true}}})
	apply(fsm.AppRegisterType, &fsm.AppRegisterRequest{AppID: appID, Attempt: 1})
	one := scheduler.Resources{MemoryMB: 256, Vcores: 1}
	apply(fsm.ContainerUpdateType, &fsm.ContainerUpdateRequest{NodeID: "n1", Records: []fsm.ContainerRecord{
		{ID: "o-n1-1-1", AppID: appID, Attempt: 1, AskID: 1, Resources: one, State: scheduler.ContainerRunning, AllocatedAt: 3, StartedAt: 7},
		{ID: "o-n1-1-2", AppID: appID, Attempt: 1, AskID: 1, Resources: one, State: scheduler.ContainerRunning, AllocatedAt: 3, StartedAt: 7}}})
	before := index
	apply(fsm.ContainerUpdateType, &fsm.ContainerUpdateRequest{NodeID: "n1", Updates: []fsm.ContainerStatus{
		{ID: "o-n1-1-2", State: scheduler.ContainerPaused, At: 9}}})

	var reply wrpc.AMAllocateResponse
	since := func(i uint64) *wrpc.AMAllocateRequest {
		args := &wrpc.AMAllocateRequest{AppID: appID, Attempt: 1}
		args.MinQueryIndex = i
		return args
	}
	seen, err := amAnswer(f.State(), since(before), &reply)
	if err != nil || !slices.Equal(reply.Paused, []string{"o-n1-1-2"}) || len(reply.Completed) != 0 {
		t.Fatalf("answer %+v (%v): want o-n1-1-2 paused", reply, err)
	}
	if _, err := amAnswer(f.State(), since(seen), &reply); err != nil || len(reply.Paused) != 0 {
		t.Fatalf("the next answer %+v (%v) tells of the pause again", reply, err)
	}
	// Resumed, it is not announced; the AM hears of it when it completes.
	apply(fsm.ContainerUpdateType, &fsm.ContainerUpdateRequest{NodeID: "n1", Updates: []fsm.ContainerStatus{
		{ID: "o-n1-1-2", State: scheduler.ContainerRunning, At: 11}}})
	if _, err := amAnswer(f.State(), since(seen), &reply); err != nil || len(reply.Paused) != 0 {
		t.Fatalf("answer after the resume %+v (%v)", reply, err)
	}
}
