package router

import (
	"cmp"
	"context"
	"slices"

	"github.com/weft-sched/weft/router/fedstate"
	wrpc "github.com/weft-sched/weft/rpc"
)

// Node and queue lists through the routers: every reachable sub-cluster's
// answer merged, each row naming its sub-cluster, and the sub-clusters
// that could not be listed named.

// Node is the node API a router serves.
type Node struct{ r *Router }

// List merges every reachable sub-cluster's nodes.
func (e *Node) List(ctx context.Context, args *wrpc.NodeListRequest, reply *wrpc.NodeListResponse) error {
	if done, err := e.r.node.ForwardRead(ctx, "Node.List", &args.RequestHeader, args, reply); done {
		return err
	}
	if args.MinQueryIndex > 0 {
		e.r.mergedWait(ctx, args.MaxWait)
	}
	st := e.r.fsm.State()
	local := *args
	local.MinQueryIndex, local.AllowStale = 0, true
	unreachable, err := e.r.fanOut(ctx, st, "Node.List", &local, func() any { return new(wrpc.NodeListResponse) },
		func(sc *fedstate.Subcluster, ans any) {
			for _, n := range ans.(*wrpc.NodeListResponse).Nodes {
				n.Subcluster = sc.ID
				reply.Nodes = append(reply.Nodes, n)
			}
		})
	if err != nil {
		return err
	}
	slices.SortFunc(reply.Nodes, func(a, b wrpc.NodeInfo) int {
		return cmp.Or(cmp.Compare(a.Subcluster, b.Subcluster), cmp.Compare(a.ID, b.ID))
	})
	reply.Unreachable, reply.Index, reply.KnownLeader = unreachable, st.Index(), true
	return nil
}
