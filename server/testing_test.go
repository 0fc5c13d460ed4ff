package server

import (
	"context"
	"net"
	"net/rpc"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/raft"
	"github.com/weft-sched/weft/internal/clock"
	"github.com/weft-sched/weft/internal/testutil"
	wrpc "github.com/weft-sched/weft/rpc"
)

func fastRaftConfig() *raft.Config {
	c := raft.DefaultConfig()
	c.HeartbeatTimeout = 300 * time.Millisecond
	c.ElectionTimeout = 300 * time.Millisecond
	c.LeaderLeaseTimeout = 150 * time.Millisecond
	c.CommitTimeout = 5 * time.Millisecond
	return c
}

// testCluster is a set of in-process servers with real TCP, real gossip
// and real bolt stores in temporary directories.
type testCluster struct {
	t       *testing.T
	logger  hclog.Logger
	logs    *testutil.LogSink
	servers map[string]*Server
	configs map[string]*Config
	pool    *wrpc.Pool
	clock   clock.Clock // if set, the servers' clock
	acl     bool        // ACLs on for servers started from now on
	// pki, if set, turns TLS on: each server gets a server certificate.
	pki     *testutil.PKI
	encrypt map[string]string // gossip key of each server ID that has one, when first started
	tune    func(*Config)     // if set, changes each server's configuration when first started
}

func newTestCluster(t *testing.T) *testCluster {
	logger, logs := testutil.Logger(t, hclog.Info)
	c := &testCluster{t: t, logger: logger, logs: logs, servers: map[string]*Server{}, configs: map[string]*Config{}, pool: wrpc.NewPool(nil)}
	t.Cleanup(func() {
		c.pool.Shutdown()
		for _, s := range c.servers {
			s.Shutdown()
		}
	})
	return c
}

// start starts (or restarts, on the same data dir and ports) server id.
func (c *testCluster) start(id string, expect int, join ...string) *Server {
	c.t.Helper()
	cfg, ok := c.configs[id]
	if !ok {
		cfg = &Config{
			NodeID:            id,
			DataDir:           c.t.TempDir(),
			BindAddr:          "127.0.0.1",
			RPCPort:           -1,
			SerfPort:          -1,
			BootstrapExpect:   expect,
			RPCHoldTimeout:    2 * time.Second,
			ReconcileInterval: 500 * time.Millisecond,
			JoinRetryInterval: 100 * time.Millisecond,
			SerfFastGossip:    true,
			ACLEnabled:        c.acl,
			Encrypt:           c.encrypt[id],
		}
		if c.pki != nil {
			cfg.TLS = c.pki.Configurator(wrpc.RoleServer)
		}
		if c.tune != nil {
			c.tune(cfg)
		}
		c.configs[id] = cfg
	}
	run := *cfg
	run.Join = join
	run.Logger = c.logger.Named(id)
	if run.RaftConfig == nil {
		run.RaftConfig = fastRaftConfig()
	}
	run.Clock = c.clock
	s, err := New(&run)
	if err != nil {
		c.t.Fatalf("start %s: %v", id, err)
	}
	// Restarts reuse the ports: the Raft address must stay the same, and
	// memberlist lets a failed node reclaim its name only at its old address.
	cfg.RPCPort = s.listener.Addr().(*net.TCPAddr).Port
	cfg.SerfPort = int(s.serf.Memberlist().LocalNode().Port)
	c.servers[id] = s
	return s
}

func (c *testCluster) stop(id string) {
	c.servers[id].Shutdown()
	delete(c.servers, id)
}

// ids returns the IDs of the running servers.
func (c *testCluster) ids() []string {
	var out []string
	for id := range c.servers {
		out = append(out, id)
	}
	return out
}

// leave makes s leave gracefully and waits until the remaining servers'
// leader has dropped it from the Raft voters. It returns s's ID.
func (c *testCluster) leave(s *Server) string {
	c.t.Helper()
	id := s.NodeID()
	if err := s.Leave(); err != nil {
		c.t.Fatal(err)
	}
	delete(c.servers, id)
	c.waitForVoters(c.ids()...)
	return id
}

func (c *testCluster) leader() *Server {
	for _, s := range c.servers {
		if s.IsLeader() && s.leaderReady.Load() {
			return s
		}
	}
	return nil
}

func (c *testCluster) waitForLeader() *Server {
	c.t.Helper()
	var l *Server
	testutil.WaitFor(c.t, 15*time.Second, func() bool { l = c.leader(); return l != nil })
	return l
}

func (c *testCluster) follower() *Server {
	for _, s := range c.servers {
		if !s.IsLeader() {
			return s
		}
	}
	return nil
}

// waitForVoters waits until the leader's Raft configuration holds exactly ids.
func (c *testCluster) waitForVoters(ids ...string) {
	c.t.Helper()
	want := strings.Join(sortedCopy(ids), ",")
	var got string
	ok := testutil.Eventually(15*time.Second, func() bool {
		l := c.leader()
		if l == nil {
			return false
		}
		servers, err := l.raftServers()
		if err != nil {
			return false
		}
		var have []string
		for _, s := range servers {
			if s.Voter {
				have = append(have, s.ID)
			}
		}
		got = strings.Join(sortedCopy(have), ",")
		return got == want
	})
	if !ok {
		c.t.Fatalf("raft voters = [%s], want [%s]", got, want)
	}
}

func (c *testCluster) call(s *Server, method string, args, reply any) error {
	return c.pool.Call(context.Background(), s.RPCAddr(), method, args, reply)
}

func sortedCopy(in []string) []string {
	out := append([]string(nil), in...)
	for i := range out {
		for j := i + 1; j < len(out); j++ {
			if out[j] < out[i] {
				out[i], out[j] = out[j], out[i]
			}
		}
	}
	return out
}

func newRawClient(conn net.Conn) *rpc.Client {
	return rpc.NewClientWithCodec(wrpc.NewClientCodec(conn))
}
