package rpc

import (
	"errors"
	"net"
	"net/rpc"
	"strings"
	"sync"
	"testing"

	"github.com/hashicorp/go-hclog"
)

// EchoArgs exercises the decoder with nested and variable-length fields.
type EchoArgs struct {
	RequestHeader
	Text  string            `codec:"text"`
	Blob  []byte            `codec:"blob"`
	Tags  map[string]string `codec:"tags"`
	Items []EchoItem        `codec:"items"`
}

type EchoItem struct {
	N    int64     `codec:"n"`
	Next *EchoItem `codec:"next"`
}

type EchoReply struct {
	Text string `codec:"text"`
	Size int    `codec:"size"`
	From string `codec:"from"`
}

type Echo struct{ name string }

func (e *Echo) Echo(args *EchoArgs, reply *EchoReply) error {
	reply.Text, reply.Size, reply.From = args.Text, len(args.Blob), e.name
	return nil
}

func (e *Echo) Fail(args *EchoArgs, reply *EchoReply) error { return errors.New("boom: " + args.Text) }

func (e *Echo) NoLeader(args *EchoArgs, reply *EchoReply) error { return ErrNoLeader }

func newRPCServer(name string) *rpc.Server {
	s := rpc.NewServer()
	if err := s.RegisterName("Echo", &Echo{name: name}); err != nil {
		panic(err)
	}
	return s
}

// testServer serves the Echo service on a real TCP port through Listener,
// recording why it dropped connections.
type testServer struct {
	ln   net.Listener
	lis  *Listener
	logs *dropLog
}

// dropLog collects the "dropping RPC connection" reasons a Listener logs.
type dropLog struct {
	mu   sync.Mutex
	errs []string
}

func (d *dropLog) Write(p []byte) (int, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if s := string(p); strings.Contains(s, "dropping RPC connection") {
		d.errs = append(d.errs, s)
	}
	return len(p), nil
}

func startTestServer(t testing.TB, name string) *testServer {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	logs := &dropLog{}
	logger := hclog.New(&hclog.LoggerOptions{Output: logs, Level: hclog.Warn})
	ts := &testServer{ln: ln, lis: NewListener(newRPCServer(name), logger, nil), logs: logs}
	go ts.lis.Serve(ln)
	t.Cleanup(func() {
		ln.Close()
		ts.lis.Close()
	})
	return ts
}

func (ts *testServer) Addr() string { return ts.ln.Addr().String() }

// dropped returns the logged reasons for dropped connections.
func (ts *testServer) dropped() []string {
	ts.logs.mu.Lock()
	defer ts.logs.mu.Unlock()
	return append([]string(nil), ts.logs.errs...)
}
