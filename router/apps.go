package router

import (
	"context"
	"errors"
	"fmt"
	"net"
	"slices"
	"strings"
	"time"

	"github.com/weft-sched/weft/router/fedstate"
	wrpc "github.com/weft-sched/weft/rpc"
	"github.com/weft-sched/weft/scheduler"
	"github.com/weft-sched/weft/scheduler/federation"
)

// Apps through the routers (SPEC §18): App.Submit chooses the app's home
// by its queue's policy, records the mapping through the routers' Raft
// *before* it submits there, and submits with the client's request ID;
// App.Status goes to the home. The app's ID is the routers'
// (fedstate.AppIDPrefix), unique federation-wide; its home knows it by its
// own ID, recorded in the mapping.
//
// Never twice: a submission moves on to the next-ranked sub-cluster only
// when the home refused it (a bad request, a queue it lacks, no node big
// enough) or could not be reached at all (every server refused the
// connection: nothing was sent). Any other failure — a timeout, a
// connection lost after the request went out, no leader there — leaves
// the home as it is and the client gets a retryable error: its retry
// carries the same request ID to the same home, whose servers answer a
// request ID they applied with their first answer.

// App is the app API a router serves.
type App struct{ r *Router }

// submitAttempt bounds one submission to one sub-cluster.
const submitAttempt = 10 * time.Second

// Submit places a new app in the federation.
func (e *App) Submit(ctx context.Context, args *wrpc.AppSubmitRequest, reply *wrpc.AppSubmitResponse) error {
	spec := args.Spec
	spec.SetDefaults()
	if err := spec.Validate(); err != nil {
		return wrpc.Errorf(wrpc.CodeBadRequest, "invalid app: %v", err)
	}
	if args.RequestID == "" {
		args.RequestID = wrpc.NewRequestID()
	}
	if err := args.ValidateRequestID(); err != nil {
		return err
	}
	if done, err := e.r.node.ForwardWrite(ctx, "App.Submit", args, reply); done {
		return err
	}
	queue := scheduler.SubmitQueuePath(spec.Queue)
	if err := e.r.checkToken(ctx, args.AuthToken, wrpc.CapQueueSubmit, queue); err != nil {
		return fmt.Errorf("App.Submit: %w", err) // before the mapping is written
	}
	demand := spec.AMResources
	for i := 0; i < spec.DShell.NumContainers; i++ {
		demand = demand.Add(spec.DShell.Resources)
	}
	now := e.r.clock.Now().UnixNano()
	res, _, err := e.r.apply(ctx, fedstate.HomePutType, &fedstate.HomePutRequest{RequestID: args.RequestID, Queue: queue,
		User: spec.User, Demand: demand, Seed: fedstate.Seed(args.RequestID), Now: now})
	if err != nil {
		return err
	}
	h := res.(*fedstate.AppHome)
	// A mapping this call did not create is a retry's: an earlier call,
	// through any router, may have sent the app to its home before it
	// failed, so it is in doubt until the home answers, as IN_DOUBT is.
	maybeSent := h.CreatedAt != now
	for {
		switch h.State {
		case fedstate.HomeSubmitted:
			reply.AppID, reply.RequestID = h.AppID, args.RequestID
			return nil
		case fedstate.HomeFailed:
			return wrpc.Errorf(wrpc.CodeBadRequest, "no sub-cluster took the app: %s", tries(h))
		}
		sc := e.r.fsm.State().Subcluster(h.Home)
		if sc == nil {
			return wrpc.Errorf(wrpc.CodeUnavailable, "the app's home %s is not known to the routers", h.Home)
		}
		inDoubt := h.State == fedstate.HomeInDoubt || maybeSent
		if inDoubt && sc.State == federation.StateDecommissioned {
			// The operator retired the home: their word that it will not
			// come back with the app (the fence).
			res, _, err := e.r.apply(ctx, fedstate.HomeAdvanceType, &fedstate.HomeAdvanceRequest{AppID: h.AppID, From: h.Home,
				Outcome: fedstate.OutcomeFenced, Message: "the sub-cluster was decommissioned", Now: e.r.clock.Now().UnixNano()})
			if err != nil {
				return err
			}
			h, maybeSent = res.(*fedstate.AppHome), false
			continue
		}
		var local wrpc.AppSubmitResponse
		callCtx, cancel := context.WithTimeout(ctx, submitAttempt)
		err := wrpc.NewClient(sc.Servers, e.r.serverPool).Call(callCtx, "App.Submit", args, &local)
		cancel()
		now := e.r.clock.Now().UnixNano()
		switch {
		case err == nil:
			res, _, err := e.r.apply(ctx, fedstate.HomeSettleType, &fedstate.HomeSettleRequest{AppID: h.AppID, Home: h.Home,
				State: fedstate.HomeSubmitted, LocalID: local.AppID, Now: now})
			if err != nil {
				return err
			}
			h = res.(*fedstate.AppHome)
		case !refused(err) && neverReached(err) && inDoubt:
			// An earlier try may have reached it: the app is there or
			// nowhere, and only its answer tells which.
			code := wrpc.CodeUnavailable
			if !sc.State.Reachable() {
				code = wrpc.CodeUnreachable
			}
			return wrpc.Errorf(code, "the app %s may have reached sub-cluster %s (%s) before it stopped answering; it is submitted there or nowhere, never twice: retry once %s answers",
				h.AppID, h.Home, sc.State, h.Home)
		case refused(err) || neverReached(err):
			outcome := fedstate.OutcomeRefused
			if !refused(err) {
				outcome = fedstate.OutcomeUnreachable
			}
			res, _, aerr := e.r.apply(ctx, fedstate.HomeAdvanceType, &fedstate.HomeAdvanceRequest{AppID: h.AppID, From: h.Home,
				Outcome: outcome, Message: firstLine(err.Error()), Now: now})
			if aerr != nil {
				return aerr
			}
			h, maybeSent = res.(*fedstate.AppHome), false
		case wrpc.ErrorCode(err) == wrpc.CodePermissionDenied:
			return err // the caller's token: no other sub-cluster should be asked on it
		default:
			if h.State != fedstate.HomeInDoubt {
				if _, _, serr := e.r.apply(ctx, fedstate.HomeSettleType, &fedstate.HomeSettleRequest{AppID: h.AppID, Home: h.Home,
					State: fedstate.HomeInDoubt, Now: now}); serr != nil {
					return serr
				}
			}
			return wrpc.Errorf(wrpc.CodeUnavailable, "the app %s was sent to sub-cluster %s, which did not answer (%s); retrying the request resolves it",
				h.AppID, h.Home, firstLine(err.Error()))
		}
	}
}

