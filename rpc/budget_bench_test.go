package rpc

import (
	"bufio"
	"fmt"
	"net/rpc"
	"reflect"
	"testing"

	msgpackrpc "github.com/hashicorp/net-rpc-msgpackrpc/v2"
	"github.com/weft-sched/weft/scheduler"
)

// benchHeartbeat is an agent's heartbeat with 50 containers.
func benchHeartbeat() *HeartbeatRequest {
	hb := &HeartbeatRequest{RequestHeader: RequestHeader{RequestID: NewRequestID()}, NodeID: "node-017", Epoch: 3,
		Load: NodeLoad{QueueCapacity: 10, RunningGuaranteed: 40, Used: scheduler.Resources{MemoryMB: 81920, Vcores: 40}}}
	code := 0
	for i := 0; i < 50; i++ {
		hb.Containers = append(hb.Containers, ContainerReport{
			ID: fmt.Sprintf("app-0000000042-01-c%06d", i), AppID: "app-0000000042", Attempt: 1, AskID: uint64(i + 1),
			Resources: scheduler.Resources{MemoryMB: 2048, Vcores: 1}, ExecutionType: "GUARANTEED",
			State: scheduler.ContainerRunning, ExitCode: &code, Diagnostics: "", AllocatedAt: 1700000000000000000,
			StartedAt: 1700000000100000000, At: 1700000000200000000,
		})
	}
	return hb
}

// benchAllocate is an AM's allocate call with 1000 asks.
func benchAllocate() *AMAllocateRequest {
	req := &AMAllocateRequest{RequestHeader: RequestHeader{RequestID: NewRequestID()}, AppID: "app-0000000042",
		Attempt: 1, Token: "0123456789abcdef0123456789abcdef", Progress: 0.5}
	for i := 0; i < 1000; i++ {
		req.Asks = append(req.Asks, scheduler.Ask{AskID: uint64(i + 1), Count: 1,
			Resources: scheduler.Resources{MemoryMB: 1024, Vcores: 1}, ExecutionType: scheduler.Guaranteed, Priority: 1,
			Locality: scheduler.Locality{Nodes: []string{"node-017"}, Racks: []string{"/rack-3"}, Relax: true}})
	}
	return req
}

func benchRequests() []struct {
	name string
	req  any
} {
	return []struct {
		name string
		req  any
	}{{"heartbeat-50-containers", benchHeartbeat()}, {"allocate-1000-asks", benchAllocate()}}
}

// BenchmarkDecodeCost is the budget check alone.
func BenchmarkDecodeCost(b *testing.B) {
	for _, bc := range benchRequests() {
		raw := encodeValue(b, bc.req)
		t := reflect.TypeOf(bc.req).Elem()
		b.Run(bc.name, func(b *testing.B) {
			b.SetBytes(int64(len(raw)))
			b.ReportAllocs()
			for i := 0; i < b.N; i++ {
				if _, err := checkDecodeCost(raw, t, MaxRequestSize); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// loopReader yields msg over and over, like a connection carrying the same
// request again and again.
type loopReader struct {
	msg []byte
	off int
}

func (l *loopReader) Read(p []byte) (int, error) {
	n := copy(p, l.msg[l.off:])
	l.off = (l.off + n) % len(l.msg)
	return n, nil
}

// BenchmarkReadRequest reads requests (header and body) off one stream:
// "streaming" is the codec before the budget (msgpack decoded straight off
// a 64 KiB bufio reader), "checked" is ServerCodec (read whole, check the
// decoded size, decode).
func BenchmarkReadRequest(b *testing.B) {
	for _, bc := range benchRequests() {
		msg := append(encodeValue(b, map[string]any{"ServiceMethod": "X.Y", "Seq": 1}), encodeValue(b, bc.req)...)
		t := reflect.TypeOf(bc.req).Elem()
		b.Run(bc.name+"/streaming", func(b *testing.B) {
			b.SetBytes(int64(len(msg)))
			b.ReportAllocs()
			cc := msgpackrpc.NewCodecFromHandle(false, true, byteConn{bufio.NewReaderSize(&loopReader{msg: msg}, 64<<10), nil}, MsgpackHandle)
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				var req rpc.Request
				if err := cc.ReadRequestHeader(&req); err != nil {
					b.Fatal(err)
				}
				if err := cc.ReadRequestBody(reflect.New(t).Interface()); err != nil {
					b.Fatal(err)
				}
			}
		})
		b.Run(bc.name+"/checked", func(b *testing.B) {
			b.SetBytes(int64(len(msg)))
			b.ReportAllocs()
			sc := NewServerCodec(byteConn{&loopReader{msg: msg}, nil}, nil)
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				var req rpc.Request
				if err := sc.ReadRequestHeader(&req); err != nil {
					b.Fatal(err)
				}
				if err := sc.ReadRequestBody(reflect.New(t).Interface()); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
