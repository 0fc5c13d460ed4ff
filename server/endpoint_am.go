package server

import (
	"context"
	"sort"
	"time"

	"github.com/weft-sched/weft/fsm"
	"github.com/weft-sched/weft/internal/identity"
	wrpc "github.com/weft-sched/weft/rpc"
	"github.com/weft-sched/weft/scheduler"
)

// AM is the server side of the AM protocol; agents' AMRMProxies relay AMs'
// calls here.
type AM struct{ srv *Server }

// Register records that the AM runs (the app becomes RUNNING) and returns
// the app's spec and the cluster's size. An unmanaged AM's app runs from
// its creation: its AMRMProxy need not register, and if it does it gets
// the same answer and nothing is written.
func (e *AM) Register(ctx context.Context, args *wrpc.AMRegisterRequest, reply *wrpc.AMRegisterResponse) error {
	if done, err := e.srv.forwardWrite(ctx, "AM.Register", args, reply); done {
		return err
	}
	st := e.srv.fsm.State()
	app, _, err := e.srv.amAttempt(st, args.AppID, args.Attempt, args.Token)
	if err != nil {
		return err
	}
	if app.Unmanaged == nil {
		if _, _, err := e.srv.raftApplyRequest(ctx, &args.RequestHeader, fsm.AppRegisterType,
			&fsm.AppRegisterRequest{AppID: args.AppID, Attempt: args.Attempt, Now: e.srv.clock.Now().UnixNano()}); err != nil {
			return err
		}
	}
	reply.Spec, reply.Queue = app.Spec, app.Queue
	for _, n := range st.Nodes() {
		if n.Status == scheduler.NodeReady {
			reply.ClusterCapacity = reply.ClusterCapacity.Add(n.Capacity)
			if n.Capacity.MemoryMB > reply.MaxContainer.MemoryMB {
				reply.MaxContainer = n.Capacity
			}
		}
	}
	reply.Index = e.srv.fsm.State().Index()
	return nil
}

