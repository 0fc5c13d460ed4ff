package server

import (
	"context"
	"fmt"
	"strconv"
	"time"

	"github.com/hashicorp/serf/serf"
	"github.com/weft-sched/weft/internal/gossip"
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
	s.serf, s.keyring, err = gossip.Create(gossip.Config{
		NodeID: s.config.NodeID, BindAddr: s.config.BindAddr, Port: port(s.config.SerfPort), DataDir: s.config.DataDir,
		Tags: tags, Fast: s.config.SerfFastGossip, Encrypt: s.config.Encrypt, Logger: s.config.Logger.Named("serf"), EventCh: s.serfEventCh,
	})
	return err
}

// joinLoop joins the given serf addresses, retrying until one succeeds.
func (s *Server) joinLoop(addrs []string) {
	gossip.JoinLoop(s.serf, addrs, s.config.JoinRetryInterval, s.logger, s.shutdownCh)
}

// serfEventLoop reacts to membership: agents' gossip feeds node liveness;
// servers' changes go to Raft's plumbing, which bootstraps once enough are
// seen and reconciles Raft's configuration on the leader.
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
				s.node.MemberEvent(me.Type, m)
			}
		case <-retry.C():
			s.node.MaybeBootstrap()
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

// callMember calls a member of the gossip pool at the RPC address it
// gossips, over mutual TLS: a server with the servers' pool, an agent with
// the agents', each proving the certificate of its role (the keyring
// methods reach every member so).
func (s *Server) callMember(ctx context.Context, m serf.Member, method string, args, reply any) error {
	addr := m.Tags[TagRPCAddr]
	switch role := m.Tags[TagRole]; {
	case addr == "":
		return fmt.Errorf("it gossips no RPC address")
	case role == RoleServer:
		return s.pool.Call(ctx, addr, method, args, reply)
	case role == RoleAgent:
		return s.agentPool.Call(ctx, addr, method, args, reply)
	default:
		return fmt.Errorf("its role %q is neither a server's nor an agent's", role)
	}
}
