package rpc

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"net"
	"net/rpc"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/yamux"
	"github.com/weft-sched/weft/internal/testutil"
	"github.com/weft-sched/weft/internal/tlsutil"
)

// validToken is the one token budgetServer's AuthorizeHeader accepts.
const validToken = "valid-token"

// WorkArgs is a request that carries a workload token and a blob.
type WorkArgs struct {
	RequestHeader
	Token string `codec:"token"`
	Blob  []byte `codec:"blob"`
}

func (w *WorkArgs) credential() string { return w.Token }

// budgetServer is a TLS listener like an agent's (certificates optional:
// AMs have none) or a server's (certificates required), with methods that
// take large bodies from callers that prove a token first (Work.Big, a
// workload capability; Ops.Apply, an ACL one) and Hold.Hold, which holds
// each call until the test ends.
type budgetServer struct {
	addr   string
	lis    *Listener
	pki    *testutil.PKI
	limits Limits
	role   Role // the listener's own certificate's
	srv    *Server
	hold   chan struct{}
}

func startBudgetServer(t *testing.T, certs ClientCerts, limits Limits, tune func(*Server)) *budgetServer {
	t.Helper()
	pki := testutil.NewPKI(t)
	logger, _ := testutil.Logger(t, hclog.Warn)
	s := newRPCServer("a", logger)
	bs := &budgetServer{pki: pki, srv: s, hold: make(chan struct{})}
	big := func(ctx context.Context, args *WorkArgs, reply *EchoReply) error {
		reply.Size = len(args.Blob)
		return nil
	}
	Register(s, "Work.Big", CapWorkload, big, MaxBody(MaxRequestSize))
	Register(s, "Ops.Apply", CapOperatorWrite, func(ctx context.Context, args *EchoArgs, reply *EchoReply) error {
		reply.Size = len(args.Blob)
		return nil
	}, MaxBody(4<<20))
	Register(s, "Hold.Hold", CapWorkload, func(ctx context.Context, args *WorkArgs, reply *EchoReply) error {
		select {
		case <-bs.hold:
		case <-ctx.Done():
		}
		return nil
	})
	s.AuthorizeHeader = func(ctx context.Context, method string, c Capability, token string) (context.Context, error) {
		if token != validToken {
			return ctx, Errorf(CodePermissionDenied, "%s: token %q is not valid", method, token)
		}
		return ctx, nil
	}
	if tune != nil {
		tune(s)
	}
	role := RoleServer
	if certs == OptionalClientCert {
		role = RoleAgent
	}
	bs.limits, bs.role = limits.WithDefaults(), role
	bs.lis = NewListener(s, logger, nil, WithLimits(limits))
	bs.lis.UseTLS(pki.Configurator(role), certs)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go bs.lis.Serve(ln)
	t.Cleanup(func() {
		close(bs.hold)
		ln.Close()
		bs.lis.Close()
	})
	bs.addr = ln.Addr().String()
	return bs
}

// dialTLS opens a connection of type inner from the loopback address
// local, with tc's certificate (none for tc.Anonymous).
func (bs *budgetServer) dialTLS(t testing.TB, local string, tc *tlsutil.Configurator, inner ConnType) (net.Conn, error) {
	t.Helper()
	d := net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(local)}, Timeout: 5 * time.Second}
	raw, err := d.Dial("tcp", bs.addr)
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	c, err := ClientHandshake(ctx, raw, tc, bs.role, inner)
	if err != nil {
		return nil, err
	}
	t.Cleanup(func() { c.Close() })
	return c, nil
}