// refused reports whether a sub-cluster answered that it will not take
// the app: it changed nothing there.
func refused(err error) bool {
	switch wrpc.ErrorCode(err) {
	case wrpc.CodeBadRequest, wrpc.CodeNotFound, wrpc.CodeConflict, wrpc.CodeTooLarge:
		return true
	}
	return false
}

// neverReached reports whether every server of a sub-cluster refused the
// connection: the request was never sent.
func neverReached(err error) bool {
	var ce *wrpc.CallError
	if !errors.As(err, &ce) || len(ce.Tried) == 0 {
		return false
	}
	for _, t := range ce.Tried {
		var op *net.OpError
		if !errors.As(t.Err, &op) || op.Op != "dial" {
			return false
		}
	}
	return true
}

func tries(h *fedstate.AppHome) string {
	parts := make([]string, len(h.Tries))
	for i, t := range h.Tries {
		parts[i] = fmt.Sprintf("%s %s (%s)", t.Subcluster, t.Outcome, t.Message)
	}
	if len(parts) == 0 {
		return "none was RUNNING"
	}
	return strings.Join(parts, "; ")
}

func firstLine(s string) string {
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		return s[:i]
	}
	return s
}

// List merges every reachable sub-cluster's apps: those submitted through
// the routers under the routers' IDs, the others as SUBCLUSTER.ID, each
// with its home. A sub-cluster that does not answer is named in
// Unreachable; a LOST or DECOMMISSIONED one is not asked.
func (e *App) List(ctx context.Context, args *wrpc.AppListRequest, reply *wrpc.AppListResponse) error {
	if done, err := e.r.node.ForwardRead(ctx, "App.List", &args.RequestHeader, args, reply); done {
		return err
	}
	if args.MinQueryIndex > 0 {
		e.r.mergedWait(ctx, args.MaxWait)
	}
	st := e.r.fsm.State()
	local := *args
	local.MinQueryIndex, local.AllowStale = 0, true
	parts := map[string]wrpc.ContainerCounts{} // spanning apps' containers outside their homes
	unreachable, err := e.r.fanOut(ctx, st, "App.List", &local, func() any { return new(wrpc.AppListResponse) },
		func(sc *fedstate.Subcluster, ans any) {
			for _, a := range ans.(*wrpc.AppListResponse).Apps {
				if a.UnmanagedFor != "" {
					parts[a.ID] = addCounts(parts[a.ID], a.Containers) // a part of an app its home lists
					continue
				}
				if h := st.AppHomeByLocal(sc.ID, a.ID); h != nil {
					a.ID = h.AppID
				} else {
					a.ID = sc.ID + "." + a.ID
				}
				a.Home = sc.ID
				renameApp(st, sc, &a)
				reply.Apps = append(reply.Apps, a)
			}
		})
	if err != nil {
		return err
	}
	reply.Unreachable = unreachable
	for i := range reply.Apps {
		if p, ok := parts[reply.Apps[i].ID]; ok {
			reply.Apps[i].Containers = addCounts(reply.Apps[i].Containers, p)
		}
	}
	slices.SortFunc(reply.Apps, func(a, b wrpc.AppInfo) int { return scheduler.CompareIDs(a.ID, b.ID) })
	reply.Index = st.Index()
	reply.KnownLeader = true
	return nil
}

