package router

import (
	"context"
	"fmt"

	"github.com/weft-sched/weft/router/fedstate"
	wrpc "github.com/weft-sched/weft/rpc"
)

// Queues through the routers. Each sub-cluster has its own queue
// configuration and its own shares; `queue apply` through a router applies
// one configuration to every reachable sub-cluster (broadcast), `queue
// list` lists every sub-cluster's queues, each row naming its
// sub-cluster, and `queue status` totals a queue over the sub-clusters and
// shows it in each.

// Queue is the queue API a router serves.
type Queue struct{ r *Router }

// Apply applies a queue configuration to every reachable sub-cluster (or,
// with DryRun, plans it in each).
func (e *Queue) Apply(ctx context.Context, args *wrpc.QueueApplyRequest, reply *wrpc.QueueApplyResponse) error {
	if args.Config == nil {
		return wrpc.Errorf(wrpc.CodeBadRequest, "invalid queue configuration: no configuration given")
	}
	// The sub-clusters validate it: the first refuses a bad one, and
	// nothing changes anywhere.
	if done, err := e.r.node.ForwardWrite(ctx, "Queue.Apply", args, reply); done {
		return err
	}
	st := e.r.fsm.State()
	applied, skipped, err := e.r.broadcast(ctx, st, "Queue.Apply", args, func() any { return new(wrpc.QueueApplyResponse) },
		func(sc *fedstate.Subcluster, ans any) {
			a := ans.(*wrpc.QueueApplyResponse)
			for _, w := range a.Warnings {
				reply.Warnings = append(reply.Warnings, sc.ID+": "+w)
			}
			if a.Plan != nil {
				if reply.Plan == nil {
					reply.Plan = &wrpc.QueuePlan{}
				}
				for _, q := range a.Plan.Queues {
					q.Subcluster = sc.ID
					reply.Plan.Queues = append(reply.Plan.Queues, q)
				}
				for _, p := range a.Plan.Preemptable {
					p.Subcluster, p.AppID = sc.ID, fedAppID(st, sc, p.AppID)
					reply.Plan.Preemptable = append(reply.Plan.Preemptable, p)
				}
			}
		})
	if err != nil {
		return err
	}
	for _, s := range skipped {
		reply.Warnings = append(reply.Warnings, fmt.Sprintf("%s: not applied (it cannot be reached); apply the file again once it is back", s))
	}
	reply.Subclusters, reply.Index = applied, st.Index()
	return nil
}

// List lists every reachable sub-cluster's queues.
func (e *Queue) List(ctx context.Context, args *wrpc.QueueListRequest, reply *wrpc.QueueListResponse) error {
	if done, err := e.r.node.ForwardRead(ctx, "Queue.List", &args.RequestHeader, args, reply); done {
		return err
	}
	if args.MinQueryIndex > 0 {
		e.r.mergedWait(ctx, args.MaxWait)
	}
	st := e.r.fsm.State()
	local := *args
	local.MinQueryIndex, local.AllowStale = 0, true
	first := true
	unreachable, err := e.r.fanOut(ctx, st, "Queue.List", &local, func() any { return new(wrpc.QueueListResponse) },
		func(sc *fedstate.Subcluster, ans any) {
			a := ans.(*wrpc.QueueListResponse)
			if first {
				reply.Scheduler, first = a.Scheduler, false
			}
			for _, q := range a.Queues {
				q.Subcluster = sc.ID
				reply.Queues = append(reply.Queues, q)
			}
		})
	if err != nil {
		return err
	}
	reply.Unreachable, reply.Index, reply.KnownLeader = unreachable, st.Index(), true
	return nil
}

// Status totals one queue over the sub-clusters that have it.
func (e *Queue) Status(ctx context.Context, args *wrpc.QueueStatusRequest, reply *wrpc.QueueStatusResponse) error {
	if done, err := e.r.node.ForwardRead(ctx, "Queue.Status", &args.RequestHeader, args, reply); done {
		return err
	}
	if args.MinQueryIndex > 0 {
		e.r.mergedWait(ctx, args.MaxWait)
	}
	st := e.r.fsm.State()
	local := *args
	local.MinQueryIndex, local.AllowStale = 0, true
	unreachable, err := e.r.fanOut(ctx, st, "Queue.Status", &local, func() any { return new(wrpc.QueueStatusResponse) },
		func(sc *fedstate.Subcluster, ans any) {
			q := ans.(*wrpc.QueueStatusResponse).Queue
			q.Subcluster = sc.ID
			reply.Subclusters = append(reply.Subclusters, q)
		})
	if err != nil {
		return err
	}
	if len(reply.Subclusters) == 0 {
		msg := fmt.Sprintf("queue %s not found in any sub-cluster", args.Name)
		if len(unreachable) > 0 {
			msg += fmt.Sprintf("; not asked or not answering: %v", unreachable)
		}
		return wrpc.Errorf(wrpc.CodeNotFound, "%s", msg)
	}
	total := reply.Subclusters[0]
	total.Subcluster = ""
	for _, q := range reply.Subclusters[1:] {
		total.Used, total.Pending = total.Used.Add(q.Used), total.Pending.Add(q.Pending)
		total.SteadyFairShare = total.SteadyFairShare.Add(q.SteadyFairShare)
		total.InstantaneousFairShare = total.InstantaneousFairShare.Add(q.InstantaneousFairShare)
		total.RunningApps += q.RunningApps
	}
	reply.Queue, reply.Unreachable, reply.Index, reply.KnownLeader = total, unreachable, st.Index(), true
	return nil
}
