package server

import (
	"context"
	"sort"
	"strconv"
	"time"

	"github.com/hashicorp/raft"
	"github.com/hashicorp/serf/serf"
	"github.com/weft-sched/weft/internal/gossip"
	wrpc "github.com/weft-sched/weft/rpc"
)

// Tag names and roles, re-exported for the server's own use.
const (
	TagRole    = gossip.TagRole
	TagRPCAddr = gossip.TagRPCAddr
	TagID      = gossip.TagID
	TagExpect  = gossip.TagExpect
	RoleServer = gossip.RoleServer
	RoleAgent  = gossip.RoleAgent
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

func (s *Server) setupSerf() error {
	tags := map[string]string{
		TagRole:         RoleServer,
		TagRPCAddr:      s.rpcAddr,
		TagID:           s.config.NodeID,
		gossip.TagBuild: s.config.Build,
	}
	if s.config.BootstrapExpect > 0 {
		tags[TagExpect] = strconv.Itoa(s.config.BootstrapExpect)
	}
	var err error
	s.serf, err = gossip.Create(gossip.Config{
		NodeID: s.config.NodeID, BindAddr: s.config.BindAddr, Port: port(s.config.SerfPort), DataDir: s.config.DataDir,
		Tags: tags, Fast: s.config.SerfFastGossip, Encrypt: s.config.Encrypt, Logger: s.config.Logger.Named("serf"), EventCh: s.serfEventCh,
	})
	return err
}

// joinLoop joins the given serf addresses, retrying until one succeeds.
func (s *Server) joinLoop(addrs []string) {
	gossip.JoinLoop(s.serf, addrs, s.config.JoinRetryInterval, s.logger, s.shutdownCh)
}

// serfEventLoop reacts to membership: it bootstraps Raft once enough servers
// are seen, and hands server changes to the leader for reconciliation.
func (s *Server) serfEventLoop() {
	retry := s.clock.NewTicker(time.Second)
	defer retry.Stop()
	for {
		select {
		case e := <-s.serfEventCh:
			me, ok := e.(serf.MemberEvent)
			if !ok {
				continue
			}
			for _, m := range me.Members {
				if m.Tags[TagRole] == RoleAgent {
					s.livenessMu.Lock()
					s.liveness.Gossip(m.Tags[TagID], gossipOfEvent(me.Type, m.Status))
					s.livenessMu.Unlock()
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
		case <-retry.C():
			s.maybeBootstrap()
		case <-s.shutdownCh:
			return
		}
	}
}

// gossipOfEvent is what a serf event says of an agent.
func gossipOfEvent(t serf.EventType, st serf.MemberStatus) gossipStatus {
	switch t {
	case serf.EventMemberFailed:
		return gossipFailed
	case serf.EventMemberLeave, serf.EventMemberReap:
		return gossipLeft
	case serf.EventMemberJoin:
		return gossipAlive
	}
	return gossipOf(st)
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
		if err := s.verifyServerPeer(p); err != nil {
			s.logger.Warn("not bootstrapping with a serf member that did not prove it is that server; will retry", "peer", p.ID, "error", err)
			return
		}
		var resp wrpc.PeersResponse
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		err := s.pool.Call(ctx, p.RPCAddr, "Status.Peers", &wrpc.RequestHeader{AllowStale: true}, &resp)
		cancel()
		if err != nil {
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
