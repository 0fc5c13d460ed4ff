package server

import (
	"sort"
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/weft-sched/weft/internal/testutil"
	wrpc "github.com/weft-sched/weft/rpc"
	"github.com/weft-sched/weft/scheduler"
)

// benchCluster starts three servers with default Raft timing, as a
// production cluster would run, and logs only errors.
func benchCluster(b *testing.B) *testCluster {
	c := &testCluster{t: nil, servers: map[string]*Server{}, configs: map[string]*Config{}, pool: wrpc.NewPool(nil)}
	c.logger = hclog.NewNullLogger()
	b.Cleanup(func() {
		c.pool.Shutdown()
		for _, s := range c.servers {
			s.Shutdown()
		}
	})
	start := func(id string, join ...string) *Server {
		s, err := New(&Config{
			NodeID: id, DataDir: b.TempDir(), BindAddr: "127.0.0.1", RPCPort: -1, SerfPort: -1,
			BootstrapExpect: 3, Join: join, Logger: c.logger.Named(id), SerfFastGossip: true,
			JoinRetryInterval: 100 * time.Millisecond,
		})
		if err != nil {
			b.Fatal(err)
		}
		c.servers[id] = s
		return s
	}
	s1 := start("s1")
	start("s2", s1.SerfAddr())
	start("s3", s1.SerfAddr())
	if !testutil.Eventually(30*time.Second, func() bool { return c.leader() != nil }) {
		b.Fatal("no leader")
	}
	return c
}

func benchWrite(b *testing.B, c *testCluster, target *Server, parallel bool) {
	cfg := scheduler.DefaultQueueConfig()
	req := &wrpc.QueueApplyRequest{Config: cfg}
	// Warm the connection pool and the follower's connection to the leader.
	var wr wrpc.WriteResponse
	if err := c.call(target, "Queue.Apply", req, &wr); err != nil {
		b.Fatal(err)
	}
	var mu sync.Mutex
	var lat []time.Duration
	record := func(d time.Duration) {
		mu.Lock()
		lat = append(lat, d)
		mu.Unlock()
	}
	b.ResetTimer()
	if parallel {
		b.SetParallelism(16)
		b.RunParallel(func(pb *testing.PB) {
			req := &wrpc.QueueApplyRequest{Config: cfg} // the pool writes each call's deadline into its header
			for pb.Next() {
				start := time.Now()
				var wr wrpc.WriteResponse
				if err := c.call(target, "Queue.Apply", req, &wr); err != nil {
					b.Error(err)
					return
				}
				record(time.Since(start))
			}
		})
	} else {
		for i := 0; i < b.N; i++ {
			start := time.Now()
			if err := c.call(target, "Queue.Apply", req, &wr); err != nil {
				b.Fatal(err)
			}
			record(time.Since(start))
		}
	}
	b.StopTimer()
	sort.Slice(lat, func(i, j int) bool { return lat[i] < lat[j] })
	if len(lat) > 0 {
		b.ReportMetric(float64(lat[len(lat)/2].Microseconds()), "p50-µs")
		b.ReportMetric(float64(lat[len(lat)*99/100].Microseconds()), "p99-µs")
	}
	b.ReportMetric(float64(len(lat))/b.Elapsed().Seconds(), "writes/s")
}

// BenchmarkWriteThroughFollower: the latency of a write sent to a follower,
// forwarded to the leader, committed by a three-server Raft quorum on
// raft-boltdb (fsync) and answered back through the follower.
func BenchmarkWriteThroughFollower(b *testing.B) {
	c := benchCluster(b)
	benchWrite(b, c, c.follower(), false)
}

// BenchmarkWriteToLeader is the same write sent straight to the leader.
func BenchmarkWriteToLeader(b *testing.B) {
	c := benchCluster(b)
	benchWrite(b, c, c.leader(), false)
}

// BenchmarkWriteThroughFollowerParallel: 16×GOMAXPROCS concurrent writers
// through one follower; Raft batches their log appends and fsyncs.
func BenchmarkWriteThroughFollowerParallel(b *testing.B) {
	c := benchCluster(b)
	benchWrite(b, c, c.follower(), true)
}