// muxFrom opens a multiplexed session from local with tc's certificate.
func (bs *budgetServer) muxFrom(t testing.TB, local string, tc *tlsutil.Configurator) *yamux.Session {
	t.Helper()
	c, err := bs.dialTLS(t, local, tc, ConnMultiplex)
	if err != nil {
		t.Fatal(err)
	}
	s, err := yamux.Client(c, YamuxConfig())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

// requestHeader encodes a request header as weft's clients write it.
func requestHeader(method, token string) []byte {
	return appendRequestHeader(nil, &rpc.Request{ServiceMethod: method, Seq: 1}, token)
}

// blobStart is the start of a body {"blob": <n bytes>}: what follows it
// on the wire is the blob.
func blobStart(n int) []byte {
	b := []byte{0x81, 0xa4, 'b', 'l', 'o', 'b', mpBin32, 0, 0, 0, 0}
	binary.BigEndian.PutUint32(b[len(b)-4:], uint32(n))
	return b
}

// readAnswer reads one answer off conn; its error if it is one.
func readAnswer(conn net.Conn) error {
	conn.SetReadDeadline(time.Now().Add(10 * time.Second))
	cc := NewClientCodec(conn)
	var resp rpc.Response
	if err := cc.ReadResponseHeader(&resp); err != nil {
		return err
	}
	if err := cc.ReadResponseBody(nil); err != nil {
		return err
	}
	if resp.Error != "" {
		return decodeError(resp.Error)
	}
	return nil
}

// served checks that a client with tc's certificate, from local, gets an
// answer from Echo.Echo.
func (bs *budgetServer) served(t testing.TB, local string, tc *tlsutil.Configurator) error {
	t.Helper()
	c, err := bs.dialTLS(t, local, tc, ConnRPC)
	if err != nil {
		return err
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(10 * time.Second))
	var reply EchoReply
	if err := rpc.NewClientWithCodec(NewClientCodec(c)).Call("Echo.Echo", &EchoArgs{Text: "hi"}, &reply); err != nil {
		return err
	}
	if reply.Text != "hi" {
		return errors.New("wrong answer " + reply.Text)
	}
	return nil
}

// The report's attack on an agent: one connection of 256 streams, each
// trickling a partial 8 MiB request, took an agent from 24 MB to 3.0 GB.
// Now what the listener holds for them is charged to the connection's
// share, which cuts the connection off when it runs out: the accounted
// high-water mark stays within the share (the attacker holds a valid
// token here: an AM does), everything charged is given back, and another
// client is served throughout. The same on a server's port, from a
// client certificate.
func TestPartialRequestFloodIsCutOffAtItsShare(t *testing.T) {
	limits := Limits{RequestMemory: 64 << 20, RequestMemoryPerClient: 16 << 20, RequestMemoryPerConn: 8 << 20}
	for _, tc := range []struct {
		name     string
		certs    ClientCerts
		attacker func(*testutil.PKI) *tlsutil.Configurator
	}{
		{"agent port, no certificate", OptionalClientCert, func(p *testutil.PKI) *tlsutil.Configurator { return p.Anonymous() }},
		{"server port, client certificate", RequireClientCert, func(p *testutil.PKI) *tlsutil.Configurator { return p.Configurator(RoleClient) }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			bs := startBudgetServer(t, tc.certs, limits, nil)
			attacker := tc.attacker(bs.pki)
			s := bs.muxFrom(t, "127.0.0.2", attacker)
			const streams, declared, sent = 256, 8<<20 - 64, 1 << 20
			start := append(requestHeader("Work.Big", validToken), blobStart(declared)...)
			var opened []net.Conn
			for i := 0; i < streams; i++ {
				st, err := s.Open()
				if err != nil {
					break
				}
				if _, err := st.Write(start); err != nil {
					break
				}
				opened = append(opened, st)
			}
			if err := bs.served(t, "127.0.0.3", bs.pki.Configurator(RoleClient)); err != nil {
				t.Fatalf("another client during the flood: %v", err)
			}
			chunk := make([]byte, 32<<10)
			for off := 0; off < sent && !s.IsClosed(); off += len(chunk) {
				for _, st := range opened {
					st.SetWriteDeadline(time.Now().Add(time.Second))
					st.Write(chunk)
				}
				if err := bs.served(t, "127.0.0.3", bs.pki.Configurator(RoleClient)); err != nil {
					t.Fatalf("another client during the flood: %v", err)
				}
			}
			testutil.WaitFor(t, 10*time.Second, s.IsClosed)
			high := bs.lis.mem.highWater()
			t.Logf("%d streams of %d KiB each would have held %d MiB; the listener held at most %d KiB",
				len(opened), sent>>10, len(opened)*sent>>20, high>>10)
			// The attacker's connection, and the other client's calls.
			if max := limits.RequestMemoryPerConn + 1<<20; high > max {
				t.Fatalf("accounted high-water mark %d bytes, over the connection's share (%d) and the other client's calls", high, limits.RequestMemoryPerConn)
			}
			testutil.WaitFor(t, 10*time.Second, func() bool { return bs.lis.mem.used() == 0 })
			if err := bs.served(t, "127.0.0.2", attacker); err != nil {
				t.Fatalf("the attacker's address after its connection was cut: %v", err)
			}
		})
	}
}

