package router

import (
	"context"

	"github.com/weft-sched/weft/router/fedstate"
	wrpc "github.com/weft-sched/weft/rpc"
)

// Cluster totals every reachable sub-cluster for `weft status`: nodes,
// capacity, use and apps summed; the servers and Raft shown are the
// routers'.
func (e *Status) Cluster(ctx context.Context, args *wrpc.RequestHeader, reply *wrpc.ClusterStatus) error {
	if done, err := e.r.node.ForwardRead(ctx, "Status.Cluster", args, args, reply); done {
		return err
	}
	if args.MinQueryIndex > 0 {
		e.r.mergedWait(ctx, args.MaxWait)
	}
	servers, err := e.r.node.Servers()
	if err != nil {
		return err
	}
	st := e.r.fsm.State()
	local := *args
	local.MinQueryIndex, local.AllowStale = 0, true
	reply.Apps = map[string]int{}
	unreachable, err := e.r.fanOut(ctx, st, "Status.Cluster", &local, func() any { return new(wrpc.ClusterStatus) },
		func(sc *fedstate.Subcluster, ans any) {
			c := ans.(*wrpc.ClusterStatus)
			reply.Subclusters = append(reply.Subclusters, sc.ID)
			reply.Nodes.Ready += c.Nodes.Ready
			reply.Nodes.Draining += c.Nodes.Draining
			reply.Nodes.Down += c.Nodes.Down
			reply.Capacity = reply.Capacity.Add(c.Capacity)
			reply.UsedGuaranteed = reply.UsedGuaranteed.Add(c.UsedGuaranteed)
			reply.UsedOpportunistic = reply.UsedOpportunistic.Add(c.UsedOpportunistic)
			reply.RunningGuaranteed += c.RunningGuaranteed
			reply.RunningOpportunistic += c.RunningOpportunistic
			reply.Queued += c.Queued
			for state, n := range c.Apps {
				reply.Apps[state] += n
			}
		})
	if err != nil {
		return err
	}
	addr, _ := e.r.raft.LeaderWithID()
	reply.Leader, reply.Servers, reply.Unreachable = string(addr), servers, unreachable
	reply.Raft = e.r.node.Status(st.Index())
	e.r.setMeta(&reply.ResponseMeta, st.Index())
	return nil
}

// Raft reports this router's own Raft state.
func (e *Status) Raft(ctx context.Context, args *wrpc.RequestHeader, reply *wrpc.RaftStatus) error {
	*reply = e.r.node.Status(e.r.fsm.State().Index())
	return nil
}

// Operator holds what a router adds to the operator methods it shares
// with servers (raftnode.Operator).
type Operator struct{ r *Router }

// WorkloadKeyRotate rotates the workload key of every reachable
// sub-cluster (each signs its own workload tokens); the answer is the
// last sub-cluster's.
func (e *Operator) WorkloadKeyRotate(ctx context.Context, args *wrpc.RequestHeader, reply *wrpc.WorkloadKeyRotateResponse) error {
	if done, err := e.r.node.ForwardWrite(ctx, "Operator.WorkloadKeyRotate", args, reply); done {
		return err
	}
	_, _, err := e.r.broadcast(ctx, e.r.fsm.State(), "Operator.WorkloadKeyRotate", args,
		func() any { return new(wrpc.WorkloadKeyRotateResponse) },
		func(_ *fedstate.Subcluster, ans any) { *reply = *ans.(*wrpc.WorkloadKeyRotateResponse) })
	return err
}
