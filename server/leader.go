package server

import (
	"sync"
	"time"

	"github.com/hashicorp/raft"
	"github.com/hashicorp/serf/serf"
	"github.com/weft-sched/weft/scheduler"
)

// barrierTimeout bounds one attempt at the new leader's barrier.
const barrierTimeout = 30 * time.Second

// monitorLeadership starts the leader's duties when this server wins an
// election and stops them when it loses leadership.
func (s *Server) monitorLeadership() {
	defer s.wg.Done()
	var stopCh chan struct{}
	var done chan struct{}
	stop := func() {
		if stopCh != nil {
			close(stopCh)
			<-done
			stopCh, done = nil, nil
		}
	}
	defer stop()
	for {
		select {
		case isLeader := <-s.raftNotifyCh:
			if isLeader && stopCh == nil {
				stopCh, done = make(chan struct{}), make(chan struct{})
				go func(stopCh, done chan struct{}) {
					defer close(done)
					s.leaderLoop(stopCh)
				}(stopCh, done)
			} else if !isLeader {
				stop()
			}
		case <-s.shutdownCh:
			return
		}
	}
}

// leaderLoop runs while this server leads: first a barrier so that every
// earlier entry is applied (consistent reads may start), then Raft membership
// reconciliation with serf, on each event and periodically in full.
func (s *Server) leaderLoop(stopCh chan struct{}) {
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
		case <-time.After(time.Second):
		case <-stopCh:
			return
		}
	}
	s.board.reset(time.Now())
	s.leaderReady.Store(true)
	s.logger.Info("leader is ready", "index", s.fsm.State().Index())

	var duties sync.WaitGroup
	duties.Add(3)
	go func() {
		defer duties.Done()
		s.preemptLoop(stopCh)
	}()
	go func() {
		defer duties.Done()
		s.scheduleLoop(stopCh)
	}()
	go func() {
		defer duties.Done()
		s.livenessLoop(stopCh)
	}()
	defer duties.Wait()

	s.reconcileAll()
	ticker := time.NewTicker(s.config.ReconcileInterval)
	defer ticker.Stop()
	for {
		select {
		case m := <-s.reconcileCh:
			s.reconcileMember(m)
		case m := <-s.nodeEventCh:
			if n, ok := s.fsm.State().Node(m.Tags[TagID]); ok && n.Status != scheduler.NodeDown {
				s.markNodeDown(n, "gossip reports the agent "+m.Status.String())
			}
		case <-ticker.C:
			s.reconcileAll()
		case <-stopCh:
			return
		case <-s.shutdownCh:
			return
		}
	}
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
	for _, srv := range f.Configuration().Servers {
		sameID, sameAddr := srv.ID == raft.ServerID(p.ID), srv.Address == raft.ServerAddress(p.RPCAddr)
		switch {
		case sameID && sameAddr:
			if srv.Suffrage != raft.Voter {
				break
			}
			return
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
