package agent

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/weft-sched/weft/internal/identity"
	"github.com/weft-sched/weft/internal/metrics"
	wrpc "github.com/weft-sched/weft/rpc"
	"github.com/weft-sched/weft/scheduler"
)

// amrmProxy is the AM protocol on the agent (SPEC §8, §10): the AMs this
// agent launched talk to it, and it splits each Allocate. Opportunistic
// asks are allocated here by the distributed scheduler and answered at
// once, with no server round trip; guaranteed asks, releases, promotions
// and the AM's counters go to the servers through the agent's retrying
// client (in the background when the AM already has containers to
// start). When the servers cannot be reached it still answers
// opportunistic asks (a partial answer) and relays the releases and
// counters later. With opportunistic.distributed =
// false it forwards opportunistic asks to the leader too.
type amrmProxy struct {
	a *Agent

	mu       sync.Mutex
	attempts map[attemptKey]*proxyAttempt
}

type attemptKey struct {
	app     string
	attempt int
}

// proxyAttempt is what the proxy remembers of one AM attempt.
type proxyAttempt struct {
	// minted maps the containers this proxy allocated, that may still run,
	// to their nodes' addresses: releasing one stops it on its node.
	minted map[string]string
	// releases the servers have not heard of yet (they were unreachable).
	releases []string
	// fallback marks opportunistic asks forwarded as guaranteed (not
	// enforced, and no node could take them): their guaranteed twin must
	// be withdrawn once they no longer need it.
	fallback map[uint64]bool
	// refused is the servers' final refusal of a background relay (the
	// attempt is over, say): the AM's next call gets it.
	refused error
	// renewed is an AM token the servers renewed in answer to a
	// background relay: the AM's next answer carries it.
	renewed string
	// span is set when the agent's sub-cluster is federated: the
	// attempt's parts in other sub-clusters (amrmfed.go).
	span *spanState
	// counters are the latest the AM reported (SPEC §19), and
	// countersSent whether the servers have them: an Allocate the proxy
	// answers alone relays them when they changed, and until the servers
	// have them each call carries them, even if the AM's does not.
	counters     scheduler.Counters
	countersSent bool
	// blacklist is the attempt's node blacklist as the AM made it with its
	// additions and removals; heldBlacklist as the servers last said they
	// hold it, and blacklistIgnored whether they said it is out of force.
	// The proxy keeps its own allocations off blacklist at once, and sends
	// the servers what they do not hold yet with each call until they do.
	blacklist        []string
	heldBlacklist    []string
	blacklistIgnored bool
	// unmet is the opportunistic demand the attempt's last Allocate left
	// unplaced: the agent's heartbeat reports the sum, and the leader deals
	// windows of its list by it.
	unmet int
}

// blacklistDelta returns what the servers must add to and take off the
// blacklist they hold to hold the AM's.
func (at *proxyAttempt) blacklistDelta() (add, remove []string) {
	for _, id := range at.blacklist {
		if !slices.Contains(at.heldBlacklist, id) {
			add = append(add, id)
		}
	}
	for _, id := range at.heldBlacklist {
		if !slices.Contains(at.blacklist, id) {
			remove = append(remove, id)
		}
	}
	return add, remove
}

// avoid returns the nodes the proxy keeps the attempt's containers off:
// its blacklist, unless the servers said it is out of force.
func (at *proxyAttempt) avoid() scheduler.NodeSet {
	if at.blacklistIgnored || len(at.blacklist) == 0 {
		return nil
	}
	s := make(scheduler.NodeSet, len(at.blacklist))
	for _, id := range at.blacklist {
		s[id] = struct{}{}
	}
	return s
}

func newAMRMProxy(a *Agent) *amrmProxy {
	return &amrmProxy{a: a, attempts: map[attemptKey]*proxyAttempt{}}
}

func (p *amrmProxy) attempt(app string, attempt int) *proxyAttempt {
	k := attemptKey{app, attempt}
	at, ok := p.attempts[k]
	if !ok {
		at = &proxyAttempt{minted: map[string]string{}, fallback: map[uint64]bool{}}
		p.attempts[k] = at
	}
	return at
}

