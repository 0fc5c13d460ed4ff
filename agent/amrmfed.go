package agent

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	wrpc "github.com/weft-sched/weft/rpc"
	"github.com/weft-sched/weft/scheduler"
	"github.com/weft-sched/weft/scheduler/federation"
)

// The AMRMProxy's federation interceptor (SPEC §18, "AMs spanning
// sub-clusters"). When the agent's sub-cluster belongs to a federation
// (the servers say so in every heartbeat), an AM's guaranteed asks are
// split by its queue's AMRMProxy policy (federation.Split, from the view
// the routers serve) between the home — this sub-cluster — and others.
// In each other sub-cluster it uses, the proxy holds an unmanaged AM for
// the app, which the routers create after the home has checked the AM's
// token (Federation.RegisterSpan); the proxy then speaks the AM protocol
// to that sub-cluster's servers directly, with the token they minted.
// Their answers are merged into the AM's: containers allocated there carry
// their sub-cluster in their IDs (SUBCLUSTER.c-…) and tokens that
// sub-cluster's agents verify, so the AM starts them on the foreign agents
// as on its own. Releases go back where the ID says.
//
// Opportunistic asks stay with the home's distributed scheduler: its
// least-loaded list is the home leader's, the proxy's allocations are
// signed with the home's key (which no other sub-cluster's agents hold),
// and an opportunistic container is cheap to queue at home; sending them
// out would cost a round trip to another sub-cluster for what the
// distributed scheduler exists to answer locally.
//
// Faults: a sub-cluster the routers hold LOST (or decommissioned, or
// forget) is dropped from the app — every container it held is reported
// to the AM as lost, and the AM's asks for them are split among the rest
// on its next call. A sub-cluster that fails a call is skipped for
// spanBackoff. When the app ends — its AM finishes, the home reports it
// ended, or the AM stops running here — every unmanaged AM is finished,
// which stops its containers there; a sub-cluster the proxy cannot tell
// ends it by itself (unmanaged_am_timeout).

// Bounds and timings of the interceptor.
const (
	// splitViewTTL is how long a split view from the routers is used.
	splitViewTTL = 5 * time.Second
	// spanCallTimeout bounds one non-blocking call to a sub-cluster.
	spanCallTimeout = 5 * time.Second
	// spanBackoff is how long a sub-cluster that failed a call is left
	// out of the app's splits and calls.
	spanBackoff = 5 * time.Second
	// maxNodeOwners bounds the node → sub-cluster cache of one attempt.
	maxNodeOwners = 4096
)

// agentFederation is what the agent knows of its sub-cluster's federation.
type agentFederation struct {
	mu      sync.Mutex
	info    *wrpc.AgentFederation
	routers *wrpc.Client
	// servers reaches other sub-clusters' servers; routers the routers.
	servers, routerPool *wrpc.Pool
}

func newAgentFederation(a *Agent) *agentFederation {
	f := &agentFederation{
		servers:    wrpc.NewTLSPool(a.config.Logger, a.config.TLS, wrpc.RoleServer),
		routerPool: wrpc.NewTLSPool(a.config.Logger, a.config.TLS, wrpc.RoleRouter),
	}
	f.routers = wrpc.NewClient(nil, f.routerPool)
	return f
}

// set records what the servers said of the federation (nil: none).
func (f *agentFederation) set(info *wrpc.AgentFederation) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.info = info
	if info != nil {
		f.routers.SetServers(info.Routers)
	}
}

// subcluster is this agent's sub-cluster, "" when it is not federated.
func (f *agentFederation) subcluster() string {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.info == nil {
		return ""
	}
	return f.info.Subcluster
}

func (f *agentFederation) shutdown() {
	f.servers.Shutdown()
	f.routerPool.Shutdown()
}

