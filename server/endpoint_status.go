package server

import (
	"context"

	"github.com/weft-sched/weft/fsm"
	wrpc "github.com/weft-sched/weft/rpc"
	"github.com/weft-sched/weft/scheduler"
)

// Status answers questions about the cluster itself. Ping, Leader, Peers
// and Members are answered by whichever server is asked.
type Status struct{ srv *Server }

// Ping answers at once; clients use it to check a server is reachable.
func (e *Status) Ping(ctx context.Context, args *wrpc.RequestHeader, reply *struct{}) error {
	return nil
}

// Leader returns the leader this server knows of.
func (e *Status) Leader(ctx context.Context, args *wrpc.RequestHeader, reply *wrpc.LeaderResponse) error {
	addr, id := e.srv.raft.LeaderWithID()
	reply.Address, reply.ID = string(addr), string(id)
	return nil
}

// Self names the answering server: its ID and RPC address. Servers ask it
// of a serf member before they trust it with Raft (raftnode's verifyPeer).
func (e *Status) Self(ctx context.Context, args *wrpc.RequestHeader, reply *wrpc.SelfResponse) error {
	reply.ID, reply.Address = e.srv.config.NodeID, e.srv.rpcAddr
	return nil
}

// Peers returns the addresses in this server's Raft configuration.
func (e *Status) Peers(ctx context.Context, args *wrpc.RequestHeader, reply *wrpc.PeersResponse) error {
	f := e.srv.raft.GetConfiguration()
	if err := f.Error(); err != nil {
		return err
	}
	for _, s := range f.Configuration().Servers {
		reply.Peers = append(reply.Peers, string(s.Address))
	}
	return nil
}

// Cluster summarises the cluster for `weft status`.
func (e *Status) Cluster(ctx context.Context, args *wrpc.RequestHeader, reply *wrpc.ClusterStatus) error {
	if done, err := e.srv.forwardRead(ctx, "Status.Cluster", args, args, reply); done {
		return err
	}
	servers, err := e.srv.raftServers()
	if err != nil {
		return err
	}
	return e.srv.blockingQuery(ctx, args, &reply.ResponseMeta, func(st *fsm.State) (uint64, error) {
		addr, _ := e.srv.raft.LeaderWithID()
		reply.Leader = string(addr)
		reply.Servers = servers
		reply.Nodes = wrpc.NodeCounts{}
		reply.RunningGuaranteed, reply.RunningOpportunistic, reply.Queued = 0, 0, 0
		reply.Capacity, reply.UsedGuaranteed, reply.UsedOpportunistic = scheduler.Resources{}, scheduler.Resources{}, scheduler.Resources{}
		for _, n := range st.Nodes() {
			switch n.Status {
			case scheduler.NodeDown:
				reply.Nodes.Down++
				continue
			case scheduler.NodeDraining:
				reply.Nodes.Draining++ // its containers still run: counted below
			default:
				reply.Nodes.Ready++
			}
			reply.Capacity = reply.Capacity.Add(n.Capacity)
			reply.UsedGuaranteed = reply.UsedGuaranteed.Add(n.AllocatedGuaranteed)
			reply.UsedOpportunistic = reply.UsedOpportunistic.Add(n.AllocatedOpportunistic)
			reply.RunningGuaranteed += n.RunningGuaranteed
			reply.RunningOpportunistic += n.RunningOpportunistic
			reply.Queued += n.Queued
		}
		reply.Apps = map[string]int{}
		for _, a := range st.Apps() {
			reply.Apps[string(a.State)]++
		}
		reply.Raft = e.srv.raftStatus()
		return st.Index(), nil
	})
}

// Raft reports this server's own Raft state (any server answers for
// itself): its role, term and indexes, and the leader it knows.
func (e *Status) Raft(ctx context.Context, args *wrpc.RequestHeader, reply *wrpc.RaftStatus) error {
	*reply = e.srv.raftStatus()
	return nil
}

// raftStatus describes this server's own Raft state.
func (s *Server) raftStatus() wrpc.RaftStatus { return s.node.Status(s.fsm.State().Index()) }

// raftServers describes the Raft configuration as this server sees it.
func (s *Server) raftServers() ([]wrpc.RaftServer, error) { return s.node.Servers() }