// forget drops what the proxy remembers of attempts whose AM no longer
// runs here, and ends their unmanaged AMs in other sub-clusters (in the
// background).
func (p *amrmProxy) forget() {
	p.mu.Lock()
	var spans []*spanState
	for k, at := range p.attempts {
		if _, runs := p.a.mgr.runningAM(k.app, k.attempt); !runs {
			delete(p.attempts, k)
			if at.span != nil {
				spans = append(spans, at.span)
			}
		}
	}
	p.mu.Unlock()
	for _, sp := range spans {
		p.a.goFunc(func() {
			p.finishSpans(p.a.ctx, sp, scheduler.AppKilled, "the app's AM no longer runs in its home sub-cluster "+sp.home)
		})
	}
}

// sweepInterval is how often the proxy looks for AMs that stopped without
// finishing, whose unmanaged AMs elsewhere must end.
const sweepInterval = 5 * time.Second

// sweepLoop runs forget every sweepInterval until the agent shuts down.
func (p *amrmProxy) sweepLoop() {
	tick := p.a.clock.NewTicker(sweepInterval)
	defer tick.Stop()
	for {
		select {
		case <-tick.C():
			p.forget()
		case <-p.a.ctx.Done():
			return
		}
	}
}

// callServers sends an Allocate to the servers: the home's alone, or, for
// a spanning attempt, split among the sub-clusters (amrmfed.go). twins
// are the ask IDs of opportunistic fallbacks, which stay home; deliver
// says whether the AM gets this answer (not a background relay's).
func (p *amrmProxy) callServers(ctx context.Context, at *proxyAttempt, fwd *wrpc.AMAllocateRequest, twins map[uint64]bool,
	reply *wrpc.AMAllocateResponse, deliver bool) error {
	if at.span == nil || p.a.fed.subcluster() == "" {
		return p.a.client.Call(ctx, "AM.Allocate", fwd, reply)
	}
	return p.callSpanning(ctx, at.span, fwd, twins, reply, deliver)
}

// checkAM admits only the AMs this agent launched: the token must be a
// valid AM token of (app, attempt) for this node, and name the AM
// container that runs here (SPEC §15). The servers check the token again.
func (p *amrmProxy) checkAM(ctx context.Context, app string, attempt int, token string) error {
	claims, err := p.a.verifyToken(ctx, token)
	if err != nil {
		return denied("app %s attempt %d: AM token: %v", app, attempt, err)
	}
	if claims.Kind != identity.KindAM || claims.AppID != app || claims.Attempt != attempt {
		return denied("app %s attempt %d: the token is a %s token of app %s attempt %d", app, attempt, claims.Kind, claims.AppID, claims.Attempt)
	}
	if am, runs := p.a.mgr.runningAM(app, attempt); !runs || am != claims.ContainerID || claims.NodeID != p.a.config.NodeID {
		return denied("app %s attempt %d: no AM with this token runs on node %s; an AM talks to the AMRMProxy of its own node",
			app, attempt, p.a.config.NodeID)
	}
	return p.a.checkCaller(ctx, fmt.Sprintf("app %s attempt %d", app, attempt), claims.User, claims.UID)
}

// Register relays AM.Register for an AM running on this node.
func (p *amrmProxy) Register(ctx context.Context, args *wrpc.AMRegisterRequest, reply *wrpc.AMRegisterResponse) error {
	if err := p.checkAM(ctx, args.AppID, args.Attempt, args.Token); err != nil {
		return err
	}
	p.forget()
	if err := p.a.client.Call(ctx, "AM.Register", args, reply); err != nil {
		return err
	}
	if sc := p.a.fed.subcluster(); sc != "" {
		// A federated sub-cluster's app may span others: what its
		// splits need is its home and queue.
		p.mu.Lock()
		if at := p.attempt(args.AppID, args.Attempt); at.span == nil {
			at.span = newSpanState(sc, reply.Queue)
		}
		p.mu.Unlock()
	}
	return nil
}

// Finish relays AM.Finish and forgets the attempt. Counters go to the
// home alone; when the AM sends none, the latest it reported that the
// servers have not got go with the end.
func (p *amrmProxy) Finish(ctx context.Context, args *wrpc.AMFinishRequest, reply *wrpc.WriteResponse) error {
	if err := p.checkAM(ctx, args.AppID, args.Attempt, args.Token); err != nil {
		return err
	}
	if err := scheduler.ValidateCounters(args.Counters); err != nil {
		// Refused before the app's parts elsewhere are ended for it.
		return wrpc.Errorf(wrpc.CodeBadRequest, "%v", err)
	}
	p.mu.Lock()
	at := p.attempts[attemptKey{args.AppID, args.Attempt}]
	if at != nil && args.Counters == nil && !at.countersSent {
		args.Counters = at.counters
	}
	if at != nil && len(at.releases) > 0 {
		p.a.logger.Warn("the app finished with releases the servers never heard of; its end stops them", "app", args.AppID, "count", len(at.releases))
	}
	delete(p.attempts, attemptKey{args.AppID, args.Attempt})
	p.mu.Unlock()
	if at != nil && at.span != nil {
		// Every other sub-cluster first: the app is over only once none
		// of them runs anything of it.
		p.finishSpans(ctx, at.span, scheduler.AppState(args.FinalState), "the app finished in its home sub-cluster "+at.span.home)
	}
	return p.a.client.Call(ctx, "AM.Finish", args, reply)
}

