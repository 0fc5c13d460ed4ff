package router

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/weft-sched/weft/router/fedstate"
	wrpc "github.com/weft-sched/weft/rpc"
)

// How a router reaches sub-clusters for the client API (SPEC §18): one
// (an app's home, a node's or a container's sub-cluster), every one for a
// merged read (fanOut, lists.go), every one in turn for a write that
// configures the federation (broadcast: queues, ACLs, workload keys), or
// the first that answers for a read that is the same everywhere (askOne:
// ACLs).
//
// Names through a router: an app submitted through the routers is app-fN;
// anything else a sub-cluster names — an app submitted to it directly, a
// container, a node — is SUBCLUSTER.ID. A node may also be given by its
// own ID when exactly one sub-cluster has it.

// scoped splits SUBCLUSTER.ID when SUBCLUSTER is a sub-cluster st knows.
func scoped(st *fedstate.State, id string) (*fedstate.Subcluster, string, bool) {
	scID, local, ok := strings.Cut(id, ".")
	if !ok || local == "" {
		return nil, "", false
	}
	sc := st.Subcluster(scID)
	return sc, local, sc != nil
}

// fedAppID is the name through the routers of a sub-cluster's app.
func fedAppID(st *fedstate.State, sc *fedstate.Subcluster, local string) string {
	if local == "" {
		return ""
	}
	if h := st.AppHomeByLocal(sc.ID, local); h != nil {
		return h.AppID
	}
	if strings.HasPrefix(local, fedstate.AppIDPrefix) {
		return local // an unmanaged AM's record: the federation's ID already
	}
	return sc.ID + "." + local
}

// renameContainer gives a sub-cluster's container its names through the
// routers.
func renameContainer(st *fedstate.State, sc *fedstate.Subcluster, c *wrpc.ContainerInfo) {
	c.ID = scopedContainerID(sc, c.ID)
	c.AppID = fedAppID(st, sc, c.AppID)
}

// scopedContainerID is a sub-cluster's container's ID through the
// routers: SUBCLUSTER.ID, where the containers of a spanning app's
// unmanaged AM carry their sub-cluster already.
func scopedContainerID(sc *fedstate.Subcluster, id string) string {
	if strings.HasPrefix(id, sc.ID+".") {
		return id
	}
	return sc.ID + "." + id
}

// renameApp gives what a sub-cluster's app names — its AM containers,
// its preempted containers and the apps they were preempted for — their
// names through the routers.
func renameApp(st *fedstate.State, sc *fedstate.Subcluster, a *wrpc.AppInfo) {
	for i := range a.Attempts {
		if at := &a.Attempts[i]; at.ContainerID != "" {
			at.ContainerID = scopedContainerID(sc, at.ContainerID)
		}
	}
	for i := range a.Preemptions {
		p := &a.Preemptions[i]
		p.ContainerID, p.ForApp = scopedContainerID(sc, p.ContainerID), fedAppID(st, sc, p.ForApp)
	}
}

// callSubcluster calls one sub-cluster. One the routers hold LOST or
// DECOMMISSIONED is not called: the answer is Unreachable at once, which
// clients do not retry (what it holds is not lost, but it may be gone for
// long); a failure to reach one that is not is Unavailable, retried.
func (r *Router) callSubcluster(ctx context.Context, sc *fedstate.Subcluster, what, method string, args, reply any) error {
	if !sc.State.Reachable() {
		return wrpc.Errorf(wrpc.CodeUnreachable, "%s: its sub-cluster %s (%s) cannot be reached; what it holds is there when it returns", what, sc.ID, sc.State)
	}
	err := wrpc.NewClient(sc.Servers, r.serverPool).Call(ctx, method, args, reply)
	if err != nil && wrpc.IsRetryable(err) {
		return wrpc.Errorf(wrpc.CodeUnavailable, "%s: its sub-cluster %s (%s) did not answer: %s", what, sc.ID, sc.State, firstLine(err.Error()))
	}
	return err
}

// askOne asks the reachable sub-clusters in turn until one answers: for
// what every sub-cluster holds alike (the ACLs the routers write to all),
// which a sub-cluster without nodes holds as well.
func (r *Router) askOne(ctx context.Context, st *fedstate.State, method string, args, reply any) error {
	var tried []string
	for _, sc := range st.Subclusters() {
		if !sc.State.Reachable() {
			continue
		}
		callCtx, cancel := context.WithTimeout(ctx, fanoutTimeout)
		err := wrpc.NewClient(sc.Servers, r.serverPool).Call(callCtx, method, args, reply)
		cancel()
		if err == nil || !wrpc.IsRetryable(err) {
			return err
		}
		tried = append(tried, fmt.Sprintf("%s (%s)", sc.ID, firstLine(err.Error())))
	}
	if len(tried) == 0 {
		return wrpc.Errorf(wrpc.CodeUnavailable, "no sub-cluster is reachable to answer %s", method)
	}
	return wrpc.Errorf(wrpc.CodeUnavailable, "no sub-cluster answered %s: %s", method, strings.Join(tried, "; "))
}

