package router

import (
	"context"
	"fmt"
	"io"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/raft"
	"github.com/weft-sched/weft/internal/clock"
	"github.com/weft-sched/weft/internal/testutil"
	wrpc "github.com/weft-sched/weft/rpc"
	"github.com/weft-sched/weft/scheduler"
	"github.com/weft-sched/weft/scheduler/federation"
)

func fastRaft() *raft.Config {
	c := raft.DefaultConfig()
	c.HeartbeatTimeout = 300 * time.Millisecond
	c.ElectionTimeout = 300 * time.Millisecond
	c.LeaderLeaseTimeout = 150 * time.Millisecond
	c.CommitTimeout = 5 * time.Millisecond
	return c
}

type routers struct {
	t       testing.TB
	logger  hclog.Logger
	logs    *testutil.LogSink
	byID    map[string]*Router
	dirs    map[string]string
	clk     clock.Clock
	timeout time.Duration
	pool    *wrpc.Pool
	acl     bool // routers check tokens against the sub-clusters
}

func newRouters(t testing.TB) *routers {
	logger, logs := testutil.Logger(t, hclog.Info)
	c := &routers{t: t, logger: logger, logs: logs, byID: map[string]*Router{}, dirs: map[string]string{}, clk: clock.Real{},
		timeout: 5 * time.Second, pool: wrpc.NewPool(logger)}
	t.Cleanup(func() {
		for _, r := range c.byID {
			r.Shutdown()
		}
		c.pool.Shutdown()
	})
	return c
}

func (c *routers) start(id string, expect int, join ...string) *Router {
	c.t.Helper()
	if c.dirs[id] == "" {
		c.dirs[id] = c.t.TempDir()
	}
	r, err := New(&Config{NodeID: id, DataDir: c.dirs[id], RPCPort: -1, SerfPort: -1, BootstrapExpect: expect, Join: join,
		JoinRetryInterval: 100 * time.Millisecond, SerfFastGossip: true, RaftConfig: fastRaft(), RPCHoldTimeout: 3 * time.Second,
		SubclusterTimeout: c.timeout, GPGInterval: time.Hour, ACLEnabled: c.acl, Clock: c.clk, Logger: c.logger.Named(id)})
	if err != nil {
		c.t.Fatal(err)
	}
	c.byID[id] = r
	return r
}

func (c *routers) leader() *Router {
	c.t.Helper()
	var leader *Router
	testutil.WaitFor(c.t, 10*time.Second, func() bool {
		for _, r := range c.byID {
			if r.IsLeader() && r.Ready() {
				leader = r
				return true
			}
		}
		return false
	})
	return leader
}

func (c *routers) follower() *Router {
	for _, r := range c.byID {
		if !r.IsLeader() {
			return r
		}
	}
	c.t.Fatal("no follower")
	return nil
}

func (c *routers) call(r *Router, method string, args, reply any) error {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	return c.pool.Call(ctx, r.RPCAddr(), method, args, reply)
}

func report(id string, seq uint64, vcores int64) *wrpc.FederationHeartbeatRequest {
	return &wrpc.FederationHeartbeatRequest{Report: wrpc.SubclusterReport{ID: id, Healthy: true, Servers: []string{"127.0.0.1:1"},
		Leader: id + "-s1", Term: 1, Seq: seq, Capacity: scheduler.Resources{MemoryMB: vcores * 1024, Vcores: vcores}, NodesReady: 2, NodesTotal: 2}}
}

