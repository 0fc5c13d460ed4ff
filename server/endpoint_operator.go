package server

import (
	"context"
	"fmt"

	wrpc "github.com/weft-sched/weft/rpc"
)

// Operator holds cluster-operator actions: on Raft (here) and on the
// gossip keyring (endpoint_keyring.go).
type Operator struct{ srv *Server }

// RaftGetConfiguration lists the Raft peers (`weft operator raft list-peers`).
func (e *Operator) RaftGetConfiguration(ctx context.Context, args *wrpc.RequestHeader, reply *wrpc.RaftConfigurationResponse) error {
	if done, err := e.srv.forwardRead(ctx, "Operator.RaftGetConfiguration", args, args, reply); done {
		return err
	}
	servers, err := e.srv.raftServers()
	if err != nil {
		return err
	}
	reply.Servers = servers
	e.srv.setMeta(&reply.ResponseMeta)
	return nil
}

// RaftRemovePeer removes a server (typically a failed one) from the Raft
// configuration. It is refused for an unknown peer.
func (e *Operator) RaftRemovePeer(ctx context.Context, args *wrpc.RaftRemovePeerRequest, reply *wrpc.WriteResponse) error {
	if done, err := e.srv.forwardWrite(ctx, "Operator.RaftRemovePeer", args, reply); done {
		return err
	}
	if args.ID == "" && args.Address == "" {
		return wrpc.Errorf(wrpc.CodeBadRequest, "give the peer's id or address")
	}
	f := e.srv.raft.GetConfiguration()
	if err := f.Error(); err != nil {
		return err
	}
	for _, srv := range f.Configuration().Servers {
		if args.ID != "" && string(srv.ID) == args.ID || args.Address != "" && string(srv.Address) == args.Address {
			rf := e.srv.raft.RemoveServer(srv.ID, 0, 0)
			if err := rf.Error(); err != nil {
				return fmt.Errorf("remove peer %s: %w", srv.ID, err)
			}
			reply.Index = rf.Index()
			return nil
		}
	}
	return fmt.Errorf("no raft peer with id %q or address %q: %w", args.ID, args.Address, wrpc.ErrNotFound)
}

// Debug answers nothing and changes nothing: it is how the HTTP API's
// /debug/pprof routes (a server's own, and an agent's relayed here) check
// that the caller's token grants operator:write before they serve a
// profile. It is answered by the server called, never forwarded.
func (e *Operator) Debug(ctx context.Context, args *wrpc.RequestHeader, reply *struct{}) error {
	return nil
}