// Allocate splits an AM.Allocate (see amrmProxy).
func (p *amrmProxy) Allocate(ctx context.Context, args *wrpc.AMAllocateRequest, reply *wrpc.AMAllocateResponse) error {
	if err := p.checkAM(ctx, args.AppID, args.Attempt, args.Token); err != nil {
		return err
	}
	began, served := metrics.Start(), metrics.ServedServers
	defer func() { metrics.AMRMProxyAllocate(began, served) }()
	for i := range args.Asks {
		if args.Asks[i].ExecutionType == "" {
			args.Asks[i].ExecutionType = scheduler.Guaranteed
		}
		if err := args.Asks[i].Validate(); err != nil {
			return wrpc.Errorf(wrpc.CodeBadRequest, "%v", err) // the whole call is refused, as the servers would
		}
	}
	if err := scheduler.ValidateCounters(args.Counters); err != nil {
		return wrpc.Errorf(wrpc.CodeBadRequest, "%v", err)
	}
	view := p.a.sched.view()
	fwd := *args
	fwd.Asks, fwd.Releases = nil, nil
	var local []wrpc.ContainerInfo
	var unmet []scheduler.Ask // opportunistic demand the room could not meet

	p.mu.Lock()
	at := p.attempt(args.AppID, args.Attempt)
	if err := at.refused; err != nil {
		at.refused = nil
		p.mu.Unlock()
		return err
	}
	if len(args.BlacklistAdditions)+len(args.BlacklistRemovals) > 0 {
		list, err := scheduler.UpdateBlacklist(at.blacklist, args.BlacklistAdditions, args.BlacklistRemovals)
		if err != nil {
			p.mu.Unlock()
			return wrpc.Errorf(wrpc.CodeBadRequest, "%v", err) // refused whole, as the servers would
		}
		at.blacklist = list
	}
	fwd.BlacklistAdditions, fwd.BlacklistRemovals = at.blacklistDelta()
	avoid := at.avoid()
	wasUnmet := at.unmet
	at.unmet = 0
	perCall := p.a.sched.perCall()
	budget := perCall
	for _, ask := range args.Asks {
		if ask.ExecutionType != scheduler.Opportunistic || view.Centralized {
			fwd.Asks = append(fwd.Asks, ask)
			continue
		}
		want := ask
		if perCall > 0 {
			want.Count = min(want.Count, budget) // opportunistic.max_allocations_per_am_heartbeat
		}
		got, usable := p.allocateLocal(at, args, want, avoid)
		budget -= len(got)
		local = append(local, got...)
		rest := ask
		rest.Count -= len(got)
		// What no node can take opportunistically may be served as
		// guaranteed (the scheduler's rule; its twin, same ask ID); once
		// it no longer needs that, the twin is withdrawn with count 0.
		// The proxy's own allocations never reach the servers' count of
		// what was placed, so the twin asks for the rest only. A list of
		// only blacklisted nodes is as good as none.
		fallback := scheduler.OpportunisticFallback(ask, view.ListKnown, usable, rest.Count)
		if rest.Count > 0 && fallback == 0 {
			unmet = append(unmet, rest)
			at.unmet += rest.Count
		}
		if fallback > 0 || at.fallback[ask.AskID] {
			twin := ask
			twin.ExecutionType, twin.Count = scheduler.Guaranteed, fallback
			fwd.Asks = append(fwd.Asks, twin)
			at.fallback[ask.AskID] = fallback > 0
		}
	}
	for _, id := range args.Releases {
		if addr, ok := at.minted[id]; ok {
			p.a.goFunc(func() { p.stopOnNode(at, addr, id, args.Token) }) // the servers may never have heard of it
			continue
		}
		fwd.Releases = append(fwd.Releases, id)
	}
	fwd.Releases = append(at.releases, fwd.Releases...)
	at.releases = nil
	if args.Counters != nil && !args.Counters.Equal(at.counters) {
		at.counters, at.countersSent = args.Counters, false
	}
	if !at.countersSent && fwd.Counters == nil {
		fwd.Counters = at.counters // the servers have not got them yet
	}
	needServers := len(fwd.Asks)+len(fwd.Releases)+len(fwd.Promotions)+len(fwd.BlacklistAdditions)+len(fwd.BlacklistRemovals) > 0 ||
		!at.countersSent && at.counters != nil
	var twins map[uint64]bool
	if at.span != nil && len(at.fallback) > 0 {
		twins = make(map[uint64]bool, len(at.fallback))
		for id := range at.fallback {
			twins[id] = true
		}
	}
	unmetRose := at.unmet > wasUnmet
	p.mu.Unlock()
	if unmetRose {
		// The leader grows this agent's window for demand in the answer to
		// the heartbeat that reports it: report it now, not up to a
		// heartbeat interval later.
		p.a.pokeHeartbeat()
	}

	down := p.a.serversDown()
	if down && len(local) == 0 && len(unmet) > 0 {
		// No servers to wait on: wait for the room to be renewed instead,
		// then try again.
		select {
		case <-view.Renewed:
		case <-p.a.clock.After(p.a.config.HeartbeatInterval):
		case <-ctx.Done():
		}
		p.mu.Lock()
		for _, ask := range unmet {
			got, _ := p.allocateLocal(at, args, ask, avoid)
			local = append(local, got...)
		}
		p.mu.Unlock()
		p.keep(at, fwd.Releases)
		*reply = wrpc.AMAllocateResponse{Index: args.MinQueryIndex, Allocated: local, Partial: true, AMToken: p.takeRenewed(at)}
		at.span.give(reply)
		served = metrics.ServedLocal
		return nil
	}
	if len(local) > 0 {
		served = metrics.ServedLocal
		// The AM gets its containers now; what the servers must hear is
		// relayed in the background, and the AM's next call (its index
		// unchanged) brings back what that produced.
		if needServers && !down {
			fwd.MaxWait = time.Millisecond
			p.a.goFunc(func() { p.relay(at, &fwd, twins) })
		} else {
			p.keep(at, fwd.Releases)
		}
		*reply = wrpc.AMAllocateResponse{Index: args.MinQueryIndex, Allocated: local, Partial: down, AMToken: p.takeRenewed(at)}
		at.span.give(reply)
		return nil
	}
	if len(unmet) > 0 && (fwd.MaxWait <= 0 || fwd.MaxWait > p.a.config.HeartbeatInterval) {
		// Fresh room comes with the next list: come back for it then.
		fwd.MaxWait = p.a.config.HeartbeatInterval
	}
	if len(unmet) > 0 && at.span == nil {
		// Or sooner: the window the leader grows for this demand in the
		// answer to the heartbeat it poked.
		local, err := p.waitForRoomOrServers(ctx, at, args, &fwd, twins, unmet, avoid, view.Renewed, reply)
		if local {
			served = metrics.ServedLocal
		}
		if local || err != nil {
			return err
		}
		if renewed := p.takeRenewed(at); reply.AMToken == "" {
			reply.AMToken = renewed
		}
		return nil
	}
	if err := p.callServers(ctx, at, &fwd, twins, reply, true); err != nil {
		p.keep(at, fwd.Releases)
		return err
	}
	if renewed := p.takeRenewed(at); reply.AMToken == "" {
		reply.AMToken = renewed
	}
	p.synced(at, &fwd, reply)
	return nil
}

