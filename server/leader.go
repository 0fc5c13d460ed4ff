package server

import (
	"context"
	"sync"
	"time"

	"github.com/hashicorp/raft"
	"github.com/hashicorp/serf/serf"
)

// barrierTimeout bounds one attempt at the new leader's barrier.
const barrierTimeout = 30 * time.Second

// monitorLeadership starts the leader's duties when this server wins an
// election and stops them (and waits for them) when it loses leadership or
// shuts down. Each leadership has its own context: every duty and every
// write it makes ends with it.
func (s *Server) monitorLeadership() {
	var stop func() // ends the current leadership's duties and waits for them
	defer func() {
		if stop != nil {
			stop()
		}
	}()
	for {
		select {
		case isLeader := <-s.raftNotifyCh:
			switch {
			case isLeader && stop == nil:
				stop = s.startLeadership()
			case !isLeader && stop != nil:
				stop()
				stop = nil
			}
		case <-s.shutdownCh:
			return
		}
	}
}

// startLeadership runs leaderLoop under a new context and returns the
// function that cancels it and waits for it to return.
func (s *Server) startLeadership() func() {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		s.leaderLoop(ctx)
	}()
	return func() {
		cancel()
		<-done
	}
}

// leaderLoop runs while this server leads: first a barrier so that every
// earlier entry is applied (consistent reads may start), then the duties,
// and Raft membership reconciliation with serf, on each event and
// periodically in full.
func (s *Server) leaderLoop(ctx context.Context) {
	s.logger.Info("cluster leadership acquired")
	defer func() {
		s.leaderReady.Store(false)
		s.logger.Info("cluster leadership lost")
	}()
	for {
		err := s.raft.Barrier(barrierTimeout).Error()
		if err == nil {
			break
		}
		s.logger.Error("leader barrier failed; retrying", "error", err)
		select {
		case <-s.clock.After(time.Second):
		case <-ctx.Done():
			return
		}
	}
	now := s.clock.Now()
	s.board.reset(now)
	s.livenessMu.Lock()
	s.liveness.Reset(now)
	for _, m := range s.serf.Members() {
		if m.Tags[TagRole] == RoleAgent {
			s.liveness.Gossip(m.Tags[TagID], gossipOf(m.Status))
		}
	}
	s.livenessMu.Unlock()
	s.ensureWorkloadKey(ctx)
	s.leaderReady.Store(true)
	s.logger.Info("leader is ready", "index", s.fsm.State().Index())

	var duties sync.WaitGroup
	duties.Add(2)
	go func() {
		defer duties.Done()
		s.scheduleLoop(ctx)
	}()
	go func() {
		defer duties.Done()
		s.leaderDuties(ctx)
	}()
	defer duties.Wait()

	s.reconcileAll()
	ticker := s.clock.NewTicker(s.config.ReconcileInterval)
	defer ticker.Stop()
	for {
		select {
		case m := <-s.reconcileCh:
			s.reconcileMember(m)
		case <-ticker.C():
			s.reconcileAll()
		case <-ctx.Done():
			return
		}
	}
}

// gossipOf maps a serf member status to what liveness needs of it.
func gossipOf(st serf.MemberStatus) gossipStatus {
	switch st {
	case serf.StatusAlive:
		return gossipAlive
	case serf.StatusFailed:
		return gossipFailed
	case serf.StatusLeft, serf.StatusLeaving:
		return gossipLeft
	}
	return gossipUnknown
}

func (s *Server) reconcileAll() {
	for _, m := range s.serf.Members() {
		s.reconcileMember(m)
	}
}

// reconcileMember brings the Raft configuration in line with one serf
// member: an alive server becomes a voter, one that left (or was reaped) is
// removed. A failed server stays until an operator removes it.
func (s *Server) reconcileMember(m serf.Member) {
	p, ok := parseServer(m)
	if !ok || p.ID == s.config.NodeID {
		return
	}
	switch m.Status {
	case serf.StatusAlive:
		s.addRaftPeer(p)
	case serf.StatusLeft:
		s.removeRaftPeer(p)
	}
}

func (s *Server) addRaftPeer(p serverMember) {
	f := s.raft.GetConfiguration()
	if err := f.Error(); err != nil {
		s.logger.Error("read raft configuration", "error", err)
		return
	}
	servers := f.Configuration().Servers
	for _, srv := range servers {
		if srv.ID == raft.ServerID(p.ID) && srv.Address == raft.ServerAddress(p.RPCAddr) && srv.Suffrage == raft.Voter {
			return
		}
	}
	// A change: first make sure p is that server (with TLS on), so a
	// gossip member cannot remove a peer or become a voter.
	if err := s.verifyServerPeer(p); err != nil {
		s.logger.Warn("not reconciling a serf member into raft: it did not prove it is that server", "id", p.ID, "address", p.RPCAddr, "error", err)
		return
	}
	for _, srv := range servers {
		sameID, sameAddr := srv.ID == raft.ServerID(p.ID), srv.Address == raft.ServerAddress(p.RPCAddr)
		switch {
		case sameID && sameAddr:
			// a non-voter: AddVoter below promotes it
		case sameID || sameAddr:
			// A server came back with a new address, or a new server took
			// an old one's address: drop the stale entry first.
			s.logger.Info("removing stale raft peer", "id", srv.ID, "address", srv.Address)
			if err := s.raft.RemoveServer(srv.ID, 0, 0).Error(); err != nil {
				s.logger.Error("remove stale raft peer", "id", srv.ID, "error", err)
				return
			}
		}
	}
	s.logger.Info("adding raft voter", "id", p.ID, "address", p.RPCAddr)
	if err := s.raft.AddVoter(raft.ServerID(p.ID), raft.ServerAddress(p.RPCAddr), 0, 0).Error(); err != nil {
		s.logger.Error("add raft voter", "id", p.ID, "error", err)
	}
}

func (s *Server) removeRaftPeer(p serverMember) {
	f := s.raft.GetConfiguration()
	if err := f.Error(); err != nil {
		return
	}
	for _, srv := range f.Configuration().Servers {
		if srv.ID == raft.ServerID(p.ID) {
			s.logger.Info("removing raft peer that left", "id", p.ID)
			if err := s.raft.RemoveServer(srv.ID, 0, 0).Error(); err != nil {
				s.logger.Error("remove raft peer", "id", p.ID, "error", err)
			}
			return
		}
	}
}
