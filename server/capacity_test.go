package server

import (
	"testing"
	"time"

	"github.com/weft-sched/weft/internal/config"
	"github.com/weft-sched/weft/internal/testutil"
	wrpc "github.com/weft-sched/weft/rpc"
	"github.com/weft-sched/weft/scheduler"
)

// Capacity queues end to end on a server: a capacity tree applied from a
// file, an app that borrows its idle sibling's capacity, and Queue.List
// showing each queue's capacity and how much of it is used.
func TestCapacityQueuesThroughQueueList(t *testing.T) {
	c := newTestCluster(t)
	l := c.start("s1", 1)
	c.waitForLeader()
	cfg, err := config.ParseQueueConfig("cap.hcl", []byte(`queue "root" {
  type = "capacity"
  queue "prod" {
    capacity          = 60
    user_limit_factor = 2
  }
  queue "dev" {
    capacity     = 40
    max_capacity = 50
  }
}
`))
	if err != nil {
		t.Fatal(err)
	}
	if err := c.call(l, "Queue.Apply", &wrpc.QueueApplyRequest{Config: cfg}, &wrpc.WriteResponse{}); err != nil {
		t.Fatal(err)
	}
	registerFake(t, c, l, "n1", scheduler.Resources{MemoryMB: 10 * 1024, Vcores: 10})
	var sub wrpc.AppSubmitResponse
	spec := scheduler.AppSpec{Queue: "root.prod", User: "ann", AMResources: scheduler.Resources{MemoryMB: 1024, Vcores: 1},
		DShell: scheduler.DShell{NumContainers: 1, Command: []string{"true"}}}
	if err := c.call(l, "App.Submit", &wrpc.AppSubmitRequest{Spec: spec}, &sub); err != nil {
		t.Fatal(err)
	}
	testutil.WaitFor(t, 10*time.Second, func() bool {
		var list wrpc.QueueListResponse
		if err := c.call(l, "Queue.List", &wrpc.QueueListRequest{}, &list); err != nil {
			t.Fatal(err)
		}
		for _, q := range list.Queues {
			if q.Name == "root.prod" && q.Used.Vcores == 1 {
				limits := q.Capacity
				if q.Type != "capacity" || limits == nil || limits.Capacity != 60 || limits.MaxCapacity != 100 || limits.UserLimitFactor != 2 ||
					q.InstantaneousFairShare.Vcores != 6 || limits.UsedCapacity < 16 || limits.UsedCapacity > 17 {
					t.Fatalf("root.prod in Queue.List: %+v (capacity %+v), want capacity 60%% as its 6-vcore share, 1 of 6 used", q, limits)
				}
				return true
			}
		}
		return false
	})
}