// Allocate records the AM's guaranteed asks and releases, allocates its
// opportunistic asks centrally, grants what it can of its promotions,
// keeps its counters when they changed, then returns the containers
// allocated to and completed for its attempt since MinQueryIndex, waiting
// up to MaxWait when there is nothing new.
func (e *AM) Allocate(ctx context.Context, args *wrpc.AMAllocateRequest, reply *wrpc.AMAllocateResponse) error {
	if done, err := e.srv.forwardWrite(ctx, "AM.Allocate", args, reply); done {
		return err
	}
	st := e.srv.fsm.State()
	app, claims, err := e.srv.amAttempt(st, args.AppID, args.Attempt, args.Token)
	if err != nil {
		if app != nil && app.State.Terminal() {
			reply.AppState = string(app.State)
			return nil
		}
		return err
	}
	if err := scheduler.ValidateCounters(args.Counters); err != nil {
		return wrpc.Errorf(wrpc.CodeBadRequest, "%v", err)
	}
	reply.AMToken = e.srv.renewAMToken(st, claims)
	if app.Unmanaged != nil {
		e.srv.unmanagedHeard(app.ID, e.srv.clock.Now())
	}
	now := e.srv.clock.Now().UnixNano()
	// A release of a container the servers never heard of is an
	// opportunistic one its node never ran (its AMRMProxy stops it there):
	// there is nothing to record. Releasing another app's is refused.
	var releases []string
	for _, id := range args.Releases {
		if _, known := st.Container(id); known {
			releases = append(releases, id)
		}
	}
	if len(releases) > 0 {
		if _, _, err := e.srv.raftApply(ctx, fsm.ContainerStopType, &fsm.ContainerStopRequest{
			AppID: args.AppID, IDs: releases, Reason: scheduler.ReasonKilled, Now: now,
		}); err != nil {
			return err
		}
	}
	if len(args.BlacklistAdditions)+len(args.BlacklistRemovals) > 0 && !app.State.Terminal() {
		// Before the asks, so that none of them is placed on a node the
		// same call blacklists.
		if _, err := scheduler.UpdateBlacklist(app.Blacklist, args.BlacklistAdditions, args.BlacklistRemovals); err != nil {
			return wrpc.Errorf(wrpc.CodeBadRequest, "%v", err)
		}
		req := &fsm.AppBlacklistRequest{AppID: args.AppID, Attempt: args.Attempt, Additions: args.BlacklistAdditions, Removals: args.BlacklistRemovals}
		if e.srv.fsm.State().AppBlacklistChanges(req) {
			if _, _, err := e.srv.raftApply(ctx, fsm.AppBlacklistType, req); err != nil {
				return err
			}
			e.srv.logger.Info("app blacklist changed", "app", args.AppID, "attempt", args.Attempt,
				"added", args.BlacklistAdditions, "removed", args.BlacklistRemovals)
		}
		if a, ok := e.srv.fsm.State().App(args.AppID); ok {
			app = a
		}
	}
	var guaranteed, opportunistic []scheduler.Ask
	for _, a := range args.Asks {
		if a.ExecutionType == "" {
			a.ExecutionType = scheduler.Guaranteed
		}
		if err := a.Validate(); err != nil {
			return wrpc.Errorf(wrpc.CodeBadRequest, "%v", err)
		}
		if largest, too := tooLarge(st.Nodes(), a.Resources); too && a.Count > 0 {
			return wrpc.Errorf(wrpc.CodeBadRequest, "ask %d: resources %s are larger than every node; the largest is %s (%s)",
				a.AskID, a.Resources, largest.ID, largest.Capacity)
		}
		if a.ExecutionType == scheduler.Opportunistic {
			opportunistic = append(opportunistic, a)
		} else {
			guaranteed = append(guaranteed, a)
		}
	}
	hdr := args.RequestHeader
	if limit := e.srv.config.UnmanagedAMTimeout / 2; app.Unmanaged != nil && (hdr.MaxWait <= 0 || hdr.MaxWait > limit) {
		// An unmanaged AM is heard from only when it calls: one waiting
		// here must be answered in time to call again before it is
		// taken for gone.
		hdr.MaxWait = limit
	}
	// Opportunistic asks reach a server when the cluster allocates them
	// centrally (the AMRMProxies forward them) or when an AM talks to the
	// servers directly: the leader allocates them from its list. What no
	// node can take opportunistically, a non-enforced ask may get as
	// guaranteed: its twin guaranteed ask (same ID) says how many.
	if len(opportunistic) > 0 && app.State == scheduler.AppRunning {
		unplaced, listKnown, listLen, err := e.srv.allocateCentral(ctx, e.srv.fsm.State(), app, args.Attempt, opportunistic, args.MinQueryIndex)
		if err != nil {
			return err
		}
		for _, ask := range opportunistic {
			if ask.EnforceExecutionType {
				continue
			}
			// The scheduler's fallback rule. The twin's count is the AM's
			// whole want: the FSM takes off what was placed since the AM's
			// index, of either type (central placements included).
			twin := ask
			twin.ExecutionType = scheduler.Guaranteed
			twin.Count = scheduler.OpportunisticFallback(ask, listKnown, listLen, ask.Count)
			guaranteed = append(guaranteed, twin)
		}
		for _, n := range unplaced {
			if n > 0 && (hdr.MaxWait <= 0 || hdr.MaxWait > time.Second) {
				hdr.MaxWait = time.Second // fresh room comes with the next list
			}
		}
	}
	if len(guaranteed) > 0 && app.State == scheduler.AppRunning {
		req := &fsm.AskUpdateRequest{AppID: args.AppID, Attempt: args.Attempt, Asks: guaranteed, SeenIndex: args.MinQueryIndex}
		if e.srv.fsm.State().AskUpdateChanges(req) {
			if _, _, err := e.srv.raftApply(ctx, fsm.AskUpdateType, req); err != nil {
				return err
			}
		}
	}
	if len(args.Promotions) > 0 && app.State == scheduler.AppRunning {
		if err := e.srv.promote(ctx, app, args.Attempt, args.Promotions, reply); err != nil {
			return err
		}
		hdr.MaxWait = time.Millisecond // the promotion results are news enough
	}
	if args.Counters != nil && !app.State.Terminal() {
		// An AM may send its counters with every call: only a change is
		// written. An ended app keeps its final counters.
		req := &fsm.AppCountersRequest{AppID: args.AppID, Attempt: args.Attempt, Counters: args.Counters}
		if e.srv.fsm.State().AppCountersChange(req) {
			if _, _, err := e.srv.raftApply(ctx, fsm.AppCountersType, req); err != nil {
				return err
			}
		}
	}
	// No watch: amAnswer reads only what changed since the AM's index.
	return e.srv.blockingQuery(ctx, &hdr, &wrpc.ResponseMeta{}, nil, func(st *fsm.State) (uint64, error) {
		index, err := amAnswer(st, args, reply)
		if app, ok := st.App(args.AppID); ok && err == nil {
			reply.Headroom = e.srv.headrooms.of(st, app)
		}
		return index, err
	})
}