// spanState is what the proxy holds of one spanning AM attempt. Its
// mutex is held for a whole call to the servers: one AM's calls come one
// at a time anyway.
type spanState struct {
	mu    sync.Mutex
	home  string
	queue string
	// view is the routers' split view of the queue, fetched at viewAt.
	view   *wrpc.FederationSplitViewResponse
	viewAt time.Time
	owners map[string]string // node → sub-cluster, as the routers resolved it
	// outstanding is, per ask ID and sub-cluster, how many containers of
	// the ask that sub-cluster was asked for and has not delivered yet.
	// Only a change in what the AM wants is split (see split).
	outstanding map[uint64]map[string]*askPart
	parts       map[string]*spanPart
	// inbox holds what other sub-clusters answered that the AM has not
	// been given yet (a background relay's answer is not the AM's): the
	// next answer to the AM carries it.
	inbox wrpc.AMAllocateResponse
}

// askPart is a sub-cluster's part of one ask: the ask as it was sent
// there (its locality narrowed to that sub-cluster's nodes) and how many
// it still owes.
type askPart struct {
	ask   scheduler.Ask
	count int
}

// spanPart is the app's unmanaged AM in one other sub-cluster.
type spanPart struct {
	id      string
	fedID   string // the app's ID there (the federation's)
	attempt int
	token   string
	client  *wrpc.Client
	// index is the last answer's: the next call asks only for news.
	index uint64
	// live are the containers allocated there not yet completed.
	live map[string]wrpc.ContainerInfo
	// ended: lost, or its unmanaged AM ended; never asked again.
	ended bool
	// retryAt: after a failed call, the part is left alone until then.
	retryAt time.Time
}

func newSpanState(home, queue string) *spanState {
	return &spanState{home: home, queue: queue, owners: map[string]string{}, outstanding: map[uint64]map[string]*askPart{},
		parts: map[string]*spanPart{}}
}

// partOf is the part holding container id (IDs from other sub-clusters
// begin SUBCLUSTER.); nil for the home's.
func (s *spanState) partOf(id string) *spanPart {
	sc, _, ok := strings.Cut(id, ".")
	if !ok {
		return nil
	}
	return s.parts[sc]
}

