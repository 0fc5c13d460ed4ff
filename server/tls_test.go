package server

import (
	"context"
	"errors"
	"net"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/raft"
	"github.com/weft-sched/weft/internal/gossip"
	"github.com/weft-sched/weft/internal/testutil"
	"github.com/weft-sched/weft/internal/tlsutil"
	wrpc "github.com/weft-sched/weft/rpc"
	"github.com/weft-sched/weft/scheduler"
)

// newTLSTestCluster is newTestCluster with TLS on: every server gets a
// server certificate of c.pki, and c.call dials with a client certificate.
func newTLSTestCluster(t *testing.T) *testCluster {
	c := newTestCluster(t)
	c.pki = testutil.NewPKI(t)
	c.pool = wrpc.NewTLSPool(nil, c.pki.Configurator(wrpc.RoleClient), wrpc.RoleServer)
	return c
}

func startThreeTLS(t *testing.T) *testCluster {
	c := newTLSTestCluster(t)
	s1 := c.start("s1", 3)
	c.start("s2", 3, s1.SerfAddr())
	c.start("s3", 3, s1.SerfAddr())
	c.waitForLeader()
	c.waitForVoters("s1", "s2", "s3")
	return c
}

// callAs calls s with a fresh certificate of role.
func (c *testCluster) callAs(role wrpc.Role, s *Server, method string, args, reply any) error {
	p := wrpc.NewTLSPool(nil, c.pki.Configurator(role), wrpc.RoleServer)
	defer p.Shutdown()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	return p.Call(ctx, s.RPCAddr(), method, args, reply)
}

func TestTLSClusterElectsALeaderAndForwardsWrites(t *testing.T) {
	c := startThreeTLS(t)
	f := c.follower()
	cfg := twoQueueConfig(3)
	var wr wrpc.WriteResponse
	if err := c.call(f, "Queue.Apply", &wrpc.QueueApplyRequest{Config: cfg}, &wr); err != nil {
		t.Fatalf("a write through a follower over TLS: %v", err)
	}
	for id, s := range c.servers {
		testutil.WaitFor(t, 5*time.Second, func() bool { return s.State().Index() >= wr.Index })
		if !reflect.DeepEqual(s.State().QueueConfig(), cfg) {
			t.Fatalf("%s holds a different configuration", id)
		}
	}
}

func TestTLSServerRefusesPlaintext(t *testing.T) {
	c := startThreeTLS(t)
	l := c.waitForLeader()
	before := l.State().QueueConfig()
	for _, b := range []wrpc.ConnType{wrpc.ConnRPC, wrpc.ConnRaft, wrpc.ConnMultiplex} {
		conn, err := net.Dial("tcp", l.RPCAddr())
		if err != nil {
			t.Fatal(err)
		}
		conn.SetDeadline(time.Now().Add(5 * time.Second))
		conn.Write([]byte{byte(b)})
		if n, err := conn.Read(make([]byte, 16)); err == nil {
			t.Fatalf("type %#x in plaintext got %d bytes back", byte(b), n)
		} else if ne, ok := err.(net.Error); ok && ne.Timeout() {
			t.Fatalf("type %#x in plaintext: the connection was left open", byte(b))
		}
		conn.Close()
	}
	testutil.WaitFor(t, 5*time.Second, func() bool { return c.logs.Contains("this listener requires TLS") })
	// A plaintext client gets nothing either, and changes nothing.
	p := wrpc.NewPool(nil)
	defer p.Shutdown()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := p.Call(ctx, l.RPCAddr(), "Queue.Apply", &wrpc.QueueApplyRequest{Config: twoQueueConfig(9)}, &wrpc.WriteResponse{}); err == nil {
		t.Fatal("a plaintext write was accepted")
	}
	if !reflect.DeepEqual(l.State().QueueConfig(), before) {
		t.Fatal("the queue configuration changed")
	}
}

