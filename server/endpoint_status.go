package server

import (
	"context"

	"github.com/weft-sched/weft/fsm"
	wrpc "github.com/weft-sched/weft/rpc"
	"github.com/weft-sched/weft/scheduler"
)

// Status answers questions about the cluster itself (Ping, Leader, Self,
// Peers and Members, which routers answer alike, are raftnode.Operator's).
type Status struct{ srv *Server }

// Cluster summarises the cluster for `weft status`.
func (e *Status) Cluster(ctx context.Context, args *wrpc.RequestHeader, reply *wrpc.ClusterStatus) error {
	if done, err := e.srv.forwardRead(ctx, "Status.Cluster", args, args, reply); done {
		return err
	}
	servers, err := e.srv.raftServers()
	if err != nil {
		return err
	}
	watch := func(st *fsm.State) (uint64, error) { return st.Index(), nil }
	return e.srv.blockingQuery(ctx, args, &reply.ResponseMeta, watch, func(st *fsm.State) (uint64, error) {
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
