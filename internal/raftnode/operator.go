package raftnode

import (
	"context"
	"fmt"
	"net"
	"sort"
	"strconv"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/raft"
	"github.com/hashicorp/serf/serf"
	"github.com/weft-sched/weft/internal/gossip"
	wrpc "github.com/weft-sched/weft/rpc"
)

// Operator answers the operator methods every Raft-and-gossip process
// shares — servers and routers alike: the Raft configuration (`weft
// operator raft`), the gossip pool (`weft members`) and its keyring (`weft
// operator gossip keyring`, keyring.go). The process registers them with
// the capabilities it chooses.
type Operator struct {
	Node *Node
	// Meta fills what a read says of its freshness.
	Meta   func(*wrpc.ResponseMeta)
	Logger hclog.Logger
	// CallMember calls a method of another member of the gossip pool at
	// its RPC address, over the process's mutual TLS, verifying that the
	// member holds the certificate its role in the pool asks for: how the
	// keyring methods reach every member.
	CallMember func(ctx context.Context, m serf.Member, method string, args, reply any) error
}

// errStarting answers a call that needs gossip before it has started.
var errStarting = wrpc.Errorf(wrpc.CodeUnavailable, "gossip is starting: try again")

// Servers describes the Raft configuration as this process sees it.
func (n *Node) Servers() ([]wrpc.RaftServer, error) {
	f := n.raft.GetConfiguration()
	if err := f.Error(); err != nil {
		return nil, err
	}
	leader, _ := n.raft.LeaderWithID()
	var out []wrpc.RaftServer
	for _, srv := range f.Configuration().Servers {
		state := "follower"
		if srv.Address == leader {
			state = "leader"
		}
		out = append(out, wrpc.RaftServer{ID: string(srv.ID), Address: string(srv.Address), State: state,
			Voter: srv.Suffrage == raft.Voter})
	}
	return out, nil
}

// Ping answers at once; clients use it to check a process is reachable.
func (e *Operator) Ping(ctx context.Context, args *wrpc.RequestHeader, reply *struct{}) error {
	return nil
}

// Leader returns the leader this member knows of.
func (e *Operator) Leader(ctx context.Context, args *wrpc.RequestHeader, reply *wrpc.LeaderResponse) error {
	addr, id := e.Node.raft.LeaderWithID()
	reply.Address, reply.ID = string(addr), string(id)
	return nil
}

// Self names the answering member: its ID and RPC address. Peers ask it
// of a serf member before they trust it with Raft (verifyPeer).
func (e *Operator) Self(ctx context.Context, args *wrpc.RequestHeader, reply *wrpc.SelfResponse) error {
	reply.ID, reply.Address = e.Node.cfg.NodeID, e.Node.addr
	return nil
}

// Peers returns the addresses in this member's Raft configuration.
func (e *Operator) Peers(ctx context.Context, args *wrpc.RequestHeader, reply *wrpc.PeersResponse) error {
	f := e.Node.raft.GetConfiguration()
	if err := f.Error(); err != nil {
		return err
	}
	for _, s := range f.Configuration().Servers {
		reply.Peers = append(reply.Peers, string(s.Address))
	}
	return nil
}

// Debug answers nothing and changes nothing: it is how the HTTP API's
// /debug/pprof routes (a process's own, and an agent's relayed to a
// server) check that the caller's token grants operator:write before they
// serve a profile. It is answered by the process called, never forwarded.
func (e *Operator) Debug(ctx context.Context, args *wrpc.RequestHeader, reply *struct{}) error {
	return nil
}

// Status describes this member's own Raft state; applied is its FSM's
// last applied index.
func (n *Node) Status(applied uint64) wrpc.RaftStatus {
	r := n.raft
	addr, id := r.LeaderWithID()
	out := wrpc.RaftStatus{
		ID: n.cfg.NodeID, Address: n.addr, State: r.State().String(), Term: r.CurrentTerm(),
		LastIndex: r.LastIndex(), CommitIndex: r.CommitIndex(), AppliedIndex: applied,
		Leader: string(addr), LeaderID: string(id),
	}
	if last := r.LastContact(); !last.IsZero() && r.State() != raft.Leader {
		out.LastContact = time.Since(last) // raft keeps real time
	}
	return out
}

// RaftGetConfiguration lists the Raft peers (`weft operator raft list-peers`).
func (e *Operator) RaftGetConfiguration(ctx context.Context, args *wrpc.RequestHeader, reply *wrpc.RaftConfigurationResponse) error {
	if done, err := e.Node.ForwardRead(ctx, "Operator.RaftGetConfiguration", args, args, reply); done {
		return err
	}
	servers, err := e.Node.Servers()
	if err != nil {
		return err
	}
	reply.Servers = servers
	e.Meta(&reply.ResponseMeta)
	return nil
}

// RaftRemovePeer removes a peer (typically a failed one) from the Raft
// configuration. It is refused for an unknown peer.
func (e *Operator) RaftRemovePeer(ctx context.Context, args *wrpc.RaftRemovePeerRequest, reply *wrpc.WriteResponse) error {
	if done, err := e.Node.ForwardWrite(ctx, "Operator.RaftRemovePeer", args, reply); done {
		return err
	}
	if args.ID == "" && args.Address == "" {
		return wrpc.Errorf(wrpc.CodeBadRequest, "give the peer's id or address")
	}
	f := e.Node.raft.GetConfiguration()
	if err := f.Error(); err != nil {
		return err
	}
	for _, srv := range f.Configuration().Servers {
		if args.ID != "" && string(srv.ID) == args.ID || args.Address != "" && string(srv.Address) == args.Address {
			rf := e.Node.raft.RemoveServer(srv.ID, 0, 0)
			if err := rf.Error(); err != nil {
				return fmt.Errorf("remove peer %s: %w", srv.ID, err)
			}
			reply.Index = rf.Index()
			return nil
		}
	}
	return fmt.Errorf("no raft peer with id %q or address %q: %w", args.ID, args.Address, wrpc.ErrNotFound)
}

// Members lists the serf pool as this process sees it, servers (or
// routers) before agents.
func (e *Operator) Members(ctx context.Context, args *wrpc.RequestHeader, reply *wrpc.MembersResponse) error {
	if e.Node.serf == nil {
		return errStarting
	}
	for _, m := range e.Node.serf.Members() {
		reply.Members = append(reply.Members, memberInfo(m))
	}
	sort.Slice(reply.Members, func(i, j int) bool {
		a, b := reply.Members[i], reply.Members[j]
		if a.Role != b.Role {
			return a.Role > b.Role // servers first
		}
		return a.Name < b.Name
	})
	return nil
}

func memberInfo(m serf.Member) wrpc.Member {
	status := m.Status.String()
	switch m.Status {
	case serf.StatusLeaving:
		status = "left"
	case serf.StatusNone:
		status = "unknown"
	}
	tags := make(map[string]string, len(m.Tags))
	for k, v := range m.Tags {
		tags[k] = v
	}
	return wrpc.Member{Name: m.Name, Address: net.JoinHostPort(m.Addr.String(), strconv.Itoa(int(m.Port))),
		Role: m.Tags[gossip.TagRole], Status: status, Tags: tags}
}