// demand is the opportunistic demand the AMs here left unplaced, as their
// last Allocate each.
func (p *amrmProxy) demand() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	n := 0
	for _, at := range p.attempts {
		n += at.unmet
	}
	return n
}

// keep holds releases the servers did not get, for the next relay.
func (p *amrmProxy) keep(at *proxyAttempt, releases []string) {
	if len(releases) == 0 {
		return
	}
	p.mu.Lock()
	at.releases = append(at.releases, releases...)
	p.mu.Unlock()
}

// relay sends the servers the part of an Allocate the proxy answered
// alone; if they cannot be reached, its releases wait for the next relay.
func (p *amrmProxy) relay(at *proxyAttempt, fwd *wrpc.AMAllocateRequest, twins map[uint64]bool) {
	ctx, cancel := context.WithTimeout(p.a.ctx, relayTimeout)
	defer cancel()
	var reply wrpc.AMAllocateResponse
	p.settle(at, fwd, &reply, p.callServers(ctx, at, fwd, twins, &reply, false))
}

// settle records the servers' answer to a call whose answer no AM gets
// (a relay, or a call the AM stopped waiting for): a refusal is kept for
// the AM's next call, releases that did not reach the servers go with it,
// a renewed AM token is kept for it; the rest (allocations, completions)
// the AM's next call brings again, its index not having moved.
func (p *amrmProxy) settle(at *proxyAttempt, fwd *wrpc.AMAllocateRequest, reply *wrpc.AMAllocateResponse, err error) {
	if err != nil {
		if !wrpc.IsRetryable(err) {
			p.mu.Lock()
			at.refused = err
			p.mu.Unlock()
			return
		}
		p.keep(at, fwd.Releases)
		p.a.logger.Warn("could not relay an AM's asks and releases; they go with its next call", "app", fwd.AppID, "error", err)
		return
	}
	if reply.AMToken != "" {
		p.mu.Lock()
		at.renewed = reply.AMToken
		p.mu.Unlock()
	}
	p.synced(at, fwd, reply)
}