// Without a proof of its token before the body, a caller gets the small
// default bound even for a method that takes large bodies: a body that
// declares 8 MiB is refused as soon as its length is read, whether the
// header named no token or one that does not check out, and what it cost
// the listener is a few KiB.
func TestAnUnprovenCallerCostsAFewKiB(t *testing.T) {
	bs := startBudgetServer(t, OptionalClientCert, Limits{}, nil)
	for _, token := range []string{"", "forged"} {
		conn, err := bs.dialTLS(t, "127.0.0.2", bs.pki.Anonymous(), ConnRPC)
		if err != nil {
			t.Fatal(err)
		}
		conn.Write(append(requestHeader("Work.Big", token), blobStart(8<<20-64)...))
		// Without a token: too large for a caller that proved none; with
		// one that does not check out: why it did not.
		want := ErrTooLarge
		if token != "" {
			want = ErrPermissionDenied
		}
		if err := readAnswer(conn); !errors.Is(err, want) || !strings.Contains(err.Error(), "16 KiB") {
			t.Fatalf("a body declaring 8 MiB with header token %q: %v, want %s naming the 16 KiB bound", token, err, want.Code)
		}
		if high := bs.lis.mem.highWater(); high > connOverhead+32<<10 {
			t.Fatalf("refusing it held %d bytes", high)
		}
		// The connection waits for the rest of the body, to read past it.
		conn.Close()
		testutil.WaitFor(t, 5*time.Second, func() bool { return bs.lis.mem.used() == 0 })
	}
	// A whole body over the bound is read past, never kept, and the
	// connection goes on; a proven token takes the large body.
	conn, err := bs.dialTLS(t, "127.0.0.2", bs.pki.Anonymous(), ConnRPC)
	if err != nil {
		t.Fatal(err)
	}
	body := encodeValue(t, &WorkArgs{Blob: make([]byte, 1<<20)})
	conn.Write(append(requestHeader("Work.Big", ""), body...))
	if err := readAnswer(conn); !errors.Is(err, ErrTooLarge) {
		t.Fatalf("a 1 MiB body without a token: %v, want too_large", err)
	}
	if high := bs.lis.mem.highWater(); high > connOverhead+32<<10 {
		t.Fatalf("reading past a 1 MiB body held %d bytes", high)
	}
	body = encodeValue(t, &WorkArgs{Token: validToken, Blob: make([]byte, 1<<20)})
	conn.Write(append(requestHeader("Work.Big", validToken), body...))
	if err := readAnswer(conn); err != nil {
		t.Fatalf("a 1 MiB body after a proven token: %v", err)
	}
	// A body whose token differs from its header's is refused, and the
	// connection goes on.
	body = encodeValue(t, &WorkArgs{Token: "another", Blob: []byte("x")})
	conn.Write(append(requestHeader("Work.Big", validToken), body...))
	if err := readAnswer(conn); !errors.Is(err, ErrBadRequest) {
		t.Fatalf("a body with another token than its header's: %v, want bad_request", err)
	}
	body = encodeValue(t, &WorkArgs{Token: validToken, Blob: []byte("x")})
	conn.Write(append(requestHeader("Work.Big", validToken), body...))
	if err := readAnswer(conn); err != nil {
		t.Fatalf("a call after the refused one: %v", err)
	}
}

