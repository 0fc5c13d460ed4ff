package agent

import (
	"context"
	"fmt"
	"sort"
	"testing"
	"time"

	"github.com/weft-sched/weft/internal/testutil"
	"github.com/weft-sched/weft/rpc"
	"github.com/weft-sched/weft/scheduler"
)

// BenchmarkOpportunisticAllocation measures the latency of allocating one
// opportunistic container as its AM sees it: one AM.Allocate through the
// AMRMProxy on the AM's node, on loopback. Distributed, the proxy
// allocates from its least-loaded list and answers at once; centralized,
// it forwards the ask to the leader, which allocates from its list and
// commits the container through Raft (bolt with fsync) before answering.
// Nodes queue without limit here, and nothing is started, so the room
// never runs out. Run it with a fixed count (make bench uses 3000x): the
// leader's answer reads every container of the app, so the centralized
// figure grows with the app.
func BenchmarkOpportunisticAllocation(b *testing.B) {
	for _, mode := range []string{"distributed", "centralized"} {
		b.Run(mode, func(b *testing.B) { measureAllocation(b, allocationWorld(b, mode, nil)) })
	}
}

// mtlsRounds is how many times BenchmarkOpportunisticAllocationMTLS
// alternates between its TLS-off and TLS-on worlds.
const mtlsRounds = 3

// BenchmarkOpportunisticAllocationMTLS is BenchmarkOpportunisticAllocation
// with mutual TLS off and on, in one run: the AM reaches its AMRMProxy over
// TLS (with no certificate of its own), the proxy reaches the leader with
// its agent certificate. For each mode both worlds run side by side and
// are measured in alternating rounds (tls-off, tls-on, tls-off#01, ...),
// so that a noisy machine weighs on both alike and both apps grow alike.
func BenchmarkOpportunisticAllocationMTLS(b *testing.B) {
	for _, mode := range []string{"distributed", "centralized"} {
		b.Run(mode, func(b *testing.B) {
			worlds := []struct {
				name string
				w    *amWorld
			}{{"tls-off", allocationWorld(b, mode, nil)}, {"tls-on", allocationWorld(b, mode, testutil.NewPKI(b))}}
			for round := 0; round < mtlsRounds; round++ {
				for _, m := range worlds {
					b.Run(m.name, func(b *testing.B) { measureAllocation(b, m.w) })
				}
			}
		})
	}
}

// allocationWorld is an AM world whose nodes queue without limit,
// allocating opportunistic containers in mode (distributed or
// centralized), with TLS when pki is not nil.
func allocationWorld(b *testing.B, mode string, pki *testutil.PKI) *amWorld {
	w := startAMWorldTLS(b, 3, pki, func(c *Config) { c.OpportunisticQueueLength = 1 << 20 })
	if mode == "centralized" {
		o := scheduler.DefaultOpportunisticConfig()
		o.Distributed = false
		w.setOpportunistic(o)
		testutil.WaitFor(b, 15*time.Second, func() bool { return w.home.sched.view().Centralized })
	}
	w.waitList(3)
	return w
}

// measureAllocation allocates one opportunistic container b.N times.
func measureAllocation(b *testing.B, w *amWorld) {
	req := rpc.AMAllocateRequest{Asks: []scheduler.Ask{oppAsk(1, 1, true)}}
	lat := make([]time.Duration, 0, b.N)
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		start := time.Now()
		resp, err := w.am.Allocate(context.Background(), req, time.Second)
		lat = append(lat, time.Since(start))
		if err != nil || len(resp.Allocated) != 1 {
			b.Fatalf("allocation %d: %v, %d containers", i, err, len(resp.Allocated))
		}
	}
	b.StopTimer()
	reportLatency(b, lat)
}

func reportLatency(b *testing.B, lat []time.Duration) {
	sort.Slice(lat, func(i, j int) bool { return lat[i] < lat[j] })
	b.ReportMetric(float64(lat[len(lat)/2].Microseconds()), "p50-µs")
	b.ReportMetric(float64(lat[len(lat)*99/100].Microseconds()), "p99-µs")
}

// shortTasks is a task's command: sleep 0.2 to 2.0 s, by task index, so
// every mode runs the same work.
const shortTasks = `d=$(( (WEFT_TASK_INDEX * 37 + APP) % 19 + 2 )); sleep $((d / 10)).$((d % 10))`

// BenchmarkShortTasks is a Mercury-style run: four apps of 60 short tasks
// (0.2–2 s, 1 vcore each) on four 4-vcore agents, more work than the
// cluster runs at once. Mixes: every task guaranteed; two apps' tasks
// opportunistic; every app's tasks opportunistic. Feedback: agents
// heartbeat when a container ends (weft's default), or only every second
// (lazy, as YARN node managers do). Each reports completed tasks per
// second over the makespan (first submit to last app's end), the cluster's
// utilization (vcore-seconds of task containers over capacity × makespan;
// the four AM containers hold a quarter of it), and the mean gap on a node
// between a task ending and the next one starting there.
func BenchmarkShortTasks(b *testing.B) {
	const apps, perApp, agents, vcores = 4, 60, 4, 4
	for _, feedback := range []string{"event", "lazy"} {
		for _, mode := range []struct {
			name          string
			opportunistic int
		}{{"guaranteed-only", 0}, {"half-opportunistic", 2}, {"all-opportunistic", 4}} {
			b.Run(feedback+"/"+mode.name, func(b *testing.B) {
				shortTasksMode(b, agents, vcores, apps, perApp, mode.opportunistic, feedback == "lazy")
			})
		}
	}
}