// waitForRoomOrServers sends fwd to the servers and waits for their
// answer or for the room to be renewed (renewed closes), whichever comes
// first. Renewed room may now hold the unmet asks of args: what it does is
// the AM's answer at once (local true), and the servers' answer, when it
// comes, is settled without the AM, as is one the AM stopped waiting for.
// Otherwise the servers' answer, or their error, is the AM's.
func (p *amrmProxy) waitForRoomOrServers(ctx context.Context, at *proxyAttempt, args, fwd *wrpc.AMAllocateRequest, twins map[uint64]bool,
	unmet []scheduler.Ask, avoid scheduler.NodeSet, renewed <-chan struct{}, reply *wrpc.AMAllocateResponse) (local bool, err error) {
	type answer struct {
		mu        sync.Mutex
		done      bool
		abandoned bool
		reply     wrpc.AMAllocateResponse
		err       error
	}
	ans := &answer{}
	finished := make(chan struct{})
	p.a.goFunc(func() {
		defer close(finished)
		callCtx, cancel := context.WithTimeout(p.a.ctx, relayTimeout)
		defer cancel()
		err := p.callServers(callCtx, at, fwd, twins, &ans.reply, true)
		ans.mu.Lock()
		ans.done, ans.err = true, err
		abandoned := ans.abandoned
		ans.mu.Unlock()
		if abandoned {
			p.settle(at, fwd, &ans.reply, err)
		}
	})
	// abandon leaves the servers' answer to be settled without the AM.
	abandon := func() {
		ans.mu.Lock()
		settleHere := ans.done
		ans.abandoned = true
		ans.mu.Unlock()
		if settleHere {
			p.settle(at, fwd, &ans.reply, ans.err)
		}
	}
	for {
		select {
		case <-finished:
			if ans.err != nil {
				p.keep(at, fwd.Releases)
				return false, ans.err
			}
			*reply = ans.reply
			p.synced(at, fwd, reply)
			return false, nil
		case <-ctx.Done():
			abandon()
			return false, ctx.Err()
		case <-renewed:
		}
		renewed = nil // once: then the servers' answer
		var got []wrpc.ContainerInfo
		p.mu.Lock()
		for _, ask := range unmet {
			more, _ := p.allocateLocal(at, args, ask, avoid)
			got = append(got, more...)
			at.unmet -= len(more)
		}
		p.mu.Unlock()
		if len(got) == 0 {
			continue
		}
		abandon()
		*reply = wrpc.AMAllocateResponse{Index: args.MinQueryIndex, Allocated: got, AMToken: p.takeRenewed(at)}
		at.span.give(reply)
		return true, nil
	}
}

// takeRenewed returns (once) an AM token renewed by a background relay.
func (p *amrmProxy) takeRenewed(at *proxyAttempt) string {
	p.mu.Lock()
	defer p.mu.Unlock()
	tok := at.renewed
	at.renewed = ""
	return tok
}

// relayTimeout bounds a background relay of an AM's asks and releases.
const relayTimeout = 30 * time.Second