// Kill kills an app at its home.
func (e *App) Kill(ctx context.Context, args *wrpc.AppRequest, reply *wrpc.WriteResponse) error {
	sc, localID, _, err := e.home(ctx, e.r.fsm.State(), args.AppID, args.AuthToken)
	if err != nil {
		return err
	}
	local := *args
	local.AppID = localID
	if err := e.r.callSubcluster(ctx, sc, "app "+args.AppID, "App.Kill", &local, reply); err != nil {
		return orAppNotFound(err, args.AppID)
	}
	if h := e.r.fsm.State().AppHome(args.AppID); h != nil && len(h.Spans) > 0 {
		e.r.killSpans(ctx, e.r.fsm.State(), h, args.RequestHeader)
	}
	return nil
}

// home resolves an app ID given to a router: the routers' own (app-fN)
// through their mapping, or SUBCLUSTER.ID for an app submitted to a
// sub-cluster directly. What the routers answer themselves, about an app
// not (yet) in a sub-cluster, is answered only to a caller who may read
// its queue: to anyone else, as to everyone about an ID nothing has, it
// is not found.
func (e *App) home(ctx context.Context, st *fedstate.State, id, secret string) (sc *fedstate.Subcluster, localID, fedID string, err error) {
	if h := st.AppHome(id); h != nil {
		if h.State != fedstate.HomeSubmitted {
			if err := e.r.checkToken(ctx, secret, wrpc.CapQueueRead, scheduler.SubmitQueuePath(h.Queue)); err != nil {
				if wrpc.ErrorCode(err) == wrpc.CodePermissionDenied {
					return nil, "", "", appNotFound(id)
				}
				return nil, "", "", err
			}
		}
		switch {
		case h.State == fedstate.HomeFailed:
			return nil, "", "", wrpc.Errorf(wrpc.CodeNotFound, "app %s was never submitted: %s", id, tries(h))
		case h.State != fedstate.HomeSubmitted:
			return nil, "", "", wrpc.Errorf(wrpc.CodeUnavailable, "app %s is being submitted to %s", id, h.Home)
		}
		sc, localID, fedID = st.Subcluster(h.Home), h.LocalID, h.AppID
	} else if scID, local, ok := strings.Cut(id, "."); ok && st.Subcluster(scID) != nil {
		sc, localID, fedID = st.Subcluster(scID), local, id
	}
	if sc == nil {
		return nil, "", "", appNotFound(id)
	}
	return sc, localID, fedID, nil
}

// appNotFound is the answer about an app nothing has, and about one the
// caller may not read (its home answers not_found for that too): the
// same, so that no answer tells a caller whether an app it may not see
// exists.
func appNotFound(id string) error {
	return wrpc.Errorf(wrpc.CodeNotFound, "app %s not found (through a router, an app is app-fN, or SUBCLUSTER.ID for one submitted to a sub-cluster directly; a token finds only the apps of queues it may read)", id)
}

// orAppNotFound turns a home's not_found about an app into appNotFound:
// the home's message names its own ID for the app.
func orAppNotFound(err error, id string) error {
	if wrpc.ErrorCode(err) == wrpc.CodeNotFound {
		return appNotFound(id)
	}
	return err
}

// Status returns an app from its home, under the routers' ID, with the
// home named.
func (e *App) Status(ctx context.Context, args *wrpc.AppRequest, reply *wrpc.AppStatusResponse) error {
	if done, err := e.r.node.ForwardRead(ctx, "App.Status", &args.RequestHeader, args, reply); done {
		return err
	}
	sc, localID, fedID, err := e.home(ctx, e.r.fsm.State(), args.AppID, args.AuthToken)
	if err != nil {
		return err
	}
	local := *args
	local.AppID = localID // a blocking index is the home's: the last answer came from it
	if err := e.r.callSubcluster(ctx, sc, "app "+args.AppID, "App.Status", &local, reply); err != nil {
		return orAppNotFound(err, args.AppID)
	}
	st := e.r.fsm.State()
	reply.App.ID, reply.App.Home = fedID, sc.ID
	renameApp(st, sc, &reply.App)
	if h := st.AppHome(fedID); h != nil && len(h.Spans) > 0 {
		// A spanning app: its containers in every sub-cluster, the home's
		// part first; the totals count them all.
		reply.App.Spans = append([]wrpc.AppSpan{{Subcluster: sc.ID, Home: true, State: reply.App.State, Containers: reply.App.Containers}},
			e.r.spanParts(ctx, st, h, args.RequestHeader)...)
		for _, p := range reply.App.Spans[1:] {
			reply.App.Containers = addCounts(reply.App.Containers, p.Containers)
		}
	}
	return nil
}

// addCounts adds two apps' (or parts') container counts.
func addCounts(a, b wrpc.ContainerCounts) wrpc.ContainerCounts {
	return wrpc.ContainerCounts{Allocated: a.Allocated + b.Allocated, Queued: a.Queued + b.Queued, Running: a.Running + b.Running,
		Completed: a.Completed + b.Completed}
}