// A caller without the certificate role a method asks for is refused
// before its body is read.
func TestACallerWithoutTheRoleIsRefusedBeforeItsBody(t *testing.T) {
	bs := startBudgetServer(t, OptionalClientCert, Limits{}, nil)
	conn, err := bs.dialTLS(t, "127.0.0.2", bs.pki.Anonymous(), ConnRPC)
	if err != nil {
		t.Fatal(err)
	}
	// Echo.Big takes 8 MiB from agents; this caller holds no certificate.
	conn.Write(append(requestHeader("Echo.Big", ""), blobStart(8<<20-64)...))
	if err := readAnswer(conn); !errors.Is(err, ErrPermissionDenied) {
		t.Fatalf("Echo.Big without an agent certificate: %v, want permission_denied", err)
	}
	if high := bs.lis.mem.highWater(); high > connOverhead+32<<10 {
		t.Fatalf("refusing it held %d bytes", high)
	}
}

// yamux holds up to 256 KiB for every stream its reader is not reading
// (here: each stream's reader waits for its one call in flight to end), so
// 256 streams of a connection could make it hold 64 MiB that no read
// buffer accounts for. Those bytes are charged as they arrive: the
// connection is cut off at its share.
func TestBytesYamuxHoldsForUnreadStreamsAreCharged(t *testing.T) {
	limits := Limits{RequestMemoryPerConn: 4 << 20}
	bs := startBudgetServer(t, OptionalClientCert, limits, func(s *Server) { s.maxInflight = 1 })
	s := bs.muxFrom(t, "127.0.0.2", bs.pki.Anonymous())
	hold := append(requestHeader("Hold.Hold", ""), encodeValue(t, &WorkArgs{})...)
	blob := make([]byte, 200<<10)
	var wg sync.WaitGroup
	for i := 0; i < 64; i++ {
		st, err := s.Open()
		if err != nil {
			break
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			st.SetWriteDeadline(time.Now().Add(10 * time.Second))
			// One call held, a second read and waiting for it, then
			// bytes nobody reads.
			st.Write(hold)
			st.Write(hold)
			st.Write(append(requestHeader("Hold.Hold", ""), blob...))
		}()
	}
	testutil.WaitFor(t, 20*time.Second, s.IsClosed)
	wg.Wait()
	if high := bs.lis.mem.highWater(); high > limits.RequestMemoryPerConn {
		t.Fatalf("accounted high-water mark %d bytes, over the connection's share %d", high, limits.RequestMemoryPerConn)
	}
	if err := bs.served(t, "127.0.0.3", bs.pki.Anonymous()); err != nil {
		t.Fatalf("another client: %v", err)
	}
}

// Connections are counted per client, a source IP and the role its
// certificate proved: a client flooding its allowance from a host does not
// take the allowance of an agent (or a server) on the same host, nor that
// of AMs without a certificate there.
func TestAClientFloodingItsAllowanceLeavesPeersOnItsHostServed(t *testing.T) {
	bs := startBudgetServer(t, OptionalClientCert, Limits{MaxConnsPerClient: 5, HandshakeTimeout: time.Minute}, nil)
	client := bs.pki.Configurator(RoleClient)
	for i := 0; i < 5; i++ {
		if _, err := bs.dialTLS(t, "127.0.0.2", client, ConnRPC); err != nil {
			t.Fatal(err)
		}
	}
	testutil.WaitFor(t, 5*time.Second, func() bool { return bs.lis.openFrom("127.0.0.2", false) == 5 })
	over, err := bs.dialTLS(t, "127.0.0.2", client, ConnRPC)
	if err == nil && !closedByServer(over) {
		t.Fatal("a client's sixth connection was served")
	}
	for _, tc := range []*tlsutil.Configurator{bs.pki.Configurator(RoleAgent), bs.pki.Configurator(RoleServer), bs.pki.Anonymous()} {
		if err := bs.served(t, "127.0.0.2", tc); err != nil {
			t.Fatalf("a peer on the flooding client's host: %v", err)
		}
	}
}

