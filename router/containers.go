package router

import (
	"cmp"
	"context"
	"fmt"
	"slices"

	"github.com/weft-sched/weft/router/fedstate"
	wrpc "github.com/weft-sched/weft/rpc"
	"github.com/weft-sched/weft/scheduler"
)

// Container is the container API a router serves: an app's containers
// from its home, a node's from its sub-cluster, every container merged
// otherwise; each named SUBCLUSTER.ID.
type Container struct{ r *Router }

// List lists containers (see Container).
func (e *Container) List(ctx context.Context, args *wrpc.ContainerListRequest, reply *wrpc.ContainerListResponse) error {
	if done, err := e.r.node.ForwardRead(ctx, "Container.List", &args.RequestHeader, args, reply); done {
		return err
	}
	st := e.r.fsm.State()
	local := *args
	var only *fedstate.Subcluster
	var spans []string // a spanning app's other sub-clusters
	if args.AppID != "" {
		sc, localID, fedID, err := (&App{e.r}).home(ctx, st, args.AppID, args.AuthToken)
		if wrpc.ErrorCode(err) == wrpc.CodeNotFound {
			// As a sub-cluster answers about an app it lacks, or one the
			// caller may not read: no containers.
			reply.Containers, reply.Index, reply.KnownLeader = []wrpc.ContainerInfo{}, st.Index(), true
			return nil
		}
		if err != nil {
			return err
		}
		only, local.AppID = sc, localID
		if h := st.AppHome(fedID); h != nil && args.NodeID == "" {
			spans = h.Spans
		}
	}
	if args.NodeID != "" {
		sc, localID, err := e.r.findNode(ctx, st, &args.RequestHeader, args.NodeID)
		if err != nil {
			return err
		}
		if only != nil && only != sc {
			reply.Index, reply.KnownLeader = st.Index(), true
			return nil // the app's home has no containers on another sub-cluster's node
		}
		only, local.NodeID = sc, localID
	}
	if only != nil {
		if err := e.r.callSubcluster(ctx, only, "containers", "Container.List", &local, reply); err != nil {
			return err
		}
		for i := range reply.Containers {
			renameContainer(st, only, &reply.Containers[i])
		}
		for _, id := range spans {
			sc := st.Subcluster(id)
			if sc == nil {
				continue
			}
			part := wrpc.ContainerListRequest{RequestHeader: wrpc.RequestHeader{AuthToken: args.AuthToken, AllowStale: true}, AppID: args.AppID}
			var ans wrpc.ContainerListResponse
			callCtx, cancel := context.WithTimeout(ctx, fanoutTimeout)
			err := e.r.callSubcluster(callCtx, sc, "containers", "Container.List", &part, &ans)
			cancel()
			if err != nil {
				reply.Unreachable = append(reply.Unreachable, fmt.Sprintf("%s (%s)", sc.ID, firstLine(err.Error())))
				continue
			}
			for _, c := range ans.Containers {
				renameContainer(st, sc, &c)
				reply.Containers = append(reply.Containers, c)
			}
		}
		return nil
	}
	if args.MinQueryIndex > 0 {
		e.r.mergedWait(ctx, args.MaxWait)
	}
	local.MinQueryIndex, local.AllowStale = 0, true
	unreachable, err := e.r.fanOut(ctx, st, "Container.List", &local, func() any { return new(wrpc.ContainerListResponse) },
		func(sc *fedstate.Subcluster, ans any) {
			for _, c := range ans.(*wrpc.ContainerListResponse).Containers {
				renameContainer(st, sc, &c)
				reply.Containers = append(reply.Containers, c)
			}
		})
	if err != nil {
		return err
	}
	slices.SortFunc(reply.Containers, func(a, b wrpc.ContainerInfo) int {
		return cmp.Or(scheduler.CompareIDs(a.AppID, b.AppID), scheduler.CompareIDs(a.ID, b.ID))
	})
	reply.Unreachable, reply.Index, reply.KnownLeader = unreachable, st.Index(), true
	return nil
}

// Logs reads a container's output from its sub-cluster (which checks the
// caller's token and relays the read to the container's agent).
func (e *Container) Logs(ctx context.Context, args *wrpc.ContainerLogsRequest, reply *wrpc.ContainerLogsResponse) error {
	sc, localID, ok := scoped(e.r.fsm.State(), args.ID)
	if !ok {
		return containerNotFound(args.ID)
	}
	local := *args
	local.ID = localID
	err := e.r.callSubcluster(ctx, sc, "container "+args.ID, "Container.Logs", &local, reply)
	if wrpc.ErrorCode(err) == wrpc.CodeNotFound {
		// The containers of a spanning app's unmanaged AM carry their
		// sub-cluster in their own IDs (SUBCLUSTER.c-…): the name through
		// the routers is the ID itself.
		local.ID = args.ID
		if err2 := e.r.callSubcluster(ctx, sc, "container "+args.ID, "Container.Logs", &local, reply); err2 == nil ||
			wrpc.ErrorCode(err2) != wrpc.CodeNotFound {
			return err2
		}
		return containerNotFound(args.ID)
	}
	return err
}

// containerNotFound is the answer about a container nothing has, and
// about one the caller may not read (its sub-cluster answers not_found for
// that too): the same.
func containerNotFound(id string) error {
	return wrpc.Errorf(wrpc.CodeNotFound, "container %s not found (through a router a container is SUBCLUSTER.ID, as 'weft container list' shows; a token finds only the containers of queues it may read)", id)
}
