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

// An AM in a capacity queue hears its headroom in every Allocate answer
// (YARN's: what the user limit, the queue's max capacity and the free
// room leave it), and `app status` shows the same.
func TestAllocateAnswersTheHeadroom(t *testing.T) {
	c := newTestCluster(t)
	l := c.start("s1", 1)
	c.waitForLeader()
	cfg, err := config.ParseQueueConfig("cap.hcl", []byte(`queue "root" {
  type = "capacity"
  queue "prod" {
    capacity     = 50
    max_capacity = 75
  }
  queue "dev" { capacity = 50 }
}
`))
	if err != nil {
		t.Fatal(err)
	}
	if err := c.call(l, "Queue.Apply", &wrpc.QueueApplyRequest{Config: cfg}, &wrpc.WriteResponse{}); err != nil {
		t.Fatal(err)
	}
	x := registerFake(t, c, l, "x", scheduler.Resources{MemoryMB: 8 * 1024, Vcores: 8})
	spec := scheduler.AppSpec{Queue: "root.prod", User: "ann", AMResources: scheduler.Resources{MemoryMB: 1024, Vcores: 1},
		DShell: scheduler.DShell{NumContainers: 1, Command: []string{"true"}}}
	var sub wrpc.AppSubmitResponse
	if err := c.call(l, "App.Submit", &wrpc.AppSubmitRequest{Spec: spec}, &sub); err != nil {
		t.Fatal(err)
	}
	tok, _ := x.amToken(t, l, sub.AppID)
	if err := c.call(l, "AM.Register", &wrpc.AMRegisterRequest{AppID: sub.AppID, Attempt: 1, Token: tok}, &wrpc.AMRegisterResponse{}); err != nil {
		t.Fatal(err)
	}
	// The AM holds 1 GiB; ann, asking for more, is prod's only active
	// user: her limit is prod's 4 GiB, so 3 GiB are left to her (the
	// queue's max, 6 GiB, and the free 7 GiB leave more).
	ask := scheduler.Ask{AskID: 1, Count: 8, Resources: scheduler.Resources{MemoryMB: 1024, Vcores: 1}, ExecutionType: scheduler.Guaranteed}
	req := &wrpc.AMAllocateRequest{AppID: sub.AppID, Attempt: 1, Token: tok, Asks: []scheduler.Ask{ask}}
	req.MaxWait = time.Millisecond
	var resp wrpc.AMAllocateResponse
	if err := c.call(l, "AM.Allocate", req, &resp); err != nil {
		t.Fatal(err)
	}
	if resp.Headroom == nil || resp.Headroom.MemoryMB != 3*1024 {
		t.Fatalf("headroom %v, want 3 GiB (ann's limit 4 GiB, less her AM)", resp.Headroom)
	}
	// Once she holds all her limit allows and one past it, nothing is left.
	testutil.WaitFor(t, 10*time.Second, func() bool {
		req.MinQueryIndex, req.MaxWait = resp.Index, 200*time.Millisecond
		if err := c.call(l, "AM.Allocate", req, &resp); err != nil {
			t.Fatal(err)
		}
		return resp.Headroom != nil && resp.Headroom.IsZero()
	})
	if a, _ := l.State().App(sub.AppID); a.Used.MemoryMB != 5*1024 {
		t.Fatalf("ann holds %d MiB, want 5 GiB: her limit of 4 and one container past it", a.Used.MemoryMB)
	}
	var st wrpc.AppStatusResponse
	if err := c.call(l, "App.Status", &wrpc.AppRequest{AppID: sub.AppID}, &st); err != nil {
		t.Fatal(err)
	}
	if st.App.Headroom == nil || !st.App.Headroom.IsZero() {
		t.Fatalf("app status headroom %v, want the AM's, none", st.App.Headroom)
	}
}
