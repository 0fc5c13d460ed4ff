package server

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/weft-sched/weft/fsm"
	"github.com/weft-sched/weft/internal/testutil"
	"github.com/weft-sched/weft/scheduler"
)

// BenchmarkContainersCommitted measures guaranteed containers committed per
// second through a three-server Raft cluster (fsync on every server): 1,000
// nodes are registered and 100 apps in 10 queues are running; each
// iteration opens asks for 10,000 containers at once and waits until the
// leader's scheduling loop has committed every placement as plans.
func BenchmarkContainersCommitted(b *testing.B) {
	c := benchCluster(b)
	l := c.leader()
	apply := func(t fsm.MessageType, body any) any {
		res, _, err := l.raftApply(context.Background(), t, body)
		if err != nil {
			b.Fatal(err)
		}
		return res
	}
	cfg := scheduler.DefaultQueueConfig()
	cfg.Root.Policy = scheduler.PolicyDRF
	for i := 0; i < 10; i++ {
		q := scheduler.NewQueueSpec(fmt.Sprintf("q%d", i))
		q.Policy = scheduler.PolicyDRF
		cfg.Root.Children = append(cfg.Root.Children, q)
	}
	apply(fsm.QueueConfigApplyType, &fsm.QueueConfigApplyRequest{Config: cfg})
	var wg sync.WaitGroup
	for w := 0; w < 8; w++ {
		wg.Add(1)
		go func(w int) {
			defer wg.Done()
			for i := w; i < 1000; i += 8 {
				apply(fsm.NodeRegisterType, &fsm.NodeRegisterRequest{ID: fmt.Sprintf("n%04d", i), Address: "127.0.0.1:1",
					Capacity: scheduler.Resources{MemoryMB: 1 << 30, Vcores: 1 << 20}})
			}
		}(w)
	}
	wg.Wait()
	var apps []string
	for i := 0; i < 100; i++ {
		spec := scheduler.AppSpec{Queue: fmt.Sprintf("root.q%d", i%10), User: "test", DShell: scheduler.DShell{NumContainers: 1, Command: []string{"true"}}}
		apps = append(apps, apply(fsm.AppSubmitType, &fsm.AppSubmitRequest{Spec: spec}).(string))
	}
	// The leader places the AMs; register each attempt.
	testutil.Eventually(30*time.Second, func() bool {
		for _, id := range apps {
			if a, _ := l.State().App(id); a.AMPending {
				return false
			}
		}
		return true
	})
	for _, id := range apps {
		apply(fsm.AppRegisterType, &fsm.AppRegisterRequest{AppID: id, Attempt: 1})
	}
	size := scheduler.Resources{MemoryMB: 256, Vcores: 1}
	const perApp = 100
	b.ResetTimer()
	start := time.Now()
	total := 0
	for i := 0; i < b.N; i++ {
		seen := l.State().Index()
		var asks sync.WaitGroup
		for _, id := range apps { // as 100 AMs would: concurrently
			asks.Add(1)
			go func() {
				defer asks.Done()
				apply(fsm.AskUpdateType, &fsm.AskUpdateRequest{AppID: id, Attempt: 1, SeenIndex: seen,
					Asks: []scheduler.Ask{{AskID: uint64(i + 1), Count: perApp, Resources: size, ExecutionType: scheduler.Guaranteed}}})
			}()
		}
		asks.Wait()
		if !testutil.Eventually(60*time.Second, func() bool {
			for _, id := range apps {
				if a, _ := l.State().App(id); !a.Pending().IsZero() {
					return false
				}
			}
			return true
		}) {
			b.Fatal("placements did not complete")
		}
		total += perApp * len(apps)
	}
	b.ReportMetric(float64(total)/time.Since(start).Seconds(), "containers/s")
}