// shortTasksMode runs the workload b.N times, each on a fresh cluster, and
// reports the mean of each measure.
func shortTasksMode(b *testing.B, agents int, vcores int64, apps, perApp, opportunistic int, lazy bool) {
	var tasksPerSec, util, gap float64
	for i := 0; i < b.N; i++ {
		b.StopTimer()
		_, _, c := clusterWith(b, agents, func(cfg *Config) {
			cfg.Resources = scheduler.Resources{MemoryMB: 4096, Vcores: vcores}
			cfg.LazyHeartbeats = lazy
		})
		b.StartTimer()
		r := runShortTasks(b, c, apps, perApp, opportunistic)
		tasksPerSec += r.tasksPerSec
		util += r.util
		gap += r.gap.Seconds() * 1000
	}
	b.ReportMetric(tasksPerSec/float64(b.N), "tasks/s")
	b.ReportMetric(100*util/float64(b.N), "util-%")
	b.ReportMetric(gap/float64(b.N), "gap-ms")
}

type shortTasksResult struct {
	tasksPerSec, util float64
	gap               time.Duration
}

func runShortTasks(b *testing.B, c *rpc.Client, apps, perApp, opportunistic int) shortTasksResult {
	var ids []string
	for a := 0; a < apps; a++ {
		spec := scheduler.AppSpec{Name: fmt.Sprintf("short-%d", a), User: "test", DShell: scheduler.DShell{NumContainers: perApp,
			Resources: scheduler.Resources{MemoryMB: 256, Vcores: 1}, ExecutionType: scheduler.Guaranteed,
			Env: map[string]string{"APP": fmt.Sprint(a)}, Command: []string{"sh", "-c", shortTasks}}}
		if a < opportunistic {
			spec.DShell.ExecutionType, spec.DShell.EnforceExecutionType = scheduler.Opportunistic, true
		}
		var sub rpc.AppSubmitResponse
		if err := c.Call(context.Background(), "App.Submit", &rpc.AppSubmitRequest{Spec: spec}, &sub); err != nil {
			b.Fatal(err)
		}
		ids = append(ids, sub.AppID)
	}
	var first, last int64
	var busy float64
	done := 0
	ends := map[string][]int64{}   // node → task ends
	starts := map[string][]int64{} // node → task starts
	for _, id := range ids {
		app := waitApp(b, c, id)
		if app.State != "FINISHED" {
			b.Fatalf("app %+v", app)
		}
		if first == 0 || app.SubmittedAt < first {
			first = app.SubmittedAt
		}
		last = max(last, app.FinishedAt)
		var list rpc.ContainerListResponse
		if err := c.Call(context.Background(), "Container.List", &rpc.ContainerListRequest{AppID: id}, &list); err != nil {
			b.Fatal(err)
		}
		for _, ci := range list.Containers {
			if ci.IsAM || ci.StartedAt == 0 {
				continue
			}
			busy += float64(ci.FinishedAt-ci.StartedAt) / 1e9 * float64(ci.Resources.Vcores)
			if ci.Reason == "exited" {
				done++
			}
			starts[ci.NodeID] = append(starts[ci.NodeID], ci.StartedAt)
			ends[ci.NodeID] = append(ends[ci.NodeID], ci.FinishedAt)
		}
	}
	var capacity scheduler.Resources
	var nodes rpc.NodeListResponse
	if err := c.Call(context.Background(), "Node.List", &rpc.RequestHeader{}, &nodes); err != nil {
		b.Fatal(err)
	}
	for _, n := range nodes.Nodes {
		capacity = capacity.Add(n.Capacity)
	}
	makespan := float64(last-first) / 1e9
	return shortTasksResult{tasksPerSec: float64(done) / makespan, util: busy / (float64(capacity.Vcores) * makespan),
		gap: meanRestartGap(starts, ends)}
}

// meanRestartGap is the mean, over task ends, of the time until the next
// task started on the same node: how long a freed slot stayed idle.
func meanRestartGap(starts, ends map[string][]int64) time.Duration {
	var total time.Duration
	n := 0
	for node, es := range ends {
		ss := starts[node]
		sort.Slice(ss, func(i, j int) bool { return ss[i] < ss[j] })
		for _, e := range es {
			k := sort.Search(len(ss), func(i int) bool { return ss[i] >= e })
			if k < len(ss) {
				total += time.Duration(ss[k] - e)
				n++
			}
		}
	}
	if n == 0 {
		return 0
	}
	return total / time.Duration(n)
}