// raftDialer is Raft's StreamLayer for a test that speaks Raft to a server
// as the holder of a certificate would: 0x04, TLS, then 0x02.
type raftDialer struct {
	tc     *tlsutil.Configurator
	closed chan struct{}
	once   sync.Once
}

func (d *raftDialer) Dial(address raft.ServerAddress, timeout time.Duration) (net.Conn, error) {
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	var nd net.Dialer
	conn, err := nd.DialContext(ctx, "tcp", string(address))
	if err != nil {
		return nil, err
	}
	return wrpc.ClientHandshake(ctx, conn, d.tc, wrpc.RoleServer, wrpc.ConnRaft)
}

func (d *raftDialer) Accept() (net.Conn, error) {
	<-d.closed
	return nil, errors.New("closed")
}

func (d *raftDialer) Close() error {
	d.once.Do(func() { close(d.closed) })
	return nil
}

func (d *raftDialer) Addr() net.Addr { return &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1), Port: 1} }

// raftAs returns a Raft transport that dials with tc's certificate.
func raftAs(t *testing.T, tc *tlsutil.Configurator) *raft.NetworkTransport {
	tr := raft.NewNetworkTransportWithConfig(&raft.NetworkTransportConfig{
		Stream: &raftDialer{tc: tc, closed: make(chan struct{})}, MaxPool: 1, Timeout: 3 * time.Second,
		Logger: hclog.NewNullLogger(),
	})
	t.Cleanup(func() { tr.Close() })
	return tr
}

// TestRaftWithAClientCertificateIsRefused is the attack of
// speaking Raft on the RPC port, made with a valid client (or agent)
// certificate: it is refused and changes nothing. The same messages with
// a server certificate reach Raft, so the refusal is the certificate's.
func TestRaftWithAClientCertificateIsRefused(t *testing.T) {
	c := startThreeTLS(t)
	l := c.waitForLeader()
	term, index := l.raft.CurrentTerm(), l.raft.LastIndex()
	confBefore := l.raft.GetConfiguration().Configuration()
	target := raft.ServerAddress(l.RPCAddr())
	for _, role := range []wrpc.Role{wrpc.RoleClient, wrpc.RoleAgent} {
		tr := raftAs(t, c.pki.Configurator(role))
		// A vote request at a far higher term would depose the leader.
		var vote raft.RequestVoteResponse
		err := tr.RequestVote(raft.ServerID(l.NodeID()), target, &raft.RequestVoteRequest{
			RPCHeader: raft.RPCHeader{ProtocolVersion: raft.ProtocolVersionMax, ID: []byte("intruder"), Addr: []byte("127.0.0.1:1")},
			Term:      term + 100, LastLogIndex: index + 100, LastLogTerm: term + 100,
		}, &vote)
		if err == nil {
			t.Fatalf("a %s certificate's vote request was answered: %+v", role, vote)
		}
		// An append at a higher term would make the leader step down.
		var app raft.AppendEntriesResponse
		err = tr.AppendEntries(raft.ServerID(l.NodeID()), target, &raft.AppendEntriesRequest{
			RPCHeader: raft.RPCHeader{ProtocolVersion: raft.ProtocolVersionMax, ID: []byte("intruder"), Addr: []byte("127.0.0.1:1")},
			Term:      term + 100, PrevLogEntry: index, PrevLogTerm: term, LeaderCommitIndex: index,
		}, &app)
		if err == nil {
			t.Fatalf("a %s certificate's append was answered: %+v", role, app)
		}
	}
	testutil.WaitFor(t, 5*time.Second, func() bool {
		return c.logs.Contains("only a server certificate may open Raft; the peer holds a client certificate") &&
			c.logs.Contains("only a server certificate may open Raft; the peer holds a agent certificate")
	})
	// The intruder's term was never seen (an election of its own, under
	// load, may still raise the term by one or two).
	if now := l.raft.CurrentTerm(); now >= term+100 {
		t.Fatalf("term %d→%d: the intruder's term was adopted", term, now)
	}
	if after := l.raft.GetConfiguration().Configuration(); !reflect.DeepEqual(after, confBefore) {
		t.Fatalf("raft configuration changed: %+v → %+v", confBefore, after)
	}
	// Control: a harmless stale append (term 0) with a server certificate
	// reaches Raft, which answers with its term and ignores it.
	var app raft.AppendEntriesResponse
	err := raftAs(t, c.pki.Configurator(wrpc.RoleServer)).AppendEntries(raft.ServerID(l.NodeID()), target,
		&raft.AppendEntriesRequest{RPCHeader: raft.RPCHeader{ProtocolVersion: raft.ProtocolVersionMax, ID: []byte("s9"), Addr: []byte("127.0.0.1:1")}, Term: 0}, &app)
	if err != nil || app.Term < term || app.Success {
		t.Fatalf("a server certificate's stale append: %v, %+v (term %d)", err, app, term)
	}
}

