package server

import (
	"context"
	"fmt"
	"sort"
	"time"

	"github.com/weft-sched/weft/fsm"
	"github.com/weft-sched/weft/internal/identity"
	wrpc "github.com/weft-sched/weft/rpc"
	"github.com/weft-sched/weft/scheduler"
)

// Unmanaged AMs (SPEC §18, federation part 2). An app that spans
// sub-clusters has its AM in its home; in every other sub-cluster it
// spans into, the AMRMProxy on the AM's node asks for containers through
// an unmanaged AM: an app record there with no AM container, under the
// federation's app ID, in the same queue, RUNNING from the start. The
// trust chain: the proxy asks the routers (Federation.RegisterSpan), which
// check the AM's token with the home's servers (AM.Verify) and create the
// unmanaged AM in the other sub-cluster (App.SubmitUnmanaged), whose
// servers answer an AM token they minted; the proxy's AM.Allocate and
// AM.Finish there carry it. The leader kills an unmanaged AM it has not
// heard from for unmanaged_am_timeout: its proxy, or its node, may be gone.

// DefaultUnmanagedAMTimeout is how long the leader waits to hear from an
// unmanaged AM before it kills its app.
const DefaultUnmanagedAMTimeout = 2 * time.Minute

// Verify checks, for the routers, that Token is a valid AM token of the
// app's current attempt here (its home), exactly as an AM call is checked,
// and answers the app's queue, user, priority, name and state. A token
// that does not hold is permission_denied; an attempt that is not the
// app's current one, or an app that has ended, stale_attempt: no span is
// to be made for it. An unmanaged AM's token is refused: a span is
// vouched for by the app's home, never by another span.
//
// It is a consistent read unless the request allows a stale one: the
// routers create a span on the strength of the answer, and a follower
// behind the leader could still take an attempt that has just ended for
// the current one.
func (e *AM) Verify(ctx context.Context, args *wrpc.AMVerifyRequest, reply *wrpc.AMVerifyResponse) error {
	args.MinQueryIndex = 0 // it never blocks: not a read a fresh follower may answer
	if done, err := e.srv.forwardRead(ctx, "AM.Verify", &args.RequestHeader, args, reply); done {
		return err
	}
	app, _, err := e.srv.amAttempt(e.srv.fsm.State(), args.AppID, args.Attempt, args.Token)
	switch {
	case err != nil:
		return err
	case app.Unmanaged != nil:
		return wrpc.Errorf(wrpc.CodePermissionDenied, "app %s is an unmanaged AM's here (its AM runs in %s): ask its home", app.ID, app.Unmanaged.Home)
	case app.State.Terminal():
		return wrpc.Errorf(wrpc.CodeStale, "app %s has ended (%s): it spans nowhere", app.ID, app.State)
	}
	reply.Queue, reply.User, reply.Priority = app.Queue, app.Spec.User, app.Spec.Priority
	reply.Name, reply.State = app.Spec.Name, string(app.State)
	return nil
}

// SubmitUnmanaged creates, for the routers, the unmanaged AM of an app
// spanning into this sub-cluster, or moves it to the home's newer attempt
// (fsm.AppSubmitUnmanagedRequest says how), and answers an AM token for
// its attempt. A retry with the same request ID is applied once. Refused
// as bad_request: a cluster not in a federation, a request for another
// sub-cluster, bad fields, a queue that is not a leaf; as stale_attempt:
// an attempt older than the one held, or an app that has ended here.
func (e *App) SubmitUnmanaged(ctx context.Context, args *wrpc.AppSubmitUnmanagedRequest, reply *wrpc.AppSubmitUnmanagedResponse) error {
	if done, err := e.srv.forwardWrite(ctx, "App.SubmitUnmanaged", args, reply); done {
		return err
	}
	switch here := e.srv.config.SubclusterID; {
	case here == "":
		return wrpc.Errorf(wrpc.CodeBadRequest, "subcluster: this cluster is not in a federation (no subcluster_id): it takes no unmanaged AMs")
	case args.Subcluster != here:
		return wrpc.Errorf(wrpc.CodeBadRequest, "subcluster: this is sub-cluster %s, not %.64q", here, args.Subcluster)
	}
	now := e.srv.clock.Now()
	req := &fsm.AppSubmitUnmanagedRequest{AppID: args.AppID, Home: args.Home, Subcluster: args.Subcluster, Attempt: args.Attempt, UIDs: e.srv.config.DynamicUIDs,
		Queue: args.Queue, User: args.User, Priority: args.Priority, Name: args.Name, Now: now.UnixNano()}
	if err := req.Validate(); err != nil {
		return wrpc.Errorf(wrpc.CodeBadRequest, "invalid unmanaged AM: %v", err)
	}
	st := e.srv.fsm.State()
	if _, exists := st.App(args.AppID); !exists {
		if _, err := st.QueueConfig().CheckSubmitQueue(args.Queue); err != nil {
			return wrpc.Errorf(wrpc.CodeBadRequest, "%v", err) // as App.Submit says it
		}
	}
	_, index, err := e.srv.raftApplyRequest(ctx, &args.RequestHeader, fsm.AppSubmitUnmanagedType, req)
	if err != nil {
		return err
	}
	e.srv.unmanagedHeard(args.AppID, now)
	st = e.srv.fsm.State()
	user, uid := args.User, uint32(0)
	if a, ok := st.App(args.AppID); ok {
		user, uid = a.Spec.User, a.UID
	}
	tok, err := unmanagedAMToken(keyringOf(st), args.AppID, args.Attempt, user, uid, now)
	if err != nil {
		return noKey(err)
	}
	reply.AppID, reply.Attempt, reply.AMToken, reply.Index = args.AppID, args.Attempt, tok, index
	return nil
}