// synced records an answer from the servers to req.
func (p *amrmProxy) synced(at *proxyAttempt, req *wrpc.AMAllocateRequest, reply *wrpc.AMAllocateResponse) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if req.Counters != nil && req.Counters.Equal(at.counters) {
		at.countersSent = true
	}
	at.heldBlacklist, at.blacklistIgnored = reply.Blacklist, reply.BlacklistIgnored
	for _, c := range reply.Completed {
		delete(at.minted, c.ID)
	}
	if state := scheduler.AppState(reply.AppState); state.Terminal() {
		delete(p.attempts, attemptKey{req.AppID, req.Attempt})
		if sp := at.span; sp != nil {
			p.a.goFunc(func() {
				p.finishSpans(p.a.ctx, sp, state, "the app ended in its home sub-cluster "+sp.home)
			})
		}
	}
}

// allocateLocal allocates an opportunistic ask from the distributed
// scheduler's room, on no node in avoid. IDs embed this node and its
// registration epoch, so they never collide with anyone's; each container
// gets a container token this node signs with its own key (certified by
// the servers), which the container's node verifies and the servers check
// when its node reports it. It returns the containers and how many of the
// list's nodes are not in avoid. p.mu must be held.
func (p *amrmProxy) allocateLocal(at *proxyAttempt, args *wrpc.AMAllocateRequest, ask scheduler.Ask, avoid scheduler.NodeSet) ([]wrpc.ContainerInfo, int) {
	clockNow := p.a.clock.Now()
	now := clockNow.UnixNano()
	if ask.Count <= 0 {
		return nil, p.a.sched.view().ListLen
	}
	signer, certExpiry := p.a.keys.minter()
	if signer == nil || now >= certExpiry {
		return nil, p.a.sched.view().ListLen // not certified (yet): nothing this proxy allocates could start
	}
	nodes, usable := p.a.sched.allocate(ask, avoid, clockNow)
	if len(nodes) == 0 {
		return nil, usable
	}
	prefix := scheduler.AgentContainerIDPrefix + p.a.config.NodeID + "-" + strconv.FormatUint(p.a.epoch.Load(), 10) + "-"
	// The app's user and uid are the ones the leader gave this node's AM
	// container (the containers' agents take the uid from the AM's token).
	user, uid := p.a.mgr.amUser(args.AppID, args.Attempt)
	// A token lives a container token's life, or to its certificate's
	// end and a container token's life more, whichever is sooner.
	expiry := min(now+int64(identity.ContainerTokenLifetime), certExpiry+int64(identity.ContainerTokenLifetime))
	out := make([]wrpc.ContainerInfo, 0, len(nodes))
	claims := make([]identity.Claims, 0, len(nodes))
	for _, n := range nodes {
		id := prefix + strconv.FormatUint(p.a.seq.Add(1), 10)
		c := containerClaims(args.AppID, args.Attempt, id, n.NodeID, user, ask.Resources, now)
		c.Expiry, c.UID = expiry, uid
		claims = append(claims, c)
		out = append(out, wrpc.ContainerInfo{ID: id, AppID: args.AppID, Attempt: args.Attempt, NodeID: n.NodeID, NodeAddress: n.Address, Rack: n.Rack,
			AskID: ask.AskID, ExecutionType: string(scheduler.Opportunistic), State: string(scheduler.ContainerAllocated),
			Resources: ask.Resources, User: user, UID: uid, AllocatedAt: now, ExpectedDuration: ask.ExpectedDuration, Progress: args.Progress})
	}
	toks, err := signer.SignBatch(claims, now)
	if err != nil {
		p.a.logger.Error("cannot sign container tokens; the containers are not allocated", "count", len(out), "error", err)
		return nil, usable
	}
	for i := range out {
		out[i].Token = toks[i]
		at.minted[out[i].ID] = out[i].NodeAddress
	}
	return out, usable
}

// stopOnNode stops a released container this proxy allocated on its node
// (a container its node never saw needs nothing), with the AM's token. The
// proxy forgets the container only once the node has answered, so an AM
// that sends the release again reaches the node again.
func (p *amrmProxy) stopOnNode(at *proxyAttempt, addr, id, amToken string) {
	ctx, cancel := context.WithTimeout(p.a.ctx, relayTimeout)
	defer cancel()
	if err := p.a.agentPool.Call(ctx, addr, "Container.Stop", &wrpc.ContainerIDRequest{ID: id, Token: amToken}, &struct{}{}); err != nil {
		p.a.logger.Warn("could not stop a released opportunistic container on its node; the AM may release it again", "container", id, "node", addr, "error", err)
		return
	}
	p.mu.Lock()
	delete(at.minted, id)
	p.mu.Unlock()
}
