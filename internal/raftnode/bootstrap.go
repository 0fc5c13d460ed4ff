package raftnode

import (
	"context"
	"fmt"
	"sort"
	"strconv"
	"time"

	"github.com/hashicorp/raft"
	"github.com/hashicorp/serf/serf"
	"github.com/weft-sched/weft/internal/gossip"
	wrpc "github.com/weft-sched/weft/rpc"
)

// peerCheckTimeout bounds the call that checks a would-be Raft peer.
const peerCheckTimeout = 3 * time.Second

// Peer is a serf member of the quorum's role.
type Peer struct {
	ID      string
	RPCAddr string
	Expect  int
	Status  serf.MemberStatus
}

// ParsePeer returns the quorum parts of m, or false if m is not a member
// of role (or does not say its ID and address).
func ParsePeer(m serf.Member, role string) (Peer, bool) {
	if m.Tags[gossip.TagRole] != role {
		return Peer{}, false
	}
	p := Peer{ID: m.Tags[gossip.TagID], RPCAddr: m.Tags[gossip.TagRPCAddr], Status: m.Status}
	if p.ID == "" || p.RPCAddr == "" {
		return Peer{}, false
	}
	if e := m.Tags[gossip.TagExpect]; e != "" {
		n, err := strconv.Atoi(e)
		if err != nil {
			return Peer{}, false
		}
		p.Expect = n
	}
	return p, true
}

// MemberEvent takes a serf event about m: a member of the quorum's role
// that joined or changed may complete the bootstrap, and the leader
// reconciles Raft's configuration with it. It reports whether m is of the
// quorum's role.
func (n *Node) MemberEvent(t serf.EventType, m serf.Member) bool {
	if _, ok := ParsePeer(m, n.cfg.Role); !ok {
		return false
	}
	if t == serf.EventMemberJoin || t == serf.EventMemberUpdate {
		n.MaybeBootstrap()
	}
	if n.IsLeader() {
		select {
		case n.reconcileCh <- m:
		default: // the periodic full reconcile will catch up
		}
	}
	return true
}

// MaybeBootstrap bootstraps Raft with every member of the role seen in
// serf once bootstrap_expect of them are alive, following Nomad's rules: a
// member that has Raft state never bootstraps; conflicting expect values
// abort; and if any peer already has a Raft configuration, nobody
// bootstraps. The process calls it on serf events and every second.
func (n *Node) MaybeBootstrap() {
	if n.bootstrapped.Load() || n.cfg.BootstrapExpect == 0 || n.serf == nil {
		return
	}
	var peers []Peer
	for _, m := range n.serf.Members() {
		p, ok := ParsePeer(m, n.cfg.Role)
		if !ok || m.Status != serf.StatusAlive {
			continue
		}
		if p.Expect != 0 && p.Expect != n.cfg.BootstrapExpect {
			n.logger.Error(n.cfg.Role+"s disagree on bootstrap_expect; not bootstrapping — give every "+n.cfg.Role+" the same value",
				"peer", p.ID, "peer_expect", p.Expect, "local_expect", n.cfg.BootstrapExpect)
			return
		}
		peers = append(peers, p)
	}
	if len(peers) < n.cfg.BootstrapExpect {
		return
	}
	for _, p := range peers {
		if p.ID == n.cfg.NodeID {
			continue
		}
		if err := n.verifyPeer(p); err != nil {
			n.logger.Warn("not bootstrapping with a serf member that did not prove it is that "+n.cfg.Role+"; will retry", "peer", p.ID, "error", err)
			return
		}
		var resp wrpc.PeersResponse
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		err := n.cfg.Pool.Call(ctx, p.RPCAddr, "Status.Peers", &wrpc.RequestHeader{AllowStale: true}, &resp)
		cancel()
		if err != nil {
			n.logger.Warn("cannot confirm peer's raft state; will retry", "peer", p.ID, "error", err)
			return
		}
		if len(resp.Peers) > 0 {
			n.logger.Info("a peer already has a raft configuration; not bootstrapping", "peer", p.ID)
			n.bootstrapped.Store(true)
			return
		}
	}
	sort.Slice(peers, func(i, j int) bool { return peers[i].ID < peers[j].ID })
	var cfg raft.Configuration
	for _, p := range peers {
		cfg.Servers = append(cfg.Servers, raft.Server{ID: raft.ServerID(p.ID), Address: raft.ServerAddress(p.RPCAddr), Suffrage: raft.Voter})
	}
	n.logger.Info("bootstrapping raft", "members", len(cfg.Servers))
	if err := n.raft.BootstrapCluster(cfg).Error(); err != nil && err != raft.ErrCantBootstrap {
		n.logger.Error("raft bootstrap failed", "error", err)
		return
	}
	n.bootstrapped.Store(true)
}

// verifyPeer checks, with TLS on, that the serf member p is what it claims
// before it enters the Raft configuration (SPEC §15: only a member with a
// certificate of the quorum's role is reconciled into it): its RPC address
// must prove it holds such a certificate (the pool dials only such peers),
// and the member answering there must be p.ID, so that no gossip member
// can pass off a real member's address as its own. Without TLS it checks
// nothing: gossip alone decides.
func (n *Node) verifyPeer(p Peer) error {
	if n.cfg.TLS == nil {
		return nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), peerCheckTimeout)
	defer cancel()
	var st wrpc.SelfResponse
	if err := n.cfg.Pool.Call(ctx, p.RPCAddr, "Status.Self", &wrpc.RequestHeader{AllowStale: true}, &st); err != nil {
		return fmt.Errorf("no %s certificate proven at %s: %w", n.cfg.PeerRole, p.RPCAddr, err)
	}
	if st.ID != p.ID {
		return fmt.Errorf("the %s at %s is %q, not %q as gossip says", n.cfg.Role, p.RPCAddr, st.ID, p.ID)
	}
	return nil
}
