package rpc

import (
	"errors"
	"io"
	"net"
	"net/rpc"
	"sync"
	"testing"

	"github.com/hashicorp/yamux"
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

// testServer speaks the server side of the connection-type handshake for
// ConnRPC and ConnMultiplex, like server.Server does.
type testServer struct {
	t    testing.TB
	ln   net.Listener
	rpc  *rpc.Server
	mu   sync.Mutex
	errs []error
	wg   sync.WaitGroup
}

func startTestServer(t testing.TB, name string) *testServer {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ts := &testServer{t: t, ln: ln, rpc: newRPCServer(name)}
	ts.wg.Add(1)
	go func() {
		defer ts.wg.Done()
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			ts.wg.Add(1)
			go func() {
				defer ts.wg.Done()
				ts.handle(c)
			}()
		}
	}()
	t.Cleanup(ts.Close)
	return ts
}

func (ts *testServer) Addr() string { return ts.ln.Addr().String() }

func (ts *testServer) Close() {
	ts.ln.Close()
}

func (ts *testServer) dropped() []error {
	ts.mu.Lock()
	defer ts.mu.Unlock()
	return append([]error(nil), ts.errs...)
}

func (ts *testServer) serve(c io.ReadWriteCloser) {
	ts.rpc.ServeCodec(NewServerCodec(c, func(err error) {
		ts.mu.Lock()
		ts.errs = append(ts.errs, err)
		ts.mu.Unlock()
	}))
}

func (ts *testServer) handle(c net.Conn) {
	var b [1]byte
	if _, err := io.ReadFull(c, b[:]); err != nil {
		c.Close()
		return
	}
	switch ConnType(b[0]) {
	case ConnRPC:
		ts.serve(c)
	case ConnMultiplex:
		sess, err := yamux.Server(c, YamuxConfig())
		if err != nil {
			c.Close()
			return
		}
		defer sess.Close()
		for {
			st, err := sess.Accept()
			if err != nil {
				return
			}
			go ts.serve(st)
		}
	default:
		c.Close()
	}
}
