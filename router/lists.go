package router

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"strings"

	"github.com/weft-sched/weft/router/fedstate"
	wrpc "github.com/weft-sched/weft/rpc"
)

// Nodes through the routers: the list merges every reachable
// sub-cluster's answer, each row naming its sub-cluster, and names the
// sub-clusters that could not be listed; one node's status, drain and
// secret go to its sub-cluster.

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

// findNode resolves a node given to a router: SUBCLUSTER.NODE, or a node
// ID exactly one reachable sub-cluster has.
func (r *Router) findNode(ctx context.Context, st *fedstate.State, hdr *wrpc.RequestHeader, id string) (*fedstate.Subcluster, string, error) {
	if sc, local, ok := scoped(st, id); ok {
		return sc, local, nil
	}
	var found []*fedstate.Subcluster
	var unreachable []string
	for _, sc := range st.Subclusters() {
		if !sc.State.Reachable() {
			unreachable = append(unreachable, fmt.Sprintf("%s (%s)", sc.ID, sc.State))
			continue
		}
		req := &wrpc.NodeStatusRequest{RequestHeader: wrpc.RequestHeader{AuthToken: hdr.AuthToken, AllowStale: true}, ID: id}
		callCtx, cancel := context.WithTimeout(ctx, fanoutTimeout)
		err := wrpc.NewClient(sc.Servers, r.serverPool).Call(callCtx, "Node.Status", req, new(wrpc.NodeStatusResponse))
		cancel()
		switch {
		case err == nil:
			found = append(found, sc)
		case wrpc.ErrorCode(err) == wrpc.CodeNotFound:
		case wrpc.IsRetryable(err):
			unreachable = append(unreachable, fmt.Sprintf("%s (%s)", sc.ID, firstLine(err.Error())))
		default:
			return nil, "", err
		}
	}
	switch len(found) {
	case 1:
		return found[0], id, nil
	case 0:
		msg := fmt.Sprintf("node %s not found in any sub-cluster", id)
		if len(unreachable) > 0 {
			msg += "; not asked or not answering: " + strings.Join(unreachable, ", ")
		}
		return nil, "", wrpc.Errorf(wrpc.CodeNotFound, "%s", msg)
	}
	names := make([]string, len(found))
	for i, sc := range found {
		names[i] = sc.ID + "." + id
	}
	return nil, "", wrpc.Errorf(wrpc.CodeConflict, "node %s is in several sub-clusters: name one of %s", id, strings.Join(names, ", "))
}

// Status returns a node and its containers from its sub-cluster.
func (e *Node) Status(ctx context.Context, args *wrpc.NodeStatusRequest, reply *wrpc.NodeStatusResponse) error {
	if done, err := e.r.node.ForwardRead(ctx, "Node.Status", &args.RequestHeader, args, reply); done {
		return err
	}
	st := e.r.fsm.State()
	sc, localID, err := e.r.findNode(ctx, st, &args.RequestHeader, args.ID)
	if err != nil {
		return err
	}
	local := *args
	local.ID = localID
	if err := e.r.callSubcluster(ctx, sc, "node "+args.ID, "Node.Status", &local, reply); err != nil {
		return err
	}
	reply.Node.Subcluster = sc.ID
	for i := range reply.Containers {
		renameContainer(st, sc, &reply.Containers[i])
	}
	return nil
}

// Drain drains a node in its sub-cluster.
func (e *Node) Drain(ctx context.Context, args *wrpc.NodeDrainRequest, reply *wrpc.WriteResponse) error {
	sc, localID, err := e.r.findNode(ctx, e.r.fsm.State(), &args.RequestHeader, args.ID)
	if err != nil {
		return err
	}
	local := *args
	local.ID = localID
	return e.r.callSubcluster(ctx, sc, "node "+args.ID, "Node.Drain", &local, reply)
}

// ResetSecret resets a node's secret in its sub-cluster.
func (e *Node) ResetSecret(ctx context.Context, args *wrpc.NodeResetSecretRequest, reply *wrpc.WriteResponse) error {
	sc, localID, err := e.r.findNode(ctx, e.r.fsm.State(), &args.RequestHeader, args.ID)
	if err != nil {
		return err
	}
	local := *args
	local.ID = localID
	return e.r.callSubcluster(ctx, sc, "node "+args.ID, "Node.ResetSecret", &local, reply)
}