// callSpanning is callServers for a spanning attempt: the guaranteed asks
// in fwd (twins excepted: opportunistic fallbacks stay home) are split
// among the sub-clusters, releases go where their IDs say, and the answers
// are merged into reply, which is the home's answer with the others' news.
//
// deliver is false for a background relay, whose answer the AM does not
// get: what other sub-clusters said then waits in the inbox.
func (p *amrmProxy) callSpanning(ctx context.Context, sp *spanState, fwd *wrpc.AMAllocateRequest, twins map[uint64]bool,
	reply *wrpc.AMAllocateResponse, deliver bool) (err error) {
	sp.mu.Lock()
	defer sp.mu.Unlock()
	now := p.a.clock.Now()
	p.refreshView(ctx, sp, now)
	p.dropLost(sp)
	defer func() {
		if deliver && err == nil { // an answer that fails never reaches the AM
			sp.deliverInbox(reply)
		}
	}()

	home := *fwd // the app's counters too: they are the home's alone
	home.Asks, home.Releases = nil, nil
	reqs := map[string]*wrpc.AMAllocateRequest{}
	req := func(sc string) *wrpc.AMAllocateRequest {
		if reqs[sc] == nil {
			reqs[sc] = &wrpc.AMAllocateRequest{}
		}
		return reqs[sc]
	}
	var spanning []scheduler.Ask
	for _, a := range fwd.Asks {
		if a.ExecutionType == scheduler.Guaranteed && !twins[a.AskID] {
			spanning = append(spanning, a)
		} else {
			home.Asks = append(home.Asks, a)
		}
	}
	for sc, asks := range p.split(ctx, sp, spanning, now) {
		if sc == sp.home {
			home.Asks = append(home.Asks, asks...)
		} else {
			req(sc).Asks = asks
		}
	}
	for _, id := range fwd.Releases {
		if part := sp.partOf(id); part != nil {
			if !part.ended {
				req(part.id).Releases = append(req(part.id).Releases, id)
			}
			continue
		}
		home.Releases = append(home.Releases, id)
	}
	// Every part there is: each call is also how its sub-cluster hears
	// that the unmanaged AM is alive (it ends one unheard for
	// unmanaged_am_timeout), and a part owing nothing now may be asked
	// again later.
	for id, part := range sp.parts {
		if !part.ended && (part.token != "" || sp.owed(id) > 0) {
			req(id)
		}
	}
	for sc, r := range reqs {
		if part := sp.parts[sc]; part != nil && !part.ended && part.token != "" && now.Before(part.retryAt) {
			// Failing lately: what it owes waits for it (or for the
			// routers to hold it LOST, when it goes to the others).
			delete(reqs, sc)
			continue
		}
		if !p.ensurePart(ctx, sp, sc, fwd, now) {
			// It cannot be used (it holds no unmanaged AM of the app, or
			// that ended): what it was to be asked is the home's, for
			// anywhere there.
			for _, a := range r.Asks {
				a.Locality = scheduler.Locality{}
				home.Asks = mergeAsks(home.Asks, []scheduler.Ask{a})
			}
			sp.reassign(sc, sp.home)
			delete(reqs, sc)
		}
	}
	if len(reqs) == 0 && !hasNews(&sp.inbox) {
		err := p.a.client.Call(ctx, "AM.Allocate", &home, reply)
		if err == nil {
			sp.delivered(sp.home, reply.Allocated)
		}
		return err
	}

	// Everything is sent at once and none of it waits; only when nothing
	// anywhere is new does the proxy wait, on every sub-cluster at once,
	// for the first news.
	wait := home.MaxWait
	home.MaxWait = time.Millisecond
	answers, err := p.callParts(ctx, sp, &home, reqs, reply)
	if err != nil {
		return err
	}
	sp.delivered(sp.home, reply.Allocated)
	p.merge(sp, answers, reply, now)
	if !hasNews(reply) && !hasNews(&sp.inbox) && wait > time.Millisecond {
		reads := map[string]*wrpc.AMAllocateRequest{}
		for id, part := range sp.parts {
			if !part.ended && part.token != "" && now.After(part.retryAt) {
				reads[id] = &wrpc.AMAllocateRequest{}
			}
		}
		read := wrpc.AMAllocateRequest{RequestHeader: wrpc.RequestHeader{MaxWait: wait, MinQueryIndex: reply.Index}, AppID: fwd.AppID,
			Attempt: fwd.Attempt, Token: fwd.Token}
		answers = p.waitParts(ctx, sp, &read, reads, wait, reply)
		sp.delivered(sp.home, reply.Allocated)
		p.merge(sp, answers, reply, p.a.clock.Now())
	}
	return nil
}

