package router

import (
	"context"
	"strconv"
	"strings"
	"time"

	"github.com/weft-sched/weft/router/fedstate"
	wrpc "github.com/weft-sched/weft/rpc"
	"github.com/weft-sched/weft/scheduler/federation"
)

// Apps spanning sub-clusters (SPEC §18, federation part 2). The AMRMProxy
// on the AM's node splits the AM's asks among sub-clusters; in each other
// sub-cluster it uses, the app needs an unmanaged AM — an app record with
// no AM container, under the federation's app ID, whose AM token that
// sub-cluster mints. The routers are the only party both sides trust: a
// secondary never holds the home's workload keys, and a proxy's agent
// certificate alone proves nothing about an app. So RegisterSpan has the
// home check the AM's token (AM.Verify), records the span through the
// routers' Raft (status, kill and lists find the app's parts from it), and
// only then creates the unmanaged AM with a router's certificate
// (App.SubmitUnmanaged).

// spanCallTimeout bounds each call RegisterSpan makes to a sub-cluster.
const spanCallTimeout = 10 * time.Second

// RegisterSpan creates (or brings to the AM's attempt) the unmanaged AM
// of an app in another sub-cluster, for the AMRMProxy of the app's AM.
func (e *Federation) RegisterSpan(ctx context.Context, args *wrpc.FederationRegisterSpanRequest, reply *wrpc.FederationRegisterSpanResponse) error {
	for _, f := range []struct{ field, id string }{{"home", args.Home}, {"subcluster", args.Subcluster}} {
		if err := federation.ValidateID(f.id); err != nil {
			return wrpc.Errorf(wrpc.CodeBadRequest, "%s: %v", f.field, err)
		}
	}
	switch {
	case args.Home == args.Subcluster:
		return wrpc.Errorf(wrpc.CodeBadRequest, "subcluster: %s is the app's home; a span is another sub-cluster", args.Subcluster)
	case args.AppID == "" || len(args.AppID) > fedstate.MaxStringLen:
		return wrpc.Errorf(wrpc.CodeBadRequest, "app_id: give the app's ID at its home (at most %d bytes)", fedstate.MaxStringLen)
	case args.Attempt <= 0:
		return wrpc.Errorf(wrpc.CodeBadRequest, "attempt: must be positive, not %d", args.Attempt)
	case args.Token == "":
		return wrpc.Errorf(wrpc.CodePermissionDenied, "token: the AM's token is required")
	}
	if done, err := e.r.node.ForwardWrite(ctx, "Federation.RegisterSpan", args, reply); done {
		return err
	}
	st := e.r.fsm.State()
	home, target := st.Subcluster(args.Home), st.Subcluster(args.Subcluster)
	switch {
	case home == nil:
		return wrpc.Errorf(wrpc.CodeNotFound, "home: no sub-cluster %s", args.Home)
	case target == nil:
		return wrpc.Errorf(wrpc.CodeNotFound, "subcluster: no sub-cluster %s", args.Subcluster)
	case target.State != federation.StateRunning:
		return wrpc.Errorf(wrpc.CodeUnreachable, "subcluster: %s is %s; apps span only into RUNNING sub-clusters", target.ID, target.State)
	}
	h := st.AppHomeByLocal(args.Home, args.AppID)
	if h == nil {
		return wrpc.Errorf(wrpc.CodeNotFound, "app %s of sub-cluster %s was not submitted through the routers: only such apps span sub-clusters", args.AppID, args.Home)
	}
	// The home says whether the token is its AM's, and what the app is.
	var app wrpc.AMVerifyResponse
	callCtx, cancel := context.WithTimeout(ctx, spanCallTimeout)
	err := e.r.callSubcluster(callCtx, home, "app "+h.AppID, "AM.Verify",
		&wrpc.AMVerifyRequest{AppID: args.AppID, Attempt: args.Attempt, Token: args.Token}, &app)
	cancel()
	if err != nil {
		return err
	}
	if _, _, err := e.r.apply(ctx, fedstate.SpanAddType, &fedstate.SpanAddRequest{AppID: h.AppID, Subcluster: target.ID,
		Now: e.r.clock.Now().UnixNano()}); err != nil {
		return err
	}
	// The request ID names the unmanaged attempt, so a retry through any
	// router is answered with the first answer.
	req := &wrpc.AppSubmitUnmanagedRequest{
		RequestHeader: wrpc.RequestHeader{RequestID: spanRequestID(h.AppID, target.ID, args.Attempt)},
		AppID:         h.AppID, Home: home.ID, Subcluster: target.ID, Attempt: args.Attempt,
		Queue: app.Queue, User: app.User, Priority: app.Priority, Name: app.Name,
	}
	var created wrpc.AppSubmitUnmanagedResponse
	callCtx, cancel = context.WithTimeout(ctx, spanCallTimeout)
	err = e.r.callSubcluster(callCtx, target, "app "+h.AppID, "App.SubmitUnmanaged", req, &created)
	cancel()
	if err != nil {
		return err
	}
	*reply = wrpc.FederationRegisterSpanResponse{FederationID: created.AppID, Attempt: created.Attempt, AMToken: created.AMToken,
		Servers: append([]string(nil), target.Servers...)}
	e.r.logger.Info("an app spans into another sub-cluster", "app", h.AppID, "home", home.ID, "subcluster", target.ID, "attempt", args.Attempt)
	return nil
}

