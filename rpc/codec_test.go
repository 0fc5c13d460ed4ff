package rpc

import (
	"bytes"
	"context"
	"io"
	"net"
	"net/rpc"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/go-msgpack/v2/codec"
	"github.com/weft-sched/weft/internal/testutil"
)

func dialRPC(t testing.TB, addr string) net.Conn {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.Write([]byte{byte(ConnRPC)}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

func TestCodecRoundTrip(t *testing.T) {
	ts := startTestServer(t, "a")
	client := rpc.NewClientWithCodec(NewClientCodec(dialRPC(t, ts.Addr())))
	args := &EchoArgs{Text: "héllo", Blob: make([]byte, 1000), Tags: map[string]string{"k": "v"},
		Items: []EchoItem{{N: 1, Next: &EchoItem{N: 2}}}}
	var reply EchoReply
	if err := client.Call("Echo.Echo", args, &reply); err != nil {
		t.Fatal(err)
	}
	if reply.Text != "héllo" || reply.Size != 1000 || reply.From != "a" {
		t.Fatalf("reply = %+v", reply)
	}
	err := client.Call("Echo.Fail", &EchoArgs{Text: "x"}, &reply)
	if err == nil || err.Error() != "[error] boom: x" {
		t.Fatalf("server error = %#v", err)
	}
	// The connection survives a server-side error.
	if err := client.Call("Echo.Echo", &EchoArgs{Text: "again"}, &reply); err != nil || reply.Text != "again" {
		t.Fatalf("call after error: %v %+v", err, reply)
	}
}

func TestRequestOverLimitIsRefused(t *testing.T) {
	ts := startTestServer(t, "a")
	conn := dialRPC(t, ts.Addr())
	client := rpc.NewClientWithCodec(NewClientCodec(conn))
	var reply EchoReply
	// Just under the limit is fine.
	if err := client.Call("Echo.Big", &EchoArgs{Blob: make([]byte, MaxRequestSize-1024)}, &reply); err != nil {
		t.Fatalf("request under the limit: %v", err)
	}
	err := client.Call("Echo.Big", &EchoArgs{Blob: make([]byte, MaxRequestSize+1)}, &reply)
	if err == nil {
		t.Fatalf("request over the limit accepted")
	}
	// The server dropped the connection and said why.
	testutil.WaitFor(t, 5*time.Second, func() bool { return len(ts.dropped()) > 0 })
	if got := ts.dropped()[0]; !strings.Contains(got, "exceeds the 8 MiB this method takes") {
		t.Fatalf("drop reason = %q", got)
	}
	if err := client.Call("Echo.Echo", &EchoArgs{}, &reply); err == nil {
		t.Fatalf("connection still open after an oversized request")
	}
}

func TestMalformedInputClosesOnlyThatConnection(t *testing.T) {
	ts := startTestServer(t, "a")
	bad := dialRPC(t, ts.Addr())
	// A msgpack map header followed by a reserved byte (0xc1 is never valid).
	bad.Write([]byte{0x82, 0xc1, 0xc1, 0xc1})
	bad.SetReadDeadline(time.Now().Add(5 * time.Second))
	if _, err := io.ReadAll(bad); err != nil {
		t.Fatalf("want the server to close the connection, got %v", err)
	}
	if len(ts.dropped()) == 0 {
		t.Fatalf("malformed request dropped without a logged reason")
	}
	// Other connections are unaffected.
	client := rpc.NewClientWithCodec(NewClientCodec(dialRPC(t, ts.Addr())))
	var reply EchoReply
	if err := client.Call("Echo.Echo", &EchoArgs{Text: "ok"}, &reply); err != nil || reply.Text != "ok" {
		t.Fatalf("good connection after a bad one: %v", err)
	}
}

// A message that declares a huge string or array but sends a few bytes must
// not make the decoder allocate the declared size.
func TestDeclaredLengthsDoNotAllocate(t *testing.T) {
	header := encodeValue(t, map[string]any{"ServiceMethod": "Echo.Echo", "Seq": 1})
	claims := map[string][]byte{
		"str32 of 4 GiB": {0x81, 0xa4, 't', 'e', 'x', 't', 0xdb, 0xff, 0xff, 0xff, 0xf0, 'a', 'b'},
		"bin32 of 4 GiB": {0x81, 0xa4, 'b', 'l', 'o', 'b', 0xc6, 0xff, 0xff, 0xff, 0xf0, 1, 2},
		"array32 of 4 G": {0x81, 0xa5, 'i', 't', 'e', 'm', 's', 0xdd, 0xff, 0xff, 0xff, 0xf0, 0x80},
		"map32 of 4 G":   {0x81, 0xa4, 't', 'a', 'g', 's', 0xdf, 0xff, 0xff, 0xff, 0xf0, 0xa1, 'k'},
	}
	for name, body := range claims {
		input := append(append([]byte(nil), header...), body...)
		var before, after runtime.MemStats
		runtime.GC()
		runtime.ReadMemStats(&before)
		serveBytes(input)
		runtime.ReadMemStats(&after)
		if grew := after.TotalAlloc - before.TotalAlloc; grew > 16<<20 {
			t.Errorf("%s: decoding allocated %d MiB", name, grew>>20)
		}
	}
}

func encodeValue(t testing.TB, v any) []byte {
	var buf []byte
	if err := codec.NewEncoderBytes(&buf, MsgpackHandle).Encode(v); err != nil {
		t.Fatal(err)
	}
	return buf
}

type byteConn struct {
	io.Reader
	io.Writer
}

func (byteConn) Close() error { return nil }

// serveBytes runs a server codec over input as if it came from a socket.
func serveBytes(input []byte) {
	newRPCServer("fuzz", nil).ServeConn(context.Background(), byteConn{bytes.NewReader(input), io.Discard}, nil)
}

func FuzzServerCodec(f *testing.F) {
	valid := append(encodeValue(f, map[string]any{"ServiceMethod": "Echo.Echo", "Seq": 1}),
		encodeValue(f, &EchoArgs{Text: "hi", Tags: map[string]string{"a": "b"}, Items: []EchoItem{{N: 1}}})...)
	f.Add(valid)
	f.Add(append(valid, valid...))
	f.Add([]byte{0x82, 0xc1})
	f.Add([]byte{0xdd, 0xff, 0xff, 0xff, 0xff})
	f.Add(bytes.Repeat([]byte{0x91}, 200)) // deep nesting
	f.Fuzz(func(t *testing.T, data []byte) {
		serveBytes(data) // must return, and must not panic
	})
}
