package server

import (
	"fmt"
	"net"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/memberlist"
	"github.com/hashicorp/raft"
	"github.com/hashicorp/serf/serf"
	wrpc "github.com/weft-sched/weft/rpc"
)

// Serf tags every member carries (SPEC §3).
const (
	TagRole    = "role"
	TagRPCAddr = "rpc_addr"
	TagID      = "id"
	TagExpect  = "expect"
	TagRack    = "rack"
	TagBuild   = "build"

	RoleServer = "server"
	RoleAgent  = "agent"
)

// serverMember is a serf member that is a weft server.
type serverMember struct {
	ID      string
	RPCAddr string
	Expect  int
	Status  serf.MemberStatus
}

// parseServer returns the server parts of m, or false if m is not a server.
func parseServer(m serf.Member) (serverMember, bool) {
	if m.Tags[TagRole] != RoleServer {
		return serverMember{}, false
	}
	p := serverMember{ID: m.Tags[TagID], RPCAddr: m.Tags[TagRPCAddr], Status: m.Status}
	if p.ID == "" || p.RPCAddr == "" {
		return serverMember{}, false
	}
	if e := m.Tags[TagExpect]; e != "" {
		n, err := strconv.Atoi(e)
		if err != nil {
			return serverMember{}, false
		}
		p.Expect = n
	}
	return p, true
}

// SerfConfig builds the serf configuration shared by servers and agents.
func SerfConfig(nodeID, bindAddr string, port int, dataDir string, tags map[string]string, fast bool, logger hclog.Logger, eventCh chan serf.Event) (*serf.Config, error) {
	conf := serf.DefaultConfig()
	conf.Init()
	conf.NodeName = nodeID
	conf.Tags = tags
	conf.EventCh = eventCh
	conf.RejoinAfterLeave = true
	std := logger.StandardLogger(&hclog.StandardLoggerOptions{InferLevels: true})
	conf.Logger = std
	ml := memberlist.DefaultLANConfig()
	ml.Name = nodeID
	ml.BindAddr = bindAddr
	ml.BindPort = port
	ml.AdvertiseAddr = bindAddr
	ml.AdvertisePort = port
	ml.Logger = std
	if fast {
		ml.GossipInterval = 50 * time.Millisecond
		ml.ProbeInterval = 500 * time.Millisecond
		ml.ProbeTimeout = 250 * time.Millisecond
		ml.SuspicionMult = 2
		conf.ReapInterval = time.Second
	}
	conf.MemberlistConfig = ml
	if dataDir != "" {
		dir := filepath.Join(dataDir, "serf")
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return nil, fmt.Errorf("create serf dir: %w", err)
		}
		conf.SnapshotPath = filepath.Join(dir, "local.snapshot")
	}
	return conf, nil
}

func (s *Server) setupSerf() error {
	tags := map[string]string{
		TagRole:    RoleServer,
		TagRPCAddr: s.rpcAddr,
		TagID:      s.config.NodeID,
		TagBuild:   s.config.Build,
	}
	if s.config.BootstrapExpect > 0 {
		tags[TagExpect] = strconv.Itoa(s.config.BootstrapExpect)
	}
	conf, err := SerfConfig(s.config.NodeID, s.config.BindAddr, port(s.config.SerfPort), s.config.DataDir,
		tags, s.config.SerfFastGossip, s.config.Logger.Named("serf"), s.serfEventCh)
	if err != nil {
		return err
	}
	s.serf, err = serf.Create(conf)
	if err != nil {
		return fmt.Errorf("start serf: %w", err)
	}
	return nil
}

// joinLoop joins the given serf addresses, retrying until one succeeds.
func (s *Server) joinLoop(addrs []string) {
	defer s.wg.Done()
	full := make([]string, len(addrs))
	for i, a := range addrs {
		full[i] = withDefaultPort(a, DefaultSerfPort)
	}
	for {
		n, err := s.serf.Join(full, true)
		if n > 0 {
			s.logger.Info("joined the pool", "contacted", n)
			return
		}
		s.logger.Warn("join failed; retrying", "addresses", full, "error", err)
		select {
		case <-time.After(s.config.JoinRetryInterval):
		case <-s.shutdownCh:
			return
		}
	}
}

