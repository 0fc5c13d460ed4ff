package router

import (
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
	wrpc "github.com/weft-sched/weft/rpc"
	"github.com/weft-sched/weft/server"
)

// holdQueues is a queue whose apps wait (max_running_apps = 0): the
// benchmarks measure submission, not scheduling.
const holdQueues = `queue "root" {
  queue "default" {}
  queue "hold" { max_running_apps = 0 }
}`

// BenchmarkSubmit measures App.Submit through a quorum of three routers
// to three one-server sub-clusters (real TCP, Raft on disk, in one
// process), against App.Submit to one sub-cluster's server directly:
// latency (one client, p50 and p99) and throughput (16 and 64 clients at
// once). Submissions through routers are bound by Raft commit latency,
// not CPU: each waits for two commits of the routers' quorum and one of
// its home's, so throughput grows with the clients in flight (Raft
// commits what arrived together in one write).
// What a router adds is the difference: two Raft writes of the routers
// (the mapping before, the settlement after) and one more hop.
//
//	go test -run '^$' -bench BenchmarkSubmit -benchtime 2000x ./router/
func BenchmarkSubmit(b *testing.B) {
	for _, target := range []string{"direct", "router-leader", "router-follower"} {
		// Each target on a federation of its own, so that none is
		// measured against the apps an earlier one left waiting.
		b.Run(target, func(b *testing.B) {
			c := newRouters(b)
			c.logger.SetLevel(hclog.Warn)
			first := c.start("r1", 3)
			c.start("r2", 3, first.SerfAddr())
			c.start("r3", 3, first.SerfAddr())
			leader := c.leader()
			var subs []*server.Server
			for i := 1; i <= 3; i++ {
				subs = append(subs, subcluster(b, c, fmt.Sprint("sc", i), leader, 8, holdQueues))
			}
			addr := subs[0].RPCAddr()
			switch target {
			case "router-leader":
				addr = leader.RPCAddr()
			case "router-follower":
				for _, r := range c.byID {
					if r != leader {
						addr = r.RPCAddr()
						break
					}
				}
			}
			benchSubmit(b, c, addr)
		})
	}
}

// benchSubmit measures App.Submit to addr: latency with one client, then
// throughput with 16 and 64.
func benchSubmit(b *testing.B, c *routers, addr string) {
	b.Run("latency", func(b *testing.B) {
		lat := make([]time.Duration, 0, b.N)
		b.ResetTimer()
		for i := 0; i < b.N; i++ {
			start := time.Now()
			if err := c.call2(addr, "App.Submit", &wrpc.AppSubmitRequest{Spec: dshell("root.hold")}, new(wrpc.AppSubmitResponse)); err != nil {
				b.Fatal(err)
			}
			lat = append(lat, time.Since(start))
		}
		b.StopTimer()
		slices.Sort(lat)
		b.ReportMetric(float64(lat[len(lat)/2].Microseconds())/1000, "p50-ms")
		b.ReportMetric(float64(lat[len(lat)*99/100].Microseconds())/1000, "p99-ms")
	})
	for _, clients := range []int{16, 64} {
		b.Run(fmt.Sprintf("throughput-%d", clients), func(b *testing.B) {
			var next atomic.Int64
			var wg sync.WaitGroup
			errs := make(chan error, clients)
			b.ResetTimer()
			start := time.Now()
			for w := 0; w < clients; w++ {
				wg.Add(1)
				go func() {
					defer wg.Done()
					for next.Add(1) <= int64(b.N) {
						if err := c.call2(addr, "App.Submit", &wrpc.AppSubmitRequest{Spec: dshell("root.hold")}, new(wrpc.AppSubmitResponse)); err != nil {
							errs <- err
							return
						}
					}
				}()
			}
			wg.Wait()
			elapsed := time.Since(start)
			b.StopTimer()
			close(errs)
			for err := range errs {
				b.Fatal(err)
			}
			b.ReportMetric(float64(b.N)/elapsed.Seconds(), "submits/s")
		})
	}
}