func TestNodeEndpointsNeedAnAgentCertificate(t *testing.T) {
	c := startThreeTLS(t)
	l, f := c.waitForLeader(), c.follower()
	secret := strings.Repeat("5e", 32) // the node's secret: a valid one, so only the certificate decides
	reg := func() *wrpc.NodeRegisterRequest {
		return &wrpc.NodeRegisterRequest{ID: "n1", Address: "127.0.0.1:1", Capacity: scheduler.Resources{MemoryMB: 1 << 20, Vcores: 1 << 10}, Secret: secret}
	}
	for _, role := range []wrpc.Role{wrpc.RoleClient, wrpc.RoleRouter} {
		for _, s := range []*Server{l, f} {
			var resp wrpc.NodeRegisterResponse
			err := c.callAs(role, s, "Node.Register", reg(), &resp)
			if !errors.Is(err, wrpc.ErrPermissionDenied) || !strings.Contains(err.Error(), "needs a certificate of role agent or server") {
				t.Fatalf("Node.Register with a %s certificate on %s: %v", role, s.NodeID(), err)
			}
			var hb wrpc.HeartbeatResponse
			if err := c.callAs(role, s, "Node.Heartbeat", &wrpc.HeartbeatRequest{NodeID: "n1", Epoch: 1, Secret: secret}, &hb); !errors.Is(err, wrpc.ErrPermissionDenied) {
				t.Fatalf("Node.Heartbeat with a %s certificate: %v", role, err)
			}
			if err := c.callAs(role, s, "Node.Deregister", &wrpc.NodeDeregisterRequest{ID: "n1", Epoch: 1, Secret: secret}, &wrpc.WriteResponse{}); !errors.Is(err, wrpc.ErrPermissionDenied) {
				t.Fatalf("Node.Deregister with a %s certificate: %v", role, err)
			}
		}
	}
	if n := len(l.State().Nodes()); n != 0 {
		t.Fatalf("%d nodes registered by callers without an agent certificate", n)
	}
	// An agent certificate registers, through a follower (which checks it
	// and forwards to the leader with its own server certificate).
	var resp wrpc.NodeRegisterResponse
	if err := c.callAs(wrpc.RoleAgent, f, "Node.Register", reg(), &resp); err != nil || resp.Epoch == 0 {
		t.Fatalf("Node.Register with an agent certificate: %v, %+v", err, resp)
	}
	var hb wrpc.HeartbeatResponse
	if err := c.callAs(wrpc.RoleAgent, f, "Node.Heartbeat", &wrpc.HeartbeatRequest{NodeID: "n1", Epoch: resp.Epoch, Secret: secret}, &hb); err != nil {
		t.Fatalf("Node.Heartbeat with an agent certificate: %v", err)
	}
	if _, ok := l.State().Node("n1"); !ok {
		t.Fatal("the agent's registration is not in the leader's state")
	}
}