func withDefaultPort(addr string, port int) string {
	if _, _, err := net.SplitHostPort(addr); err == nil {
		return addr
	}
	return net.JoinHostPort(addr, strconv.Itoa(port))
}

// serfEventLoop reacts to membership: it bootstraps Raft once enough servers
// are seen, and hands server changes to the leader for reconciliation.
func (s *Server) serfEventLoop() {
	defer s.wg.Done()
	retry := time.NewTicker(time.Second)
	defer retry.Stop()
	for {
		select {
		case e := <-s.serfEventCh:
			me, ok := e.(serf.MemberEvent)
			if !ok {
				continue
			}
			for _, m := range me.Members {
				if m.Tags[TagRole] == RoleAgent && (me.Type == serf.EventMemberFailed || me.Type == serf.EventMemberLeave) && s.IsLeader() {
					select {
					case s.nodeEventCh <- m:
					default: // the heartbeat TTL will catch it
					}
					continue
				}
				if _, ok := parseServer(m); !ok {
					continue
				}
				if me.Type == serf.EventMemberJoin || me.Type == serf.EventMemberUpdate {
					s.maybeBootstrap()
				}
				if s.IsLeader() {
					select {
					case s.reconcileCh <- m:
					default: // the periodic full reconcile will catch up
					}
				}
			}
		case <-retry.C:
			s.maybeBootstrap()
		case <-s.shutdownCh:
			return
		}
	}
}

// maybeBootstrap bootstraps Raft with every server seen in serf once
// bootstrap_expect of them are alive, following Nomad's rules: a server that
// has Raft state never bootstraps; conflicting expect values abort; and if
// any peer already has a Raft configuration, nobody bootstraps.
func (s *Server) maybeBootstrap() {
	if s.bootstrapped.Load() || s.config.BootstrapExpect == 0 {
		return
	}
	var servers []serverMember
	for _, m := range s.serf.Members() {
		p, ok := parseServer(m)
		if !ok || m.Status != serf.StatusAlive {
			continue
		}
		if p.Expect != 0 && p.Expect != s.config.BootstrapExpect {
			s.logger.Error("servers disagree on bootstrap_expect; not bootstrapping — give every server the same value",
				"peer", p.ID, "peer_expect", p.Expect, "local_expect", s.config.BootstrapExpect)
			return
		}
		servers = append(servers, p)
	}
	if len(servers) < s.config.BootstrapExpect {
		return
	}
	for _, p := range servers {
		if p.ID == s.config.NodeID {
			continue
		}
		var resp wrpc.PeersResponse
		if err := s.pool.Call(p.RPCAddr, "Status.Peers", &wrpc.RequestHeader{AllowStale: true}, &resp); err != nil {
			s.logger.Warn("cannot confirm peer's raft state; will retry", "peer", p.ID, "error", err)
			return
		}
		if len(resp.Peers) > 0 {
			s.logger.Info("a peer already has a raft configuration; not bootstrapping", "peer", p.ID)
			s.bootstrapped.Store(true)
			return
		}
	}
	sort.Slice(servers, func(i, j int) bool { return servers[i].ID < servers[j].ID })
	var cfg raft.Configuration
	for _, p := range servers {
		cfg.Servers = append(cfg.Servers, raft.Server{ID: raft.ServerID(p.ID), Address: raft.ServerAddress(p.RPCAddr), Suffrage: raft.Voter})
	}
	s.logger.Info("bootstrapping raft", "servers", len(cfg.Servers))
	if err := s.raft.BootstrapCluster(cfg).Error(); err != nil && err != raft.ErrCantBootstrap {
		s.logger.Error("raft bootstrap failed", "error", err)
		return
	}
	s.bootstrapped.Store(true)
}