// Callers without a server, agent or router certificate hold at most half
// the process's budget between them: when clients from several addresses
// have taken their half, a new client is cut off, and an agent is still
// served a large request.
func TestClientsTakeAtMostHalfTheProcessBudget(t *testing.T) {
	limits := Limits{RequestMemory: 32 << 20, RequestMemoryPerClient: 16 << 20, RequestMemoryPerConn: 16 << 20}
	bs := startBudgetServer(t, OptionalClientCert, limits, nil)
	partial := append(append(requestHeader("Work.Big", validToken), blobStart(8<<20-64)...), make([]byte, 5<<20)...)
	// The first client holds a partial request of 5 MiB, in a buffer of
	// 8 MiB.
	first, err := bs.dialTLS(t, "127.0.0.2", bs.pki.Anonymous(), ConnRPC)
	if err != nil {
		t.Fatal(err)
	}
	first.Write(partial)
	testutil.WaitFor(t, 10*time.Second, func() bool { return bs.lis.mem.used() > 8<<20 })
	// A second, from another address, is cut off at the clients' half.
	second, err := bs.dialTLS(t, "127.0.0.4", bs.pki.Anonymous(), ConnRPC)
	if err != nil {
		t.Fatal(err)
	}
	second.Write(partial)
	if err := readAnswer(second); !errors.Is(err, ErrUnavailable) || !strings.Contains(err.Error(), "without a server, agent or router certificate") {
		t.Fatalf("a second client past the clients' half: %v, want unavailable naming their share", err)
	}
	// An agent is served a 6 MiB request meanwhile.
	agent, err := bs.dialTLS(t, "127.0.0.5", bs.pki.Configurator(RoleAgent), ConnRPC)
	if err != nil {
		t.Fatal(err)
	}
	var reply EchoReply
	agent.SetDeadline(time.Now().Add(10 * time.Second))
	if err := rpc.NewClientWithCodec(NewClientCodec(agent)).Call("Echo.Big", &EchoArgs{Blob: make([]byte, 6<<20)}, &reply); err != nil || reply.Size != 6<<20 {
		t.Fatalf("an agent's 6 MiB request while clients hold their half: %v", err)
	}
	if high := bs.lis.mem.highWater(); high > limits.RequestMemory {
		t.Fatalf("accounted high-water mark %d bytes, over the process's budget %d", high, limits.RequestMemory)
	}
}

// What an open connection costs is charged to the process's budget only
// for callers without a peer certificate: the agents' connections to a
// server grow with the cluster, which the budget must not cap, while
// clients from many addresses may hold at most their half of it.
func TestPeersConnectionsAreNotCappedByTheProcessBudget(t *testing.T) {
	limits := Limits{RequestMemory: 1 << 20, RequestMemoryPerClient: 16 << 20, RequestMemoryPerConn: 1 << 20, MaxConnsPerClient: 64}
	bs := startBudgetServer(t, OptionalClientCert, limits, nil)
	agent := bs.pki.Configurator(RoleAgent)
	var held []net.Conn
	for i := 0; i < 20; i++ {
		c, err := bs.dialTLS(t, "127.0.0.2", agent, ConnRPC)
		if err != nil {
			t.Fatal(err)
		}
		held = append(held, c)
	}
	for i, c := range held {
		c.SetDeadline(time.Now().Add(10 * time.Second))
		var reply EchoReply
		if err := rpc.NewClientWithCodec(NewClientCodec(c)).Call("Echo.Echo", &EchoArgs{Text: "hi"}, &reply); err != nil {
			t.Fatalf("agent connection %d of 20 (%d KiB of connections, over the process's 1 MiB): %v", i, 20*connOverhead>>10, err)
		}
	}
	// Twenty clients without a certificate, from twenty addresses: past
	// their half (512 KiB), their connections are closed.
	served := 0
	for i := 0; i < 20; i++ {
		c, err := bs.dialTLS(t, fmt.Sprintf("127.0.1.%d", i+1), bs.pki.Anonymous(), ConnRPC)
		if err != nil {
			continue
		}
		c.SetDeadline(time.Now().Add(10 * time.Second))
		var reply EchoReply
		if rpc.NewClientWithCodec(NewClientCodec(c)).Call("Echo.Echo", &EchoArgs{Text: "hi"}, &reply) == nil {
			served++
		}
	}
	t.Logf("%d of 20 clients' connections served", served)
	if served == 20 {
		t.Fatal("twenty clients' connections were all served past their half of the process's budget")
	}
	if high := bs.lis.mem.highWater(); high > limits.RequestMemory {
		t.Fatalf("accounted high-water mark %d bytes, over the process's budget %d", high, limits.RequestMemory)
	}
}