// TestOnlyServerCertificatesBecomeRaftVoters: a serf member that says it
// is a server joins a TLS cluster, but its RPC port holds a server
// certificate of another CA; another names a real server's RPC address as
// its own. Neither is reconciled into the Raft configuration.
func TestOnlyServerCertificatesBecomeRaftVoters(t *testing.T) {
	c := startThreeTLS(t)
	s1 := c.servers["s1"]

	// A server of another CA (its own certificate is a server's there).
	other := testutil.NewPKI(t)
	intruder, err := New(&Config{
		NodeID: "intruder", DataDir: t.TempDir(), BindAddr: "127.0.0.1", RPCPort: -1, SerfPort: -1,
		Join: []string{s1.SerfAddr()}, JoinRetryInterval: 100 * time.Millisecond, SerfFastGossip: true,
		RaftConfig: fastRaftConfig(), Logger: c.logger.Named("intruder"), TLS: other.Configurator(wrpc.RoleServer),
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { intruder.Shutdown() })

	// A bare gossip member claiming to be server "impostor" at s2's address.
	imp, _, err := gossip.Create(gossip.Config{NodeID: "impostor", BindAddr: "127.0.0.1", Logger: c.logger.Named("impostor"),
		Tags: map[string]string{TagRole: RoleServer, TagID: "impostor", TagRPCAddr: c.servers["s2"].RPCAddr()}, Fast: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { imp.Shutdown() })
	if _, err := imp.Join([]string{s1.SerfAddr()}, false); err != nil {
		t.Fatal(err)
	}

	testutil.WaitFor(t, 15*time.Second, func() bool {
		return c.logs.Contains(`id=intruder address=`+intruder.RPCAddr()+` error="no server certificate proven`) &&
			c.logs.Contains(`the server at `+c.servers["s2"].RPCAddr()+` is \"s2\", not \"impostor\"`)
	})
	c.waitForVoters("s1", "s2", "s3")
	servers, err := c.waitForLeader().raftServers()
	if err != nil || len(servers) != 3 {
		t.Fatalf("raft servers = %+v, %v", servers, err)
	}
}

// TestBootstrapNeedsServerCertificates: three servers expect three, but
// one holds a certificate of another CA: nobody bootstraps with it.
func TestBootstrapNeedsServerCertificates(t *testing.T) {
	c := newTLSTestCluster(t)
	s1 := c.start("s1", 3)
	c.start("s2", 3, s1.SerfAddr())
	other := testutil.NewPKI(t)
	s3, err := New(&Config{
		NodeID: "s3", DataDir: t.TempDir(), BindAddr: "127.0.0.1", RPCPort: -1, SerfPort: -1, BootstrapExpect: 3,
		Join: []string{s1.SerfAddr()}, JoinRetryInterval: 100 * time.Millisecond, SerfFastGossip: true,
		RaftConfig: fastRaftConfig(), Logger: c.logger.Named("s3"), TLS: other.Configurator(wrpc.RoleServer),
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s3.Shutdown() })
	testutil.WaitFor(t, 15*time.Second, func() bool {
		return c.logs.Contains(`peer=s3 error="no server certificate proven at ` + s3.RPCAddr())
	})
	for _, s := range []*Server{s1, c.servers["s2"], s3} {
		if s.bootstrapped.Load() {
			t.Fatalf("%s bootstrapped with a server of another CA", s.NodeID())
		}
	}
}

func TestServerRefusesANonServerCertificate(t *testing.T) {
	pki := testutil.NewPKI(t)
	_, err := New(&Config{NodeID: "s1", DataDir: t.TempDir(), RPCPort: -1, SerfPort: -1, TLS: pki.Configurator(wrpc.RoleAgent)})
	if err == nil || !strings.Contains(err.Error(), "needs a certificate of role server") {
		t.Fatalf("a server with an agent certificate: %v", err)
	}
}
