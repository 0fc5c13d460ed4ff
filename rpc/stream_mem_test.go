package rpc

import (
	"net/rpc"
	"runtime"
	"testing"
)

// BenchmarkIdleStreamMemory measures what an idle multiplexed stream costs
// (both ends, in one process): 256 streams each make one call and stay
// open. Before read buffers were pooled, the server held a 64 KiB reader
// and a 4 KiB writer per stream.
func BenchmarkIdleStreamMemory(b *testing.B) {
	ts := startTestServer(b, "a")
	const streams = 256
	for i := 0; i < b.N; i++ {
		s := dialMux(b, "127.0.0.1", ts.Addr())
		var before, after runtime.MemStats
		runtime.GC()
		runtime.ReadMemStats(&before)
		var clients []*rpc.Client
		for j := 0; j < streams; j++ {
			st, err := s.Open()
			if err != nil {
				b.Fatal(err)
			}
			c := rpc.NewClientWithCodec(NewClientCodec(st))
			var reply EchoReply
			if err := c.Call("Echo.Echo", &EchoArgs{Text: "x"}, &reply); err != nil {
				b.Fatal(err)
			}
			clients = append(clients, c)
		}
		runtime.GC()
		runtime.ReadMemStats(&after)
		b.ReportMetric(float64(int64(after.HeapInuse)-int64(before.HeapInuse))/streams, "heap-bytes/stream")
		for _, c := range clients {
			c.Close()
		}
		s.Close()
	}
}