// broadcast sends a write to every reachable sub-cluster in turn (by ID)
// and hands each answer to take. A refusal by the first one asked is the
// call's error, and nothing changed anywhere; a failure after one applied
// it is an error naming where it applied and where not, for the operator
// to repeat the write once the others answer. Sub-clusters not asked
// (LOST, DECOMMISSIONED) are returned for the answer to name.
func (r *Router) broadcast(ctx context.Context, st *fedstate.State, method string, args any, newReply func() any,
	take func(sc *fedstate.Subcluster, reply any)) (applied, skipped []string, err error) {
	for _, sc := range st.Subclusters() {
		if !sc.State.Reachable() {
			skipped = append(skipped, fmt.Sprintf("%s (%s)", sc.ID, sc.State))
			continue
		}
		reply := newReply()
		callCtx, cancel := context.WithTimeout(ctx, submitAttempt)
		err := wrpc.NewClient(sc.Servers, r.serverPool).Call(callCtx, method, args, reply)
		cancel()
		if err != nil {
			if len(applied) == 0 && !wrpc.IsRetryable(err) {
				return nil, nil, err
			}
			done := "applied nowhere yet"
			if len(applied) > 0 {
				done = "applied in " + strings.Join(applied, ", ")
			}
			outcome := "refused it"
			if wrpc.IsRetryable(err) {
				outcome = "did not answer (whether it applied it is unknown)"
			}
			// Unavailable whatever the cause: part of the write may be
			// done, and a client must not read "nothing changed" into it.
			return applied, skipped, &wrpc.Error{Code: wrpc.CodeUnavailable, Message: fmt.Sprintf(
				"%s %s; sub-cluster %s %s: %s; repeat it once every sub-cluster answers", method, done, sc.ID, outcome, firstLine(err.Error()))}
		}
		applied = append(applied, sc.ID)
		take(sc, reply)
	}
	if len(applied) == 0 {
		return nil, skipped, wrpc.Errorf(wrpc.CodeUnavailable, "%s: no sub-cluster can be reached (%s)", method, strings.Join(skipped, ", "))
	}
	return applied, skipped, nil
}

// fanOut asks every reachable sub-cluster method with args (a stale read
// there) and hands each answer to take, one at a time. It returns the
// sub-clusters it could not ask (LOST, DECOMMISSIONED) or that did not
// answer, each with why; an answer that refuses the caller (a bad request,
// a denied token) is the whole call's error, and a sub-cluster that has
// no such thing (a queue it lacks) is skipped.
func (r *Router) fanOut(ctx context.Context, st *fedstate.State, method string, args any, newReply func() any,
	take func(sc *fedstate.Subcluster, reply any)) (unreachable []string, err error) {
	for _, sc := range st.Subclusters() {
		if !sc.State.Reachable() {
			unreachable = append(unreachable, fmt.Sprintf("%s (%s)", sc.ID, sc.State))
			continue
		}
		reply := newReply()
		callCtx, cancel := context.WithTimeout(ctx, fanoutTimeout)
		err := wrpc.NewClient(sc.Servers, r.serverPool).Call(callCtx, method, args, reply)
		cancel()
		if err != nil {
			switch wrpc.ErrorCode(err) {
			case wrpc.CodePermissionDenied, wrpc.CodeBadRequest:
				return nil, err
			case wrpc.CodeNotFound:
				continue // not there: a queue one sub-cluster lacks
			}
			unreachable = append(unreachable, fmt.Sprintf("%s (%s)", sc.ID, firstLine(err.Error())))
			continue
		}
		take(sc, reply)
	}
	return unreachable, nil
}

// fanoutTimeout bounds each sub-cluster's part of a merged answer.
const fanoutTimeout = 3 * time.Second

// mergedPoll is how long a blocking merged read waits before it asks the
// sub-clusters again. A merged answer has no one index to block on (each
// sub-cluster has its own), so a client that blocks on one is answered
// when the routers' state changes or after mergedPoll, whichever is
// first: at most one fan-out a second per waiting client, not a spin.
const mergedPoll = time.Second

// mergedWait waits for a change of the routers' state, mergedPoll, the
// request's MaxWait or its end, whichever comes first.
func (r *Router) mergedWait(ctx context.Context, maxWait time.Duration) {
	wait := mergedPoll
	if maxWait > 0 {
		wait = min(wait, maxWait)
	}
	select {
	case <-r.fsm.Changed():
	case <-r.clock.After(wait):
	case <-ctx.Done():
	}
}
