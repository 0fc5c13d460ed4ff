package rpc

import (
	"context"
	"errors"
	"io"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/weft-sched/weft/internal/testutil"
	"github.com/weft-sched/weft/internal/tlsutil"
)

// WhoReply says who the server took the caller for.
type WhoReply struct {
	TLS        bool   `codec:"tls"`
	Role       string `codec:"role"`
	CommonName string `codec:"common_name"`
}

// tlsServer is a TLS listener with Who (reports the caller's identity) and
// Agents (requires the agent role), and a Raft handoff that records what
// it was given.
type tlsServer struct {
	addr  string
	logs  *testutil.LogSink
	mu    sync.Mutex
	rafts int
}

func startTLSServer(t *testing.T, tc *tlsutil.Configurator, certs ClientCerts) *tlsServer {
	t.Helper()
	logger, logs := testutil.Logger(t, hclog.Debug)
	s := NewServer(logger)
	Register(s, "Test.Who", CapPublic, func(ctx context.Context, args *RequestHeader, reply *WhoReply) error {
		if ci := ConnInfoFrom(ctx); ci != nil {
			reply.TLS, reply.Role, reply.CommonName = ci.TLS, string(ci.Role), ci.CommonName
		}
		return nil
	})
	Register(s, "Test.AgentsOnly", CapPublic, func(ctx context.Context, args *RequestHeader, reply *struct{}) error {
		return RequireRole(ctx, RoleAgent)
	})
	none := func(ctx context.Context, args *RequestHeader, reply *struct{}) error { return nil }
	Register(s, "Test.ServerCap", CapServer, none)
	Register(s, "Test.AgentCap", CapAgent, none)
	ts := &tlsServer{logs: logs}
	lis := NewListener(s, logger, func(c net.Conn) {
		ts.mu.Lock()
		ts.rafts++
		ts.mu.Unlock()
		c.Write([]byte("raft"))
		c.Close()
	})
	if tc != nil {
		lis.UseTLS(tc, certs)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go lis.Serve(ln)
	t.Cleanup(func() {
		ln.Close()
		lis.Close()
	})
	ts.addr = ln.Addr().String()
	return ts
}

func (ts *tlsServer) raftConns() int {
	ts.mu.Lock()
	defer ts.mu.Unlock()
	return ts.rafts
}

func who(t *testing.T, p *Pool, addr string) (WhoReply, error) {
	t.Helper()
	defer p.Shutdown()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	var reply WhoReply
	err := p.Call(ctx, addr, "Test.Who", &RequestHeader{}, &reply)
	return reply, err
}

func TestTLSCallsCarryThePeersVerifiedRole(t *testing.T) {
	pki := testutil.NewPKI(t)
	ts := startTLSServer(t, pki.Configurator(RoleServer), RequireClientCert)
	got, err := who(t, NewTLSPool(nil, pki.Configurator(RoleAgent), RoleServer), ts.addr)
	if err != nil {
		t.Fatal(err)
	}
	if !got.TLS || got.Role != "agent" || got.CommonName != "agent.global.weft" {
		t.Fatalf("the server saw %+v", got)
	}
	// A pool expecting an agent refuses the server's certificate.
	if _, err := who(t, NewTLSPool(nil, pki.Configurator(RoleClient), RoleAgent), ts.addr); err == nil ||
		!strings.Contains(err.Error(), "agent.global.weft") {
		t.Fatalf("a pool expecting an agent reached a server: %v", err)
	}
	// A peer from another CA is refused by the server.
	other := testutil.NewPKI(t)
	if _, err := who(t, NewTLSPool(nil, other.Configurator(RoleAgent), RoleServer), ts.addr); err == nil {
		t.Fatal("a peer of another CA was served")
	}
	// A peer without a certificate is refused where certificates are required.
	if _, err := who(t, NewTLSPool(nil, pki.Anonymous(), RoleServer), ts.addr); err == nil {
		t.Fatal("a peer without a certificate was served by a listener that requires one")
	}
}

func TestTLSListenerRefusesPlaintext(t *testing.T) {
	pki := testutil.NewPKI(t)
	ts := startTLSServer(t, pki.Configurator(RoleServer), RequireClientCert)
	for _, b := range []ConnType{ConnRPC, ConnRaft, ConnMultiplex} {
		conn, err := net.Dial("tcp", ts.addr)
		if err != nil {
			t.Fatal(err)
		}
		conn.SetDeadline(time.Now().Add(5 * time.Second))
		conn.Write([]byte{byte(b)})
		if n, err := conn.Read(make([]byte, 8)); err == nil {
			t.Fatalf("type %#x: the listener answered %d bytes in plaintext", byte(b), n)
		} else if errors.Is(err, context.DeadlineExceeded) || isTimeout(err) {
			t.Fatalf("type %#x: the connection was left open", byte(b))
		}
		conn.Close()
	}
	testutil.WaitFor(t, 5*time.Second, func() bool { return ts.logs.Contains("plaintext connection (type byte 0x3) refused") })
	if ts.raftConns() != 0 {
		t.Fatal("plaintext Raft reached the Raft handoff")
	}
	// A plaintext pool cannot call, and is told why that may be.
	if _, err := who(t, NewPool(nil), ts.addr); err == nil || !strings.Contains(err.Error(), "does it need TLS") {
		t.Fatalf("a plaintext call: %v", err)
	}
}

func TestPlaintextListenerRefusesTLS(t *testing.T) {
	pki := testutil.NewPKI(t)
	ts := startTLSServer(t, nil, RequireClientCert)
	if _, err := who(t, NewTLSPool(nil, pki.Configurator(RoleClient), RoleServer), ts.addr); err == nil {
		t.Fatal("a TLS call was answered by a listener without TLS")
	}
	testutil.WaitFor(t, 5*time.Second, func() bool { return ts.logs.Contains("TLS is not configured on this listener") })
	got, err := who(t, NewPool(nil), ts.addr)
	if err != nil || got.TLS || got.Role != "" {
		t.Fatalf("plaintext call: %+v, %v", got, err)
	}
}

// openRaft dials addr as the holder of tc would open Raft.
func openRaft(t *testing.T, addr string, tc *tlsutil.Configurator) (string, error) {
	t.Helper()
	conn, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	conn, err = ClientHandshake(ctx, conn, tc, RoleServer, ConnRaft)
	if err != nil {
		return "", err
	}
	defer conn.Close()
	conn.SetDeadline(time.Now().Add(5 * time.Second))
	b, err := io.ReadAll(conn)
	return string(b), err
}

func TestOnlyAServerCertificateOpensRaft(t *testing.T) {
	pki := testutil.NewPKI(t)
	ts := startTLSServer(t, pki.Configurator(RoleServer), RequireClientCert)
	for _, role := range []Role{RoleClient, RoleAgent, RoleRouter} {
		if got, _ := openRaft(t, ts.addr, pki.Configurator(role)); got != "" {
			t.Fatalf("a %s certificate opened Raft: %q", role, got)
		}
	}
	testutil.WaitFor(t, 5*time.Second, func() bool {
		return ts.logs.Contains("only a server certificate may open Raft; the peer holds a client certificate")
	})
	if n := ts.raftConns(); n != 0 {
		t.Fatalf("%d Raft connections reached Raft from non-server certificates", n)
	}
	if got, err := openRaft(t, ts.addr, pki.Configurator(RoleServer)); got != "raft" || err != nil {
		t.Fatalf("a server certificate could not open Raft: %q, %v", got, err)
	}
	if n := ts.raftConns(); n != 1 {
		t.Fatalf("raft handoffs = %d, want 1", n)
	}
}

func TestRequireRole(t *testing.T) {
	pki := testutil.NewPKI(t)
	// In process, and without TLS: no identity to check.
	if err := RequireRole(context.Background(), RoleAgent); err != nil {
		t.Fatalf("in-process call: %v", err)
	}
	plain := startTLSServer(t, nil, RequireClientCert)
	p := NewPool(nil)
	defer p.Shutdown()
	if err := p.Call(context.Background(), plain.addr, "Test.AgentsOnly", &RequestHeader{}, &struct{}{}); err != nil {
		t.Fatalf("without TLS: %v", err)
	}

	ts := startTLSServer(t, pki.Configurator(RoleAgent), OptionalClientCert)
	call := func(tc *tlsutil.Configurator) error {
		p := NewTLSPool(nil, tc, RoleAgent)
		defer p.Shutdown()
		return p.Call(context.Background(), ts.addr, "Test.AgentsOnly", &RequestHeader{}, &struct{}{})
	}
	if err := call(pki.Configurator(RoleAgent)); err != nil {
		t.Fatalf("an agent certificate: %v", err)
	}
	for name, tc := range map[string]*tlsutil.Configurator{"client": pki.Configurator(RoleClient), "no": pki.Anonymous()} {
		err := call(tc)
		if !errors.Is(err, ErrPermissionDenied) || ErrorCode(err) != CodePermissionDenied || IsRetryable(err) {
			t.Fatalf("%s certificate: %v (code %s), want a final permission_denied", name, err, ErrorCode(err))
		}
		if !strings.Contains(err.Error(), "needs a certificate of role agent") {
			t.Fatalf("%s certificate: the error does not say what was needed: %v", name, err)
		}
	}
	// Methods that declare CapServer or CapAgent are checked by the RPC
	// server itself; CapAgent admits servers (they forward agents' calls).
	for _, c := range []struct {
		method string
		tc     *tlsutil.Configurator
		ok     bool
	}{
		{"Test.ServerCap", pki.Configurator(RoleServer), true},
		{"Test.ServerCap", pki.Configurator(RoleAgent), false},
		{"Test.ServerCap", pki.Anonymous(), false},
		{"Test.AgentCap", pki.Configurator(RoleAgent), true},
		{"Test.AgentCap", pki.Configurator(RoleServer), true},
		{"Test.AgentCap", pki.Configurator(RoleClient), false},
		{"Test.AgentCap", pki.Configurator(RoleRouter), false},
		{"Test.AgentCap", pki.Anonymous(), false},
	} {
		p := NewTLSPool(nil, c.tc, RoleAgent)
		err := p.Call(context.Background(), ts.addr, c.method, &RequestHeader{}, &struct{}{})
		p.Shutdown()
		if c.ok != (err == nil) || (err != nil && !errors.Is(err, ErrPermissionDenied)) {
			t.Errorf("%s by a %q certificate: %v", c.method, c.tc.Role(), err)
		}
	}
	if err := p.Call(context.Background(), plain.addr, "Test.ServerCap", &RequestHeader{}, &struct{}{}); err != nil {
		t.Fatalf("CapServer without TLS: %v", err)
	}

	// Where certificates are optional, a peer without one has no role.
	got, err := who(t, NewTLSPool(nil, pki.Anonymous(), RoleAgent), ts.addr)
	if err != nil || !got.TLS || got.Role != "" || got.CommonName != "" {
		t.Fatalf("a peer without a certificate: %+v, %v", got, err)
	}
}