// spanRequestID is the request ID of the unmanaged attempt of app in sc.
func spanRequestID(app, sc string, attempt int) string {
	id := "span_" + strings.NewReplacer(".", "_").Replace(app+"_"+sc) + "_" + strconv.Itoa(attempt)
	return id[:min(len(id), wrpc.MaxRequestIDLength)]
}

// spanParts reads a spanning app's part in each sub-cluster it spans into
// (its home's part is read by the caller): what App.Status shows.
func (r *Router) spanParts(ctx context.Context, st *fedstate.State, h *fedstate.AppHome, hdr wrpc.RequestHeader) []wrpc.AppSpan {
	var parts []wrpc.AppSpan
	for _, id := range h.Spans {
		part := wrpc.AppSpan{Subcluster: id}
		sc := st.Subcluster(id)
		if sc == nil {
			part.Unreachable = "forgotten by the routers"
			parts = append(parts, part)
			continue
		}
		var ans wrpc.AppStatusResponse
		local := wrpc.AppRequest{RequestHeader: wrpc.RequestHeader{AuthToken: hdr.AuthToken, AllowStale: true}, AppID: h.AppID}
		callCtx, cancel := context.WithTimeout(ctx, fanoutTimeout)
		err := r.callSubcluster(callCtx, sc, "app "+h.AppID, "App.Status", &local, &ans)
		cancel()
		if err != nil {
			part.Unreachable = firstLine(err.Error())
		} else {
			part.State, part.Containers = ans.App.State, ans.App.Containers
		}
		parts = append(parts, part)
	}
	return parts
}

// killSpans ends a killed app's unmanaged AMs (their containers stop
// there). A sub-cluster that cannot be told now ends its unmanaged AM by
// itself once the AMRMProxy stops calling (unmanaged_am_timeout).
func (r *Router) killSpans(ctx context.Context, st *fedstate.State, h *fedstate.AppHome, hdr wrpc.RequestHeader) {
	for _, id := range h.Spans {
		sc := st.Subcluster(id)
		if sc == nil {
			continue
		}
		local := wrpc.AppRequest{RequestHeader: wrpc.RequestHeader{AuthToken: hdr.AuthToken}, AppID: h.AppID}
		callCtx, cancel := context.WithTimeout(ctx, fanoutTimeout)
		err := r.callSubcluster(callCtx, sc, "app "+h.AppID, "App.Kill", &local, &wrpc.WriteResponse{})
		cancel()
		if err != nil && wrpc.ErrorCode(err) != wrpc.CodeNotFound {
			r.logger.Warn("could not kill a killed app's part in another sub-cluster; it ends there when its AMRMProxy stops calling",
				"app", h.AppID, "subcluster", id, "error", err)
		}
	}
}
