package rpc

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"

	msgpackrpc "github.com/hashicorp/net-rpc-msgpackrpc/v2"
)

// A client stream between calls holds no read buffer, and a server error
// (whose body the client skips) leaves the stream in step for the next
// call.
func TestClientCodecIdleHoldsNoBuffer(t *testing.T) {
	ts := startTestServer(t, "a")
	s := dialMux(t, "127.0.0.1", ts.Addr())
	st, err := s.Open()
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	cc := NewClientCodec(st)
	var reply EchoReply
	if err := msgpackrpc.CallWithCodec(cc, "Echo.Fail", &EchoArgs{Text: "x"}, &reply); err == nil || !strings.Contains(err.Error(), "boom: x") {
		t.Fatalf("Echo.Fail: got %v, want its error", err)
	}
	big := strings.Repeat("y", 3*readBufSize) // grows the read buffer past its start
	if err := msgpackrpc.CallWithCodec(cc, "Echo.Echo", &EchoArgs{Text: big}, &reply); err != nil {
		t.Fatal(err)
	}
	if reply.Text != big {
		t.Fatalf("echo came back %d bytes, want %d", len(reply.Text), len(big))
	}
	if buf := cc.(*clientCodec).rd.buf; buf != nil {
		t.Fatalf("idle client codec holds a %d-byte read buffer", len(buf))
	}
}

// Pooled read and write buffers go back to the pool after every call; if
// one were ever in two streams' hands at once, concurrent calls with
// different payloads would get each other's answers (and -race would see
// it).
func TestPooledBuffersNeverShared(t *testing.T) {
	ts := startTestServer(t, "a")
	p := NewPool(nil)
	defer p.Shutdown()
	const workers, calls = 16, 50
	var wg sync.WaitGroup
	errs := make(chan error, workers)
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range calls {
				text := fmt.Sprintf("%d/%d/", w, i) + strings.Repeat(string(rune('a'+w)), (w*calls+i)*97%(2*readBufSize))
				var reply EchoReply
				if err := p.Call(context.Background(), ts.Addr(), "Echo.Echo", &EchoArgs{Text: text}, &reply); err != nil {
					errs <- err
					return
				}
				if reply.Text != text {
					errs <- fmt.Errorf("worker %d call %d: answer %.20q… is not its request %.20q…", w, i, reply.Text, text)
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
}
