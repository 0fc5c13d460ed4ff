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

// The spanning benchmarks measure what spanning sub-clusters costs an AM
// and what it gains it, in an in-process federation of three sub-clusters
// of two 8-vcore agents (real Raft on disk, real TCP, the router's split
// view and the unmanaged AMs' registration included), for an app whose
// queue keeps every ask home (home-only) and one whose asks the proxy
// spreads over the three by weight (spanning-3: `broadcast`, 1:1:1).
//
//	go test -run '^$' -bench 'BenchmarkSpanningLatency' -benchtime 200x ./agent/
//	go test -run '^$' -bench 'BenchmarkSpanningThroughput' -benchtime 3x ./agent/

var spanningModes = []struct {
	name string
	amrm federation.AMRMPolicyType
}{{"home-only", federation.AMRMHome}, {"spanning-3", federation.AMRMBroadcast}}

// BenchmarkSpanningLatency asks for three guaranteed containers at once,
// b.N times, from asking to the last one received (home-only: all from the
// home; spanning: one from each sub-cluster), each released after: p50
// and p99.
func BenchmarkSpanningLatency(b *testing.B) {
	for _, mode := range spanningModes {
		b.Run(mode.name, func(b *testing.B) {
			fw := startFedWorld(b, 3, 2, 8)
			fw.policy("root.default", mode.amrm, map[string]uint32{"sc1": 1, "sc2": 1, "sc3": 1})
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
	}
}

// BenchmarkSpanningThroughput keeps an ask for 45 up and releases every
// container hold after it arrived (a task of that length), until 300 have
// arrived, b.N times: the containers per second the app obtains from one
// sub-cluster (15 vcores free) against three (45). With tasks of no
// length what is measured is allocation itself (three leaders on a shared
// machine against one); with 200 ms tasks, the room an app gets.
func BenchmarkSpanningThroughput(b *testing.B) {
	for _, mode := range spanningModes {
		for _, hold := range []time.Duration{0, 200 * time.Millisecond} {
			b.Run(fmt.Sprintf("%s/task-%s", mode.name, hold), func(b *testing.B) {
				fw := startFedWorld(b, 3, 2, 8)
				fw.policy("root.default", mode.amrm, map[string]uint32{"sc1": 1, "sc2": 1, "sc3": 1})
				const want, target = 45, 300
				var total time.Duration
				for i := 0; i < b.N; i++ {
					_, _, am := fw.submit("root.default")
					start := time.Now()
					got := 0
					type held struct {
						id  string
						end time.Time
					}
					var running []held
					var release []string
					for got < target {
						now := time.Now()
						for len(running) > 0 && !running[0].end.After(now) {
							release = append(release, running[0].id)
							running = running[1:]
						}
						wait := 5 * time.Second
						if len(running) > 0 {
							wait = max(time.Millisecond, running[0].end.Sub(now))
						}
						resp, err := am.Allocate(context.Background(), rpc.AMAllocateRequest{Asks: []scheduler.Ask{{AskID: 1, Count: want - len(running),
							Resources: spanCore, ExecutionType: scheduler.Guaranteed}}, Releases: release}, wait)
						if err != nil {
							b.Fatal(err)
						}
						release = release[:0]
						for _, c := range resp.Allocated {
							running = append(running, held{c.ID, time.Now().Add(hold)})
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
		}
	}
}
