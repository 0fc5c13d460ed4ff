package rpc

import (
	"context"
	"sync"
	"syscall"
	"testing"
	"time"

	msgpackrpc "github.com/hashicorp/net-rpc-msgpackrpc/v2"
	"github.com/hashicorp/yamux"
	"github.com/weft-sched/weft/scheduler"
)

// The per-RPC cost on a server's hot path (issue 12): one small call over
// a real TCP loopback connection through the whole stack — type byte,
// yamux, the msgpack codecs, Server dispatch — on one reused stream, on a
// new stream per call (what the pool does once its idle streams run out),
// and through Pool.Call from many goroutines at once (a forwarding
// follower). The handlers do next to nothing: what is measured is the
// transport. Results: bench/rpc-hotpath.txt, docs/benchmarks.md.

// hotpathHeartbeat is a heartbeat as an idle agent sends it: header with
// token and request ID, no container changes, its load.
func hotpathHeartbeat() *HeartbeatRequest {
	return &HeartbeatRequest{
		RequestHeader: RequestHeader{AuthToken: "0123456789abcdef0123456789abcdef", RequestID: NewRequestID()},
		NodeID:        "node-00042", Epoch: 7, Secret: "fedcba9876543210fedcba9876543210",
		Load:          NodeLoad{QueueCapacity: 16, RunningGuaranteed: 3, Used: scheduler.Resources{MemoryMB: 6144, Vcores: 3}},
		LeastLoadedAt: 1700000000000000000, WorkloadKeyID: 2,
	}
}

// heartbeatHandler answers like a leader with nothing new for the node.
func heartbeatHandler(ctx context.Context, req *HeartbeatRequest, resp *HeartbeatResponse) error {
	resp.Servers = []string{"10.0.0.1:4647", "10.0.0.2:4647", "10.0.0.3:4647"}
	resp.QueueLimit = 16
	return nil
}

func startHotpathServer(b *testing.B) *testServer {
	return startTestServerWith(b, func(s *Server) {
		Register(s, "Node.Heartbeat", CapPublic, heartbeatHandler)
	})
}

type hotpathCall struct {
	name   string
	method string
	args   func() any
	reply  func() any
}

var hotpathCalls = []hotpathCall{
	{"echo", "Echo.Echo", func() any { return &EchoArgs{Text: "ping"} }, func() any { return new(EchoReply) }},
	{"heartbeat", "Node.Heartbeat", func() any { return hotpathHeartbeat() }, func() any { return new(HeartbeatResponse) }},
}

func BenchmarkRPCHotPath(b *testing.B) {
	ts := startHotpathServer(b)
	for _, c := range hotpathCalls {
		b.Run(c.name+"/reused-stream", func(b *testing.B) {
			s := dialMuxFramed(b, ts.Addr())
			st, err := s.Open()
			if err != nil {
				b.Fatal(err)
			}
			defer st.Close()
			cc := NewClientCodec(st)
			args := c.args()
			b.ReportAllocs()
			b.ResetTimer()
			cpu := startCPU()
			for i := 0; i < b.N; i++ {
				if err := msgpackrpc.CallWithCodec(cc, c.method, args, c.reply()); err != nil {
					b.Fatal(err)
				}
			}
			cpu.report(b)
		})
		b.Run(c.name+"/new-stream", func(b *testing.B) {
			s := dialMuxFramed(b, ts.Addr())
			args := c.args()
			b.ReportAllocs()
			b.ResetTimer()
			cpu := startCPU()
			for i := 0; i < b.N; i++ {
				if err := newStreamCall(s, c.method, args, c.reply()); err != nil {
					b.Fatal(err)
				}
			}
			cpu.report(b)
		})
	}
	// A forwarding follower: many handlers at once calling the leader
	// through one Pool (GOMAXPROCS×32 goroutines).
	b.Run("heartbeat/pool-parallel", func(b *testing.B) {
		p := NewPool(nil)
		defer p.Shutdown()
		addr := ts.Addr()
		b.ReportAllocs()
		b.SetParallelism(32)
		b.ResetTimer()
		cpu := startCPU()
		b.RunParallel(func(pb *testing.PB) {
			ctx := context.Background()
			for pb.Next() {
				var resp HeartbeatResponse
				if err := p.Call(ctx, addr, "Node.Heartbeat", hotpathHeartbeat(), &resp); err != nil {
					b.Error(err)
					return
				}
			}
		})
		b.StopTimer()
		cpu.report(b)
		b.ReportMetric(float64(p.streamsOpened.Load())/float64(b.N), "streams/op")
	})
	// Forwarding comes in bursts (agents' heartbeats are not evenly
	// spread): each op is a burst of 64 concurrent calls through one Pool,
	// after which they are all idle again.
	b.Run("heartbeat/pool-burst64", func(b *testing.B) {
		p := NewPool(nil)
		defer p.Shutdown()
		addr := ts.Addr()
		const burst = 64
		b.ReportAllocs()
		b.ResetTimer()
		cpu := startCPU()
		for i := 0; i < b.N; i++ {
			var wg sync.WaitGroup
			for range burst {
				wg.Add(1)
				go func() {
					defer wg.Done()
					var resp HeartbeatResponse
					if err := p.Call(context.Background(), addr, "Node.Heartbeat", hotpathHeartbeat(), &resp); err != nil {
						b.Error(err)
					}
				}()
			}
			wg.Wait()
		}
		b.StopTimer()
		cpu.report(b)
		b.ReportMetric(float64(p.streamsOpened.Load())/float64(b.N*burst), "streams/call")
	})
}

// cpuClock reads the CPU time the process (client and server both) has
// used: on a machine shared with other work it says more than the wall
// clock about what a call costs.
type cpuClock struct{ start time.Duration }

func processCPU() time.Duration {
	var ru syscall.Rusage
	syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

func startCPU() cpuClock { return cpuClock{processCPU()} }

// report adds cpu-ns/op, the process's CPU time per op since startCPU.
func (c cpuClock) report(b *testing.B) {
	b.ReportMetric(float64(processCPU()-c.start)/float64(b.N), "cpu-ns/op")
}

// dialMuxFramed opens a multiplexed session to addr as a Pool does.
func dialMuxFramed(b *testing.B, addr string) *yamux.Session {
	c := dialFrom(b, "127.0.0.1", addr)
	if _, err := c.Write([]byte{byte(ConnMultiplex)}); err != nil {
		b.Fatal(err)
	}
	s, err := yamux.Client(newFrameConn(c), YamuxConfig())
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { s.Close() })
	return s
}

// newStreamCall makes one call on a stream of its own, as the pool does
// when it has no idle stream.
func newStreamCall(s *yamux.Session, method string, args, reply any) error {
	st, err := s.Open()
	if err != nil {
		return err
	}
	defer st.Close()
	return msgpackrpc.CallWithCodec(NewClientCodec(st), method, args, reply)
}