// unmanagedAMToken mints the AM token of an unmanaged AM's attempt: like
// any AM's, but naming no container, node or resources, as its attempt
// has none (amAttempt accepts such a token only for an unmanaged AM's app).
func unmanagedAMToken(ring *identity.Keyring, appID string, attempt int, user string, uid uint32, now time.Time) (string, error) {
	return ring.Sign(identity.Claims{Kind: identity.KindAM, AppID: appID, Attempt: attempt, ExecutionType: scheduler.Guaranteed,
		User: user, UID: uid, Expiry: now.Add(identity.AMTokenLifetime).UnixNano()})
}

// unmanagedHeard tells the watch an unmanaged AM was heard from.
func (s *Server) unmanagedHeard(appID string, now time.Time) {
	s.unmanagedMu.Lock()
	s.unmanaged.Heard(appID, now)
	s.unmanagedMu.Unlock()
}

// unmanagedTick kills the apps of the unmanaged AMs the watch finds gone
// (a leader duty).
func (s *Server) unmanagedTick(ctx context.Context, now time.Time) {
	s.unmanagedMu.Lock()
	gone := s.unmanaged.Tick(now, s.fsm.State())
	s.unmanagedMu.Unlock()
	for _, g := range gone {
		why := fmt.Sprintf("its AMRMProxy in sub-cluster %s has not been heard from for %s", g.Home, s.config.UnmanagedAMTimeout)
		s.logger.Warn("killing an unmanaged AM's app", "app", g.AppID, "reason", why)
		if _, _, err := s.raftApply(ctx, fsm.AppFinishType, &fsm.AppFinishRequest{AppID: g.AppID, State: scheduler.AppKilled,
			Diagnostics: why, Now: now.UnixNano()}); err != nil {
			s.logger.Error("kill a silent unmanaged AM's app", "app", g.AppID, "error", err)
		}
	}
}

// unmanagedWatch is the leader's memory of when it last heard from each
// unmanaged AM (its SubmitUnmanaged or an AM.Allocate), and the rule that
// decides when one is gone. Like liveness it is a state machine: its
// inputs are Reset, Heard and Tick(now); it reads no clock and takes no
// lock (the server serializes calls). It is not replicated: a new leader
// starts every clock afresh, so an AMRMProxy gets a whole timeout to
// find it.
type unmanagedWatch struct {
	timeout time.Duration
	heard   map[string]time.Time // by app ID
}

func newUnmanagedWatch(timeout time.Duration) *unmanagedWatch {
	return &unmanagedWatch{timeout: timeout, heard: map[string]time.Time{}}
}

// Reset forgets every clock and starts one at now for each unmanaged AM
// of apps that has not ended: a new leader's term. Every unmanaged AM is
// created through the leader after this (SubmitUnmanaged calls Heard), so
// Tick need never scan all apps.
func (w *unmanagedWatch) Reset(now time.Time, apps []*scheduler.App) {
	clear(w.heard)
	for _, a := range apps {
		if a.Unmanaged != nil && !a.State.Terminal() {
			w.heard[a.ID] = now
		}
	}
}

// Heard records that the unmanaged AM of app id was heard from at now.
func (w *unmanagedWatch) Heard(id string, now time.Time) {
	if last, ok := w.heard[id]; !ok || now.After(last) {
		w.heard[id] = now
	}
}

// unmanagedGone is the decision to kill the app of a silent unmanaged AM.
type unmanagedGone struct {
	AppID string
	Home  string
}

// appReader is what Tick reads of the replicated state.
type appReader interface {
	App(id string) (*scheduler.App, bool)
}

// Tick returns, in ID order, the unmanaged AMs not heard from for the
// timeout by now, and forgets those whose app has ended or is gone. It
// touches only the unmanaged AMs it remembers.
func (w *unmanagedWatch) Tick(now time.Time, st appReader) []unmanagedGone {
	var out []unmanagedGone
	for id, last := range w.heard {
		a, ok := st.App(id)
		if !ok || a.Unmanaged == nil || a.State.Terminal() {
			delete(w.heard, id)
			continue
		}
		if now.Sub(last) >= w.timeout {
			out = append(out, unmanagedGone{AppID: id, Home: a.Unmanaged.Home})
		}
	}
	sort.Slice(out, func(i, j int) bool { return scheduler.CompareIDs(out[i].AppID, out[j].AppID) < 0 })
	return out
}