// amAnswer fills an Allocate answer from st: the containers allocated to,
// completed for and paused on the AM's attempt since its MinQueryIndex,
// and its preemption warnings. It reads only the app's containers changed since
// that index (never the completed rest), and returns the index the AM has
// now seen.
func amAnswer(st *fsm.State, args *wrpc.AMAllocateRequest, reply *wrpc.AMAllocateResponse) (uint64, error) {
	reply.Allocated, reply.Completed, reply.PreemptionWarnings = reply.Allocated[:0], reply.Completed[:0], reply.PreemptionWarnings[:0]
	reply.Paused = reply.Paused[:0]
	app, ok := st.App(args.AppID)
	if !ok {
		return 0, wrpc.Errorf(wrpc.CodeNotFound, "app %s not found", args.AppID)
	}
	reply.AppState = string(app.State)
	reply.Blacklist, reply.BlacklistIgnored = app.Blacklist, blacklistIgnored(st, app)
	ring := keyringOf(st)
	index := app.CreateIndex
	if app.State.Terminal() {
		index = app.ModifyIndex
	}
	// Only what changed since the AM's index: an app's containers,
	// completed ones included, are never rescanned.
	changed := st.AppContainersChangedSince(args.AppID, args.MinQueryIndex)
	sort.Slice(changed, func(i, j int) bool { return changed[i].ID < changed[j].ID })
	news := false
	var toSign []identity.Claims // of the allocations still to start
	var signFor []int            // their places in reply.Allocated
	for _, c := range changed {
		if c.IsAM || c.Attempt != args.Attempt {
			continue
		}
		news = true
		index = max(index, c.ModifyIndex)
		node, _ := st.Node(c.NodeID) // its address, and its rack for the AM's distances
		// Containers an AMRMProxy allocated reached the AM from it,
		// not from here.
		if c.CreateIndex > args.MinQueryIndex && !c.Distributed {
			info := wrpc.NewContainerInfo(c, node)
			info.User, info.UID = app.Spec.User, app.UID
			if c.State == scheduler.ContainerAllocated { // only what is still to start needs a token
				toSign = append(toSign, containerClaims(c, app))
				signFor = append(signFor, len(reply.Allocated))
			}
			reply.Allocated = append(reply.Allocated, info)
		}
		switch c.State {
		case scheduler.ContainerCompleted:
			reply.Completed = append(reply.Completed, wrpc.NewContainerInfo(c, node))
		case scheduler.ContainerPaused:
			reply.Paused = append(reply.Paused, c.ID)
		}
	}
	if len(toSign) > 0 {
		// One signature for the lot (identity.MaxBatch to a signature).
		toks, err := ring.SignBatch(toSign)
		if err != nil {
			return 0, noKey(err)
		}
		for i, at := range signFor {
			reply.Allocated[at].Token = toks[i]
		}
	}
	if !news {
		// Nothing of the attempt changed in (MinQueryIndex, now]: the
		// AM has seen all there is up to the older of the two.
		index = max(index, min(args.MinQueryIndex, st.Index()))
	}
	for _, c := range st.PreemptionMarked() { // live and marked: few
		if c.AppID == args.AppID && !c.IsAM && c.Attempt == args.Attempt {
			reply.PreemptionWarnings = append(reply.PreemptionWarnings, c.ID)
		}
	}
	sort.Strings(reply.PreemptionWarnings)
	reply.Index = index
	return index, nil
}

// Finish ends the app as FINISHED or FAILED; an unmanaged AM's app as
// KILLED too (its AMRMProxy says so when the home app was killed). The
// app's containers are stopped, but for a managed AM's own. Counters, if
// sent, are recorded with the end, in the same write.
func (e *AM) Finish(ctx context.Context, args *wrpc.AMFinishRequest, reply *wrpc.WriteResponse) error {
	if done, err := e.srv.forwardWrite(ctx, "AM.Finish", args, reply); done {
		return err
	}
	app, _, err := e.srv.amAttempt(e.srv.fsm.State(), args.AppID, args.Attempt, args.Token)
	if err != nil {
		return err
	}
	state := scheduler.AppState(args.FinalState)
	switch {
	case state == scheduler.AppFinished || state == scheduler.AppFailed:
	case app.Unmanaged != nil && state == scheduler.AppKilled:
	case app.Unmanaged != nil:
		return wrpc.Errorf(wrpc.CodeBadRequest, "final_state must be FINISHED, FAILED or KILLED, not %.32q", args.FinalState)
	default:
		return wrpc.Errorf(wrpc.CodeBadRequest, "final_state must be FINISHED or FAILED, not %q", args.FinalState)
	}
	if err := scheduler.ValidateCounters(args.Counters); err != nil {
		return wrpc.Errorf(wrpc.CodeBadRequest, "%v", err)
	}
	_, index, err := e.srv.raftApplyRequest(ctx, &args.RequestHeader, fsm.AppFinishType, &fsm.AppFinishRequest{
		AppID: args.AppID, Attempt: args.Attempt, State: state, Diagnostics: args.Diagnostics, Now: e.srv.clock.Now().UnixNano(),
		Counters: args.Counters,
	})
	reply.Index = index
	return err
}

// blacklistIgnored reports whether app's blacklist is out of force: it
// names at least scheduler.BlacklistIgnorePercent of the READY nodes.
func blacklistIgnored(st *fsm.State, app *scheduler.App) bool {
	if len(app.Blacklist) == 0 {
		return false
	}
	isReady, ready := scheduler.ReadyIn(st.Nodes())
	return scheduler.BlacklistIgnored(app.Blacklist, isReady, ready)
}

// avoidedNodes returns the nodes placements for app must avoid: its
// blacklist, when in force.
func avoidedNodes(st *fsm.State, app *scheduler.App) scheduler.NodeSet {
	if len(app.Blacklist) == 0 {
		return nil
	}
	isReady, ready := scheduler.ReadyIn(st.Nodes())
	return scheduler.AvoidedNodes(app.Blacklist, isReady, ready)
}