// give adds the inbox to an answer the proxy makes without the servers
// (its own opportunistic allocations); a nil span has none.
func (s *spanState) give(reply *wrpc.AMAllocateResponse) {
	if s == nil {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.deliverInbox(reply)
}

// deliverInbox adds what other sub-clusters said, and the AM has not
// been given, to its answer.
func (s *spanState) deliverInbox(reply *wrpc.AMAllocateResponse) {
	in := &s.inbox
	reply.Allocated = append(reply.Allocated, in.Allocated...)
	reply.Completed = append(reply.Completed, in.Completed...)
	reply.Promoted = append(reply.Promoted, in.Promoted...)
	reply.PromotionFailures = append(reply.PromotionFailures, in.PromotionFailures...)
	s.inbox = wrpc.AMAllocateResponse{}
}

// reassign moves what sub-cluster from owes to sub-cluster to.
func (s *spanState) reassign(from, to string) {
	for _, parts := range s.outstanding {
		p := parts[from]
		if p == nil {
			continue
		}
		delete(parts, from)
		if q := parts[to]; q != nil {
			q.count += p.count
			q.ask.Locality = scheduler.Locality{}
		} else {
			p.ask.Locality = scheduler.Locality{} // the home holds none of what it named
			parts[to] = p
		}
	}
}

// owed is how many containers sub-cluster sc owes the app.
func (s *spanState) owed(sc string) int {
	n := 0
	for _, parts := range s.outstanding {
		if p := parts[sc]; p != nil {
			n += p.count
		}
	}
	return n
}

// delivered counts containers the AM is about to hear of against what
// their sub-cluster owed.
func (s *spanState) delivered(sc string, cs []wrpc.ContainerInfo) {
	for _, c := range cs {
		if p := s.outstanding[c.AskID][sc]; p != nil && c.ExecutionType == string(scheduler.Guaranteed) && p.count > 0 {
			p.count--
		}
	}
}

// refreshView fetches the routers' split view when the one held is old.
// A view that cannot be fetched keeps the old one (none: everything goes
// home).
func (p *amrmProxy) refreshView(ctx context.Context, sp *spanState, now time.Time) {
	if sp.view != nil && now.Sub(sp.viewAt) < splitViewTTL {
		return
	}
	callCtx, cancel := context.WithTimeout(ctx, spanCallTimeout)
	defer cancel()
	var view wrpc.FederationSplitViewResponse
	if err := p.a.fed.routers.Call(callCtx, "Federation.SplitView", &wrpc.FederationSplitViewRequest{
		RequestHeader: wrpc.RequestHeader{AllowStale: true}, Queue: sp.queue}, &view); err != nil {
		p.a.logger.Warn("could not read the federation's split view; the app's asks go to its home meanwhile", "queue", sp.queue, "error", err)
		sp.viewAt = now // not again before splitViewTTL
		return
	}
	sp.view, sp.viewAt = &view, now
}

// dropLost ends the parts in sub-clusters the routers hold LOST or
// DECOMMISSIONED, or no longer know, and reports their live containers to
// the AM as lost (through the inbox): it asks for them again and gets
// them elsewhere.
func (p *amrmProxy) dropLost(sp *spanState) {
	if sp.view == nil {
		return
	}
	var lost []wrpc.ContainerInfo
	for id, part := range sp.parts {
		if part.ended {
			continue
		}
		why := "forgotten by the routers"
		for _, c := range sp.view.Candidates {
			if c.ID == id {
				why = string(c.State)
			}
		}
		if why != "forgotten by the routers" && why != string(federation.StateLost) && why != string(federation.StateDecommissioned) {
			continue
		}
		part.ended = true
		for _, c := range part.live {
			c.State, c.Reason = string(scheduler.ContainerCompleted), string(scheduler.ReasonLost)
			c.Diagnostics = fmt.Sprintf("its sub-cluster %s is %s", id, why)
			c.Token = ""
			lost = append(lost, c)
		}
		part.live = nil
		for _, parts := range sp.outstanding {
			delete(parts, id) // what it owed is split among the rest
		}
		p.a.logger.Warn("a sub-cluster the app spans into is gone; its containers are reported lost", "app", part.fedID,
			"subcluster", id, "state", why, "containers", len(lost))
	}
	slices.SortFunc(lost, func(a, b wrpc.ContainerInfo) int { return strings.Compare(a.ID, b.ID) })
	sp.inbox.Completed = append(sp.inbox.Completed, lost...)
}

// split turns the AM's guaranteed asks into what each sub-cluster is
// asked for. Counts are what is still wanted, so only a change is split:
// when the AM wants more than the sub-clusters owe it (a new ask, a
// container lost), the difference is divided by the queue's policy and
// added to their parts; when it wants fewer, parts are taken back from
// the largest. Re-dividing the whole count each call would move demand
// away from a sub-cluster that had just placed its part (the AM not having
// heard yet), and the AM would get more than it asked for.
func (p *amrmProxy) split(ctx context.Context, sp *spanState, asks []scheduler.Ask, now time.Time) map[string][]scheduler.Ask {
	if len(asks) == 0 {
		return nil
	}
	policy := federation.AMRMHome
	var cands []federation.Candidate
	if sp.view != nil {
		policy = sp.view.Policy
		p.resolve(ctx, sp, asks)
		for _, c := range sp.view.Candidates {
			if part := sp.parts[c.ID]; c.ID != sp.home && part != nil && (part.ended || now.Before(part.retryAt)) {
				continue // lost to this app, or failing: not asked for more
			}
			cand := federation.Candidate{ID: c.ID, State: c.State, Weight: c.Weight, Capacity: c.Capacity, Used: c.Used,
				Pending: c.Pending, Nodes: map[string]bool{}, Racks: map[string]bool{}}
			for _, r := range c.Racks {
				cand.Racks[r] = true
			}
			for node, owner := range sp.owners {
				if owner == c.ID {
					cand.Nodes[node] = true
				}
			}
			cands = append(cands, cand)
		}
	}
	out := map[string][]scheduler.Ask{}
	for _, a := range asks {
		parts := sp.outstanding[a.AskID]
		if parts == nil {
			parts = map[string]*askPart{}
			sp.outstanding[a.AskID] = parts
		}
		owed := 0
		for _, part := range parts {
			owed += part.count
		}
		switch {
		case a.Count > owed:
			more := a
			more.Count = a.Count - owed
			for sc, extra := range federation.Split(policy, sp.home, []scheduler.Ask{more}, cands) {
				for _, e := range extra {
					if part := parts[sc]; part != nil {
						part.count += e.Count
						part.ask.Locality = e.Locality
					} else {
						parts[sc] = &askPart{ask: e, count: e.Count}
					}
				}
			}
		case a.Count < owed:
			// Take back from those owing the most (ties by ID).
			for cut := owed - a.Count; cut > 0; cut-- {
				var most string
				for sc, part := range parts {
					if part.count > 0 && (most == "" || part.count > parts[most].count || part.count == parts[most].count && sc < most) {
						most = sc
					}
				}
				parts[most].count--
			}
		}
		for sc, part := range parts {
			send := part.ask
			send.Count, send.Priority, send.Resources = part.count, a.Priority, a.Resources
			out[sc] = append(out[sc], send)
			if part.count == 0 {
				delete(parts, sc) // told 0 now: it holds nothing of the ask
			}
		}
		if len(parts) == 0 {
			delete(sp.outstanding, a.AskID)
		}
	}
	return out
}

// resolve learns from the routers which sub-cluster holds the nodes the
// asks name that the cache does not know yet.
func (p *amrmProxy) resolve(ctx context.Context, sp *spanState, asks []scheduler.Ask) {
	var unknown []string
	for _, a := range asks {
		for _, n := range a.Locality.Nodes {
			if _, known := sp.owners[n]; !known && !slices.Contains(unknown, n) && len(unknown) < wrpc.MaxResolveNodes {
				unknown = append(unknown, n)
			}
		}
	}
	if len(unknown) == 0 {
		return
	}
	callCtx, cancel := context.WithTimeout(ctx, spanCallTimeout)
	defer cancel()
	var ans wrpc.FederationResolveNodesResponse
	if err := p.a.fed.routers.Call(callCtx, "Federation.ResolveNodes", &wrpc.FederationResolveNodesRequest{Nodes: unknown}, &ans); err != nil {
		p.a.logger.Warn("could not resolve the nodes an ask names; they count as unknown for now", "error", err)
		return
	}
	if len(sp.owners)+len(unknown) > maxNodeOwners {
		clear(sp.owners)
	}
	for _, n := range unknown {
		sp.owners[n] = ans.Owners[n] // "": nobody holds it (asked again only once the cache is cleared)
	}
}

// ensurePart makes sure the app has an unmanaged AM in sc, registering it
// through the routers (which check the AM's token with the home) when it
// has none; false when sc cannot be used now.
func (p *amrmProxy) ensurePart(ctx context.Context, sp *spanState, sc string, fwd *wrpc.AMAllocateRequest, now time.Time) bool {
	part := sp.parts[sc]
	switch {
	case part != nil && part.ended:
		return false
	case part != nil && now.Before(part.retryAt):
		return false
	case part != nil && part.token != "":
		return true
	}
	callCtx, cancel := context.WithTimeout(ctx, spanCallTimeout)
	defer cancel()
	var ans wrpc.FederationRegisterSpanResponse
	err := p.a.fed.routers.Call(callCtx, "Federation.RegisterSpan", &wrpc.FederationRegisterSpanRequest{
		Home: sp.home, AppID: fwd.AppID, Attempt: fwd.Attempt, Token: fwd.Token, Subcluster: sc}, &ans)
	if part == nil {
		part = &spanPart{id: sc, live: map[string]wrpc.ContainerInfo{}}
		sp.parts[sc] = part
	}
	if err != nil {
		p.a.logger.Warn("could not register the app's unmanaged AM in another sub-cluster; its asks go home meanwhile",
			"app", fwd.AppID, "subcluster", sc, "error", err)
		part.retryAt = now.Add(spanBackoff)
		if !wrpc.IsRetryable(err) && wrpc.ErrorCode(err) != wrpc.CodeUnreachable && wrpc.ErrorCode(err) != wrpc.CodeNotFound {
			part.ended = true // refused for good: the app is not the routers', or the token is not the AM's
		}
		return false
	}
	part.fedID, part.attempt, part.token = ans.FederationID, ans.Attempt, ans.AMToken
	part.client = wrpc.NewClient(ans.Servers, p.a.fed.servers)
	p.a.logger.Info("the app spans into another sub-cluster", "app", fwd.AppID, "federation_id", ans.FederationID, "subcluster", sc)
	return true
}

// partAnswer is one sub-cluster's answer (home: "").
type partAnswer struct {
	sc  string
	ans *wrpc.AMAllocateResponse
	err error
}

// callParts sends the home's request and every part's at once; the home's
// answer fills reply (its failure is the call's), the others' are
// returned.
func (p *amrmProxy) callParts(ctx context.Context, sp *spanState, home *wrpc.AMAllocateRequest, reqs map[string]*wrpc.AMAllocateRequest,
	reply *wrpc.AMAllocateResponse) ([]partAnswer, error) {
	out := make(chan partAnswer, len(reqs))
	for sc, r := range reqs {
		part := sp.parts[sc]
		r.AppID, r.Attempt, r.Token, r.MinQueryIndex, r.MaxWait = part.fedID, part.attempt, part.token, part.index, time.Millisecond
		go func() {
			callCtx, cancel := context.WithTimeout(ctx, spanCallTimeout)
			defer cancel()
			var ans wrpc.AMAllocateResponse
			err := part.client.Call(callCtx, "AM.Allocate", r, &ans)
			out <- partAnswer{sc: sc, ans: &ans, err: err}
		}()
	}
	err := p.a.client.Call(ctx, "AM.Allocate", home, reply)
	answers := make([]partAnswer, 0, len(reqs))
	for range reqs {
		answers = append(answers, <-out)
	}
	return answers, err
}

// waitParts waits for news from the home (read, a request with nothing to
// send) and from every part in reads, all at once, up to wait; the first
// to answer with news ends the others' waits. The home's answer, if it
// came, replaces reply; if the home failed, reply stays the first answer.
func (p *amrmProxy) waitParts(ctx context.Context, sp *spanState, read *wrpc.AMAllocateRequest, reads map[string]*wrpc.AMAllocateRequest,
	wait time.Duration, reply *wrpc.AMAllocateResponse) []partAnswer {
	waitCtx, cancel := context.WithCancel(ctx)
	defer cancel()
	out := make(chan partAnswer, len(reads)+1)
	for sc, r := range reads {
		part := sp.parts[sc]
		r.AppID, r.Attempt, r.Token, r.MinQueryIndex, r.MaxWait = part.fedID, part.attempt, part.token, part.index, wait
		go func() {
			var ans wrpc.AMAllocateResponse
			err := part.client.Call(waitCtx, "AM.Allocate", r, &ans)
			out <- partAnswer{sc: sc, ans: &ans, err: err}
		}()
	}
	go func() {
		var ans wrpc.AMAllocateResponse
		err := p.a.client.Call(waitCtx, "AM.Allocate", read, &ans)
		out <- partAnswer{ans: &ans, err: err}
	}()
	var answers []partAnswer
	var homeErr error
	for range len(reads) + 1 {
		got := <-out
		if waitCtx.Err() != nil && got.err != nil {
			continue // ended by the first news: nothing to merge
		}
		if got.sc == "" {
			if got.err != nil {
				homeErr = got.err
			} else {
				tok := reply.AMToken // a renewal in the first answer
				*reply = *got.ans
				if reply.AMToken == "" {
					reply.AMToken = tok
				}
			}
		} else {
			answers = append(answers, got)
		}
		if got.err == nil && (hasNews(got.ans) || got.sc == "") {
			cancel()
		}
	}
	if homeErr != nil {
		// The first answer stands: its allocations are counted as the
		// AM's already, and an error would lose them.
		p.a.logger.Debug("the home did not answer a wait; answering with what came before", "error", homeErr)
	}
	return answers
}

// merge records the parts' answers: their news goes to the inbox, their
// preemption warnings (repeated in every answer while they hold) to reply.
func (p *amrmProxy) merge(sp *spanState, answers []partAnswer, reply *wrpc.AMAllocateResponse, now time.Time) {
	for _, a := range answers {
		part := sp.parts[a.sc]
		if a.err != nil {
			switch wrpc.ErrorCode(a.err) {
			case wrpc.CodeStale, wrpc.CodePermissionDenied:
				part.token = "" // a newer attempt, or the token expired: register again
			}
			part.retryAt = now.Add(spanBackoff)
			p.a.logger.Warn("a sub-cluster the app spans into did not answer; it is left alone for a while", "app", part.fedID,
				"subcluster", a.sc, "error", a.err)
			continue
		}
		ans := a.ans
		if ans.AMToken != "" {
			part.token = ans.AMToken
		}
		part.index = max(part.index, ans.Index)
		for _, c := range ans.Allocated {
			part.live[c.ID] = c
		}
		sp.delivered(a.sc, ans.Allocated)
		for _, c := range ans.Completed {
			delete(part.live, c.ID)
		}
		in := &sp.inbox
		in.Allocated, in.Completed = append(in.Allocated, ans.Allocated...), append(in.Completed, ans.Completed...)
		in.Promoted, in.PromotionFailures = append(in.Promoted, ans.Promoted...), append(in.PromotionFailures, ans.PromotionFailures...)
		reply.PreemptionWarnings = append(reply.PreemptionWarnings, ans.PreemptionWarnings...)
		reply.Paused = append(reply.Paused, ans.Paused...)
		if scheduler.AppState(ans.AppState).Terminal() {
			// Ended there (an operator killed it, or it went unheard): the
			// app goes on with the rest.
			part.ended = true
			p.a.logger.Warn("the app's unmanaged AM in another sub-cluster ended", "app", part.fedID, "subcluster", a.sc, "state", ans.AppState)
		}
	}
}

// hasNews reports whether an answer tells the AM anything new.
func hasNews(r *wrpc.AMAllocateResponse) bool {
	return len(r.Allocated)+len(r.Completed)+len(r.Promoted)+len(r.PromotionFailures)+len(r.Paused) > 0 || scheduler.AppState(r.AppState).Terminal()
}

// mergeAsks adds more's counts to asks (by ask ID).
func mergeAsks(asks, more []scheduler.Ask) []scheduler.Ask {
	for _, m := range more {
		if i := slices.IndexFunc(asks, func(a scheduler.Ask) bool { return a.AskID == m.AskID }); i >= 0 {
			asks[i].Count += m.Count
			continue
		}
		asks = append(asks, m)
	}
	return asks
}

// finishSpans ends every unmanaged AM of an attempt, stopping its
// containers there: the app finished (state FINISHED or FAILED) or is over
// at home (KILLED).
func (p *amrmProxy) finishSpans(ctx context.Context, sp *spanState, state scheduler.AppState, diag string) {
	sp.mu.Lock()
	defer sp.mu.Unlock()
	var wg sync.WaitGroup
	for id, part := range sp.parts {
		if part.ended || part.token == "" {
			continue
		}
		part.ended = true
		wg.Add(1)
		go func() {
			defer wg.Done()
			callCtx, cancel := context.WithTimeout(ctx, spanCallTimeout)
			defer cancel()
			err := part.client.Call(callCtx, "AM.Finish", &wrpc.AMFinishRequest{AppID: part.fedID, Attempt: part.attempt, Token: part.token,
				FinalState: string(state), Diagnostics: diag}, &wrpc.WriteResponse{})
			if err != nil {
				p.a.logger.Warn("could not end the app's unmanaged AM in another sub-cluster; it ends there when unheard for unmanaged_am_timeout",
					"app", part.fedID, "subcluster", id, "error", err)
			}
		}()
	}
	wg.Wait()
}
