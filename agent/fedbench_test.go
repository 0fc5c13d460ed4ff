package agent

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/weft-sched/weft/rpc"
	"github.com/weft-sched/weft/scheduler"
	"github.com/weft-sched/weft/scheduler/federation"
)

// BenchmarkSpanningAllocation measures what spanning sub-clusters costs an
// AM and what it gains it, in an in-process federation of three
// sub-clusters of two 8-vcore agents (real Raft on disk, real TCP, the
// router's split view and the unmanaged AMs' registration included), for
// an app whose queue keeps every ask home and for one whose asks the proxy
// spreads over the three by weight (`broadcast`, weights 1:1:1):
//
//   - latency: three guaranteed containers asked at once, from asking to
//     the last one received (home-only: all from the home; spanning: one
//     from each sub-cluster), b.N times, each released after; p50 and p99;
//
//   - throughput: an ask for 45 kept up while every container is released
//     as it arrives (a task of no length), until 300 have arrived: the
//     containers per second the app obtains from one sub-cluster (15 vcores
//     free) against three (45).
//
//     go test -run '^$' -bench BenchmarkSpanningAllocation -benchtime 200x ./agent/
func BenchmarkSpanningAllocation(b *testing.B) {
	for _, mode := range []struct {
		name string
		amrm federation.AMRMPolicyType
	}{{"home-only", federation.AMRMHome}, {"spanning-3", federation.AMRMBroadcast}} {
		b.Run(mode.name, func(b *testing.B) {
			fw := startFedWorld(b, 3, 2, 8)
			fw.policy("root.default", mode.amrm, map[string]uint32{"sc1": 1, "sc2": 1, "sc3": 1})
			b.Run("latency", func(b *testing.B) {
				_, _, am := fw.submit("root.default")
				lat := make([]time.Duration, 0, b.N)
				var release []string
				b.ResetTimer()
				for i := 0; i < b.N; i++ {
					start := time.Now()
					got := 0
					for got < 3 {
						resp, err := am.Allocate(context.Background(), rpc.AMAllocateRequest{Asks: []scheduler.Ask{{AskID: 1, Count: 3 - got,
							Resources: spanCore, ExecutionType: scheduler.Guaranteed}}, Releases: release}, 5*time.Second)
						if err != nil {
							b.Fatal(err)
						}
						release = nil
						got += len(resp.Allocated)
						for _, c := range resp.Allocated {
							release = append(release, c.ID)
						}
					}
					lat = append(lat, time.Since(start))
				}
				b.StopTimer()
				reportLatency(b, lat)
			})
			b.Run("throughput", func(b *testing.B) {
				const want, target = 45, 300
				var total time.Duration
				for i := 0; i < b.N; i++ {
					_, _, am := fw.submit("root.default")
					start := time.Now()
					got := 0
					var release []string
					for got < target {
						resp, err := am.Allocate(context.Background(), rpc.AMAllocateRequest{Asks: []scheduler.Ask{{AskID: 1, Count: want,
							Resources: spanCore, ExecutionType: scheduler.Guaranteed}}, Releases: release}, 5*time.Second)
						if err != nil {
							b.Fatal(err)
						}
						release = release[:0]
						for _, c := range resp.Allocated {
							release = append(release, c.ID)
						}
						got += len(resp.Allocated)
					}
					total += time.Since(start)
					if err := am.Finish(context.Background(), string(scheduler.AppFinished), fmt.Sprint("got ", got)); err != nil {
						b.Fatal(err)
					}
				}
				b.ReportMetric(float64(target*b.N)/total.Seconds(), "containers/s")
			})
		})
	}
}
