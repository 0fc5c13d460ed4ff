package raftnode

import (
	"context"
	"sync"
	"time"

	"github.com/hashicorp/raft"
	"github.com/hashicorp/serf/serf"
)

// barrierTimeout bounds one attempt at the new leader's barrier.
const barrierTimeout = 30 * time.Second

// monitorLeadership starts the leader's duties when this member wins an
// election and stops them (and waits for them) when it loses leadership
// or shuts down. Each leadership has its own context: every duty and every
// write it makes ends with it.
func (n *Node) monitorLeadership() {
	var stop func() // ends the current leadership's duties and waits for them
	defer func() {
		if stop != nil {
			stop()
		}
	}()
	for {
		select {
		case isLeader := <-n.notifyCh:
			switch {
			case isLeader && stop == nil:
				stop = n.startLeadership()
			case !isLeader && stop != nil:
				stop()
				stop = nil
			}
		case <-n.shutdownCh:
			return
		}
	}
}

// startLeadership runs leaderLoop under a new context and returns the
// function that cancels it and waits for it to return.
func (n *Node) startLeadership() func() {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		n.leaderLoop(ctx)
	}()
	return func() {
		cancel()
		<-done
	}
}

// leaderLoop runs while this member leads: first a barrier so that every
// earlier entry is applied (consistent reads may start), then the
// process's Establish and Duties, and Raft membership reconciliation with
// serf, on each event and periodically in full.
func (n *Node) leaderLoop(ctx context.Context) {
	n.logger.Info("cluster leadership acquired")
	defer func() {
		n.ready.Store(false)
		n.freshness.set(false)
		n.logger.Info("cluster leadership lost")
	}()
	for {
		err := n.barrier(ctx)
		if err == nil {
			break
		}
		if ctx.Err() != nil {
			return
		}
		n.logger.Error("leader barrier failed; retrying", "error", err)
		select {
		case <-n.clock.After(time.Second):
		case <-ctx.Done():
			return
		}
	}
	if n.hooks.Establish != nil {
		n.hooks.Establish(ctx)
	}
	n.ready.Store(true)
	n.freshness.set(n.freshNow())
	var index uint64
	if n.hooks.AppliedIndex != nil {
		index = n.hooks.AppliedIndex()
	}
	n.logger.Info("leader is ready", "index", index)

	var duties sync.WaitGroup
	for _, d := range n.hooks.Duties {
		duties.Add(1)
		go func() {
			defer duties.Done()
			d(ctx)
		}()
	}
	defer duties.Wait()

	n.reconcileAll()
	ticker := n.clock.NewTicker(n.cfg.ReconcileInterval)
	defer ticker.Stop()
	for {
		select {
		case m := <-n.reconcileCh:
			n.reconcileMember(m)
		case <-ticker.C():
			n.reconcileAll()
		case <-ctx.Done():
			return
		}
	}
}

// barrier applies a Raft barrier, or gives up when ctx ends: a barrier
// enqueued just before Raft shuts down is never answered (nothing drains
// Raft's queue then), and the leadership's end must not wait for it.
func (n *Node) barrier(ctx context.Context) error {
	return waitFuture(ctx, n.raft.Barrier(barrierTimeout))
}

// waitFuture waits for f's answer, or for ctx to end: whichever is first.
func waitFuture(ctx context.Context, f raft.Future) error {
	done := make(chan error, 1)
	go func() { done <- f.Error() }()
	select {
	case err := <-done:
		return err
	case <-ctx.Done():
		return ctx.Err()
	}
}

func (n *Node) reconcileAll() {
	for _, m := range n.serf.Members() {
		n.reconcileMember(m)
	}
}

// reconcileMember brings the Raft configuration in line with one serf
// member: an alive member of the quorum's role becomes a voter, one that
// left (or was reaped) is removed. A failed one stays until an operator
// removes it.
func (n *Node) reconcileMember(m serf.Member) {
	p, ok := ParsePeer(m, n.cfg.Role)
	if !ok || p.ID == n.cfg.NodeID {
		return
	}
	switch m.Status {
	case serf.StatusAlive:
		n.addPeer(p)
	case serf.StatusLeft:
		n.removePeer(p)
	}
}

func (n *Node) addPeer(p Peer) {
	f := n.raft.GetConfiguration()
	if err := f.Error(); err != nil {
		n.logger.Error("read raft configuration", "error", err)
		return
	}
	servers := f.Configuration().Servers
	for _, srv := range servers {
		if srv.ID == raft.ServerID(p.ID) && srv.Address == raft.ServerAddress(p.RPCAddr) && srv.Suffrage == raft.Voter {
			return
		}
	}
	// A change: first make sure p is that member (with TLS on), so a
	// gossip member cannot remove a peer or become a voter.
	if err := n.verifyPeer(p); err != nil {
		n.logger.Warn("not reconciling a serf member into raft: it did not prove it is that "+n.cfg.Role, "id", p.ID, "address", p.RPCAddr, "error", err)
		return
	}
	for _, srv := range servers {
		sameID, sameAddr := srv.ID == raft.ServerID(p.ID), srv.Address == raft.ServerAddress(p.RPCAddr)
		switch {
		case sameID && sameAddr:
			// a non-voter: AddVoter below promotes it
		case sameID || sameAddr:
			// A member came back with a new address, or a new one took an
			// old one's address: drop the stale entry first.
			n.logger.Info("removing stale raft peer", "id", srv.ID, "address", srv.Address)
			if err := n.raft.RemoveServer(srv.ID, 0, 0).Error(); err != nil {
				n.logger.Error("remove stale raft peer", "id", srv.ID, "error", err)
				return
			}
		}
	}
	n.logger.Info("adding raft voter", "id", p.ID, "address", p.RPCAddr)
	if err := n.raft.AddVoter(raft.ServerID(p.ID), raft.ServerAddress(p.RPCAddr), 0, 0).Error(); err != nil {
		n.logger.Error("add raft voter", "id", p.ID, "error", err)
	}
}

func (n *Node) removePeer(p Peer) {
	f := n.raft.GetConfiguration()
	if err := f.Error(); err != nil {
		return
	}
	for _, srv := range f.Configuration().Servers {
		if srv.ID == raft.ServerID(p.ID) {
			n.logger.Info("removing raft peer that left", "id", p.ID)
			if err := n.raft.RemoveServer(srv.ID, 0, 0).Error(); err != nil {
				n.logger.Error("remove raft peer", "id", p.ID, "error", err)
			}
			return
		}
	}
}