// TestRoutersFormAQuorumAndKeepTheFederation: three routers bootstrap one
// Raft quorum through serf; a sub-cluster's heartbeat and a policy sent to
// a follower reach the leader; every router serves them; the leader killed,
// another takes over within seconds with the whole state; a sub-cluster
// that stops heartbeating is LOST after subcluster_timeout, RUNNING again
// with its next heartbeat; a router restarted from its data directory
// holds everything.
func TestRoutersFormAQuorumAndKeepTheFederation(t *testing.T) {
	c := newRouters(t)
	r1 := c.start("r1", 3)
	c.start("r2", 3, r1.SerfAddr())
	c.start("r3", 3, r1.SerfAddr())
	c.leader()
	f := c.follower()

	var hb wrpc.FederationHeartbeatResponse
	if err := c.call(f, "Federation.Heartbeat", report("sc1", 1, 100), &hb); err != nil {
		t.Fatal(err)
	}
	if hb.State != federation.StateRunning || len(hb.Routers) != 3 {
		t.Fatalf("heartbeat answer %+v: want RUNNING and three routers", hb)
	}
	if err := c.call(f, "Federation.Heartbeat", report("sc1", 1, 100), &hb); wrpc.ErrorCode(err) != wrpc.CodeConflict {
		t.Fatalf("a repeated heartbeat: %v, want a conflict", err)
	}
	if err := c.call(f, "Federation.Heartbeat", report("SC 2", 1, 100), &hb); wrpc.ErrorCode(err) != wrpc.CodeBadRequest {
		t.Fatalf("a bad sub-cluster ID: %v", err)
	}
	var applied wrpc.FederationPolicyApplyResponse
	bad := &wrpc.FederationPolicyApplyRequest{Policies: []federation.Policy{{Queue: "root.a", Router: "fastest"}}}
	if err := c.call(f, "Federation.PolicyApply", bad, &applied); wrpc.ErrorCode(err) != wrpc.CodeBadRequest {
		t.Fatalf("a bad policy: %v", err)
	}
	good := &wrpc.FederationPolicyApplyRequest{Policies: []federation.Policy{{Router: federation.Weighted}, {Queue: "root.a", Router: federation.Load}}}
	if err := c.call(f, "Federation.PolicyApply", good, &applied); err != nil || applied.Policies != 2 {
		t.Fatalf("policy apply: %+v, %v", applied, err)
	}
	for id, r := range c.byID {
		var list wrpc.FederationSubclustersResponse
		if err := c.call(r, "Federation.Subclusters", &wrpc.FederationSubclustersRequest{}, &list); err != nil ||
			len(list.Subclusters) != 1 || list.Subclusters[0].ID != "sc1" || list.Subclusters[0].Capacity.Vcores != 100 {
			t.Fatalf("%s lists %+v, %v", id, list.Subclusters, err)
		}
	}

	// The leader dies; a new one has the state.
	old := c.leader()
	old.Shutdown()
	delete(c.byID, old.config.NodeID)
	killed := time.Now()
	leader := c.leader()
	t.Logf("new leader %s ready %s after the kill", leader.config.NodeID, time.Since(killed).Round(time.Millisecond))
	if sc := leader.State().Subcluster("sc1"); sc == nil || len(leader.State().Policies()) != 2 {
		t.Fatalf("the new leader lost the state: %+v, %d policies", sc, len(leader.State().Policies()))
	}

	// Silence: LOST after the timeout (counted from the new leadership at
	// the earliest), RUNNING again with a heartbeat.
	testutil.WaitFor(t, 20*time.Second, func() bool {
		sc := leader.State().Subcluster("sc1")
		return sc != nil && sc.State == federation.StateLost
	})
	if !c.logs.Contains("sub-cluster marked LOST") {
		t.Error("no log line for the lost sub-cluster")
	}
	if err := c.call(c.follower(), "Federation.Heartbeat", report("sc1", 2, 100), &hb); err != nil || hb.State != federation.StateRunning {
		t.Fatalf("heartbeat after LOST: %+v, %v", hb, err)
	}

	// A router restarted on its data directory holds the state again.
	f2 := c.follower()
	id := f2.config.NodeID
	f2.Shutdown()
	delete(c.byID, id)
	back := c.start(id, 3)
	testutil.WaitFor(t, 10*time.Second, func() bool {
		sc := back.State().Subcluster("sc1")
		return sc != nil && sc.Seq == 2 && len(back.State().Policies()) == 2
	})
}

func TestRouterNeedsARouterCertificate(t *testing.T) {
	pki := testutil.NewPKI(t)
	_, err := New(&Config{NodeID: "r", DataDir: t.TempDir(), RPCPort: -1, SerfPort: -1, TLS: pki.Configurator(wrpc.RoleServer)})
	if err == nil || !strings.Contains(err.Error(), "a router needs a router certificate") {
		t.Fatalf("a server certificate: %v", err)
	}
}

// TestRoutersUseRouterCertificates: with TLS, three routers holding
// router certificates form their quorum (each proving its certificate to
// the others before it votes), and a server's certificate may not open
// the routers' Raft, nor may a client call Federation.Heartbeat.
func TestRoutersUseRouterCertificates(t *testing.T) {
	pki := testutil.NewPKI(t)
	logger, logs := testutil.Logger(t, hclog.Info)
	var rs []*Router
	for i := 1; i <= 3; i++ {
		var join []string
		if i > 1 {
			join = []string{rs[0].SerfAddr()}
		}
		r, err := New(&Config{NodeID: fmt.Sprint("r", i), DataDir: t.TempDir(), RPCPort: -1, SerfPort: -1, BootstrapExpect: 3,
			Join: join, JoinRetryInterval: 100 * time.Millisecond, SerfFastGossip: true, RaftConfig: fastRaft(),
			TLS: pki.Configurator(wrpc.RoleRouter), Logger: logger.Named(fmt.Sprint("r", i))})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { r.Shutdown() })
		rs = append(rs, r)
	}
	testutil.WaitFor(t, 15*time.Second, func() bool {
		for _, r := range rs {
			if r.IsLeader() && r.Ready() {
				return true
			}
		}
		return false
	})

	conn, err := net.Dial("tcp", rs[0].RPCAddr())
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if conn, err = wrpc.ClientHandshake(ctx, conn, pki.Configurator(wrpc.RoleServer), wrpc.RoleRouter, wrpc.ConnRaft); err == nil {
		conn.SetDeadline(time.Now().Add(5 * time.Second))
		b, _ := io.ReadAll(conn)
		conn.Close()
		if len(b) != 0 {
			t.Fatalf("a server certificate read %q from the routers' Raft", b)
		}
	}
	testutil.WaitFor(t, 5*time.Second, func() bool {
		return logs.Contains("only a router certificate may open Raft; the peer holds a server certificate")
	})

	client := wrpc.NewTLSPool(logger, pki.Configurator(wrpc.RoleClient), wrpc.RoleRouter)
	defer client.Shutdown()
	var hb wrpc.FederationHeartbeatResponse
	err = client.Call(ctx, rs[0].RPCAddr(), "Federation.Heartbeat", report("sc1", 1, 10), &hb)
	if wrpc.ErrorCode(err) != wrpc.CodePermissionDenied {
		t.Fatalf("a client certificate reporting a sub-cluster: %v, want permission denied", err)
	}
	server := wrpc.NewTLSPool(logger, pki.Configurator(wrpc.RoleServer), wrpc.RoleRouter)
	defer server.Shutdown()
	if err := server.Call(ctx, rs[0].RPCAddr(), "Federation.Heartbeat", report("sc1", 1, 10), &hb); err != nil || hb.State != federation.StateRunning {
		t.Fatalf("a server certificate reporting a sub-cluster: %+v, %v", hb, err)
	}
}
