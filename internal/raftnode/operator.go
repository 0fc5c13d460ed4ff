package raftnode

import (
	"context"
	"encoding/base64"
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
// operator gossip keyring`). The process registers them with the
// capabilities it chooses.
type Operator struct {
	Node *Node
	// Meta fills what a read says of its freshness.
	Meta   func(*wrpc.ResponseMeta)
	Logger hclog.Logger
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

// The gossip keyring methods (SPEC §15, `weft operator gossip keyring`)
// act on the gossip pool, not on Raft: the answering process broadcasts
// the change with serf to every member, each of which applies it to its
// keyring and rewrites its keyring file. They need no leader, so keys can
// be rotated while Raft has none.

// KeyringList lists the gossip keys the members hold, and how many hold
// each and use it as their primary key.
func (e *Operator) KeyringList(ctx context.Context, args *wrpc.KeyringRequest, reply *wrpc.KeyringResponse) error {
	km, err := e.keyManager()
	if err != nil {
		return err
	}
	resp, err := km.ListKeys()
	return keyringAnswer(resp, err, reply)
}

// KeyringInstall adds a key to every member's keyring. Members decrypt
// with any key of their keyring but encrypt with the primary one, so a
// key is installed everywhere before it is made primary.
func (e *Operator) KeyringInstall(ctx context.Context, args *wrpc.KeyringRequest, reply *wrpc.KeyringResponse) error {
	key, km, err := e.keyringChange(args)
	if err != nil {
		return err
	}
	resp, err := km.InstallKey(key)
	if err := keyringAnswer(resp, err, reply); err != nil {
		return err
	}
	e.Logger.Info("gossip key installed", "members", reply.Members, "answered", reply.Responses, "failed", reply.Failed)
	return nil
}

// KeyringUse makes an installed key every member's primary key.
func (e *Operator) KeyringUse(ctx context.Context, args *wrpc.KeyringRequest, reply *wrpc.KeyringResponse) error {
	key, km, err := e.keyringChange(args)
	if err != nil {
		return err
	}
	resp, err := km.UseKey(key)
	if err := keyringAnswer(resp, err, reply); err != nil {
		return err
	}
	e.Logger.Info("gossip primary key changed", "members", reply.Members, "answered", reply.Responses, "failed", reply.Failed)
	return nil
}

// KeyringRemove removes a key from every member's keyring. It is refused
// while the key is any member's primary key.
func (e *Operator) KeyringRemove(ctx context.Context, args *wrpc.KeyringRequest, reply *wrpc.KeyringResponse) error {
	key, km, err := e.keyringChange(args)
	if err != nil {
		return err
	}
	list, err := km.ListKeys()
	if list == nil || list.NumNodes == 0 && err != nil {
		return fmt.Errorf("list gossip keys before removing one: %w", err)
	}
	if n := list.PrimaryKeys[key]; n > 0 {
		return wrpc.Errorf(wrpc.CodeConflict, "key: it is the primary gossip key of %d of %d members; make another key primary first ('weft operator gossip keyring -use KEY')", n, list.NumNodes)
	}
	resp, err := km.RemoveKey(key)
	if err := keyringAnswer(resp, err, reply); err != nil {
		return err
	}
	e.Logger.Info("gossip key removed", "members", reply.Members, "answered", reply.Responses, "failed", reply.Failed)
	return nil
}

// keyringChange checks a request naming a key and returns the key in the
// canonical base64 serf compares keys in.
func (e *Operator) keyringChange(args *wrpc.KeyringRequest) (string, *serf.KeyManager, error) {
	raw, err := gossip.ParseKey(args.Key)
	if err != nil {
		return "", nil, wrpc.Errorf(wrpc.CodeBadRequest, "key: %v", err)
	}
	km, err := e.keyManager()
	if err != nil {
		return "", nil, err
	}
	return base64.StdEncoding.EncodeToString(raw), km, nil
}

// keyManager returns serf's key manager, or a conflict error when this
// process gossips in plaintext and so has no keyring to change.
func (e *Operator) keyManager() (*serf.KeyManager, error) {
	if e.Node.serf == nil {
		return nil, errStarting
	}
	if !e.Node.serf.EncryptionEnabled() {
		return nil, wrpc.Errorf(wrpc.CodeConflict, "gossip encryption is off on this %s: start every member of its gossip pool with -encrypt KEY (see docs/security.md)", e.Node.cfg.Role)
	}
	return e.Node.serf.KeyManager(), nil
}

// keyringAnswer fills reply from serf's answer. serf's error reports
// members that failed or did not answer, which the reply names; only a
// broadcast that reached nobody is an error of the call.
func keyringAnswer(resp *serf.KeyResponse, err error, reply *wrpc.KeyringResponse) error {
	if resp == nil || resp.NumNodes == 0 && err != nil {
		return wrpc.Errorf(wrpc.CodeUnavailable, "gossip keyring broadcast: %v", err)
	}
	reply.Members, reply.Responses, reply.Failed = resp.NumNodes, resp.NumResp, resp.NumErr
	if len(resp.Messages) > 0 {
		reply.Messages = resp.Messages
	}
	for k, n := range resp.Keys {
		reply.Keys = append(reply.Keys, wrpc.GossipKey{Key: k, Members: n, PrimaryMembers: resp.PrimaryKeys[k]})
	}
	sort.Slice(reply.Keys, func(i, j int) bool { return reply.Keys[i].Key < reply.Keys[j].Key })
	return nil
}
