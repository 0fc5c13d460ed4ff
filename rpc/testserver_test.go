package rpc

import (
	"context"
	"errors"
	"net"
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

func (e *Echo) Echo(ctx context.Context, args *EchoArgs, reply *EchoReply) error {
	reply.Text, reply.Size, reply.From = args.Text, len(args.Blob), e.name
	return nil
}

func (e *Echo) Fail(ctx context.Context, args *EchoArgs, reply *EchoReply) error {
	return errors.New("boom: " + args.Text)
}

func (e *Echo) NoLeader(ctx context.Context, args *EchoArgs, reply *EchoReply) error {
	return ErrNoLeader
}

func (e *Echo) NotFound(ctx context.Context, args *EchoArgs, reply *EchoReply) error {
	return Errorf(CodeNotFound, "thing %s not found", args.Text)
}

// Wait answers when the request's context ends, saying why.
func (e *Echo) Wait(ctx context.Context, args *EchoArgs, reply *EchoReply) error {
	<-ctx.Done()
	reply.Text = ctx.Err().Error()
	return nil
}

// Panic panics.
func (e *Echo) Panic(ctx context.Context, args *EchoArgs, reply *EchoReply) error {
	panic("handler bug")
}

// Peer reports the connection the request came on.
func (e *Echo) Peer(ctx context.Context, args *EchoArgs, reply *EchoReply) error {
	if ci := ConnInfoFrom(ctx); ci != nil {
		reply.From = ci.RemoteAddr.String()
	}
	return nil
}

func newRPCServer(name string, logger hclog.Logger) *Server {
	s := NewServer(logger)
	e := &Echo{name: name}
	Register(s, "Echo.Echo", CapPublic, e.Echo)
	Register(s, "Echo.Fail", CapPublic, e.Fail)
	Register(s, "Echo.NoLeader", CapPublic, e.NoLeader)
	Register(s, "Echo.NotFound", CapPublic, e.NotFound)
	Register(s, "Echo.Wait", CapPublic, e.Wait)
	Register(s, "Echo.Panic", CapPublic, e.Panic)
	Register(s, "Echo.Peer", CapPublic, e.Peer)
	// Echo.Big takes bodies of any size; its capability asks for a
	// certificate role, which passes without TLS.
	Register(s, "Echo.Big", CapAgent, e.Echo, MaxBody(MaxRequestSize))
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
	return startTestServerNamed(t, name, nil)
}

// startTestServerWith serves the Echo service and whatever register adds.
func startTestServerWith(t testing.TB, register func(*Server)) *testServer {
	t.Helper()
	return startTestServerNamed(t, "a", register)
}

func startTestServerNamed(t testing.TB, name string, register func(*Server), opts ...ListenerOption) *testServer {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	logs := &dropLog{}
	logger := hclog.New(&hclog.LoggerOptions{Output: logs, Level: hclog.Warn})
	srv := newRPCServer(name, logger)
	if register != nil {
		register(srv)
	}
	ts := &testServer{ln: ln, lis: NewListener(srv, logger, nil, opts...), logs: logs}
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
