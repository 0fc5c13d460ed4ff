package server

import (
	"sort"
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/weft-sched/weft/internal/testutil"
	"github.com/weft-sched/weft/internal/tlsutil"
	wrpc "github.com/weft-sched/weft/rpc"
	"github.com/weft-sched/weft/scheduler"
)

// benchCluster starts three servers with default Raft timing, as a
// production cluster would run, and logs only errors.
func benchCluster(b *testing.B) *testCluster { return benchClusterTLS(b, nil) }

// benchClusterTLS is benchCluster with mutual TLS on when pki is not nil:
// servers hold server certificates, the benchmark's client a client one.
func benchClusterTLS(b *testing.B, pki *testutil.PKI) *testCluster {
	c := &testCluster{t: nil, servers: map[string]*Server{}, configs: map[string]*Config{}, pool: wrpc.NewPool(nil), pki: pki}
	var serverTLS func() *tlsutil.Configurator
	if pki != nil {
		c.pool = wrpc.NewTLSPool(nil, pki.Configurator(wrpc.RoleClient), wrpc.RoleServer)
		serverTLS = func() *tlsutil.Configurator { return pki.Configurator(wrpc.RoleServer) }
	} else {
		serverTLS = func() *tlsutil.Configurator { return nil }
	}
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
			JoinRetryInterval: 100 * time.Millisecond, TLS: serverTLS(),
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

// mtlsRounds is how many times the mTLS benchmarks alternate between
// their TLS-off and TLS-on clusters, so that both see the same machine.
const mtlsRounds = 3

// BenchmarkWriteThroughFollowerMTLS is BenchmarkWriteThroughFollower with
// mutual TLS off and on, in one run: what TLS costs the forwarded write
// (client→follower and follower→leader RPC, and Raft's replication). Both
// clusters run side by side and are measured in alternating rounds
// (tls-off, tls-on, tls-off#01, ...), so that a noisy machine (shared
// disks, other processes) weighs on both alike.
func BenchmarkWriteThroughFollowerMTLS(b *testing.B) {
	clusters := []struct {
		name string
		c    *testCluster
	}{{"tls-off", benchClusterTLS(b, nil)}, {"tls-on", benchClusterTLS(b, testutil.NewPKI(b))}}
	for round := 0; round < mtlsRounds; round++ {
		for _, m := range clusters {
			b.Run(m.name, func(b *testing.B) { benchWrite(b, m.c, m.c.follower(), false) })
		}
	}
}
