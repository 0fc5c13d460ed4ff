package sim

import (
	"math/rand/v2"
	"strconv"
	"sync"
	"time"

	"github.com/weft-sched/weft/internal/identity"
	wrpc "github.com/weft-sched/weft/rpc"
	"github.com/weft-sched/weft/scheduler"
)

// Proxy is a simulated node's AMRMProxy (SPEC §8, §10): the AM running on
// the node sends its AM.Allocate through it. Opportunistic asks are
// allocated here, from the least-loaded list the leader pushes in the
// node's heartbeat answers, with the agents' own scheduler.DistributedRoom
// (scheduler.AllocateOpportunistic on a scheduler.Room); guaranteed asks,
// releases and what no node can take opportunistically (the guaranteed
// "twin", scheduler.OpportunisticFallback) go to the servers. As on an
// agent, an answer with local allocations is given at once and the rest is
// relayed in the background; the containers reach the servers when their
// nodes report them. With the cluster's opportunistic.distributed = false
// (Centralized in heartbeat answers) every ask goes to the servers.
//
// Unlike an agent's proxy it signs no container tokens (simulated nodes
// check none) and the AM's connection to the servers carries what it
// forwards.
type Proxy struct {
	node *Node

	mu          sync.Mutex
	dist        *scheduler.DistributedRoom
	centralized bool
	// perCall caps the opportunistic containers one Allocate gets (the
	// leader's opportunistic.max_allocations_per_am_heartbeat; 0: none).
	perCall  int
	seq      uint64
	attempts map[attemptKey]*proxyAttempt
	// renewed is closed, and replaced, when a list is installed.
	renewed chan struct{}
}

type attemptKey struct {
	app     string
	attempt int
}

// proxyAttempt is what the proxy remembers of one AM attempt.
type proxyAttempt struct {
	// minted holds the containers this proxy allocated that may still
	// run, by ID: releasing one stops it on its node.
	minted map[string]*Node
	// fallback marks opportunistic asks forwarded as guaranteed.
	fallback map[uint64]bool
	// unmet is the opportunistic demand the attempt's last Allocate left
	// unplaced: the node's heartbeat reports the sum as its demand.
	unmet int
}

// proxyMargin is how long before a list's computation its loads may still
// miss an allocation: an interval for the AM to start a container and its
// node to report it, as agents take (heartbeat + 500 ms).
func proxyMargin(heartbeat time.Duration) time.Duration { return heartbeat + 500*time.Millisecond }

func newProxy(n *Node) *Proxy {
	return &Proxy{node: n, dist: scheduler.NewDistributedRoom(proxyMargin(n.cfg.Heartbeat)), attempts: map[attemptKey]*proxyAttempt{},
		renewed: make(chan struct{})}
}

// listAt is the computation of the list the proxy holds (0: none), which
// the node's heartbeat names.
func (p *Proxy) listAt() int64 {
	p.mu.Lock()
	defer p.mu.Unlock()
	_, at := p.dist.List()
	return at
}

// update takes a heartbeat answer's list; sent is the computation the
// heartbeat named.
func (p *Proxy) update(resp *wrpc.HeartbeatResponse, sent int64, now time.Time) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.centralized = resp.Centralized
	if resp.LeastLoadedAt != 0 {
		p.perCall = resp.MaxAllocationsPerAM
	}
	if p.dist.Update(scheduler.ListNews{At: resp.LeastLoadedAt, List: resp.LeastLoaded, Age: resp.LeastLoadedAge, Same: resp.LeastLoadedSame,
		Candidates: resp.LeastLoadedCandidates}, sent, now, rand.Uint64()) {
		close(p.renewed)
		p.renewed = make(chan struct{})
	}
}

// Renewed returns a channel closed when the proxy next installs a list.
func (p *Proxy) Renewed() <-chan struct{} {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.renewed
}

// demand is the opportunistic demand the proxy's AMs left unplaced, as
// their last Allocate each: the node's heartbeat reports it.
func (p *Proxy) demand() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	n := 0
	for _, at := range p.attempts {
		n += at.unmet
	}
	return n
}

// TurnedAway records that a node turned away a container this proxy
// allocated: nothing more goes there until the next list (SPEC §21).
func (p *Proxy) TurnedAway(node string) {
	p.mu.Lock()
	p.dist.TurnedAway(node)
	p.mu.Unlock()
}

// split is one AM.Allocate as the proxy splits it.
type split struct {
	// Local are the containers allocated here.
	Local []wrpc.ContainerInfo
	// Forward is what the servers must hear (asks, releases).
	Forward wrpc.AMAllocateRequest
	// NeedServers says Forward carries something.
	NeedServers bool
	// Unmet says opportunistic demand found no room: fresh room comes
	// with the node's next list.
	Unmet bool
}

// Split allocates what it can of args' opportunistic asks and returns
// that and the request to forward; released containers it allocated are
// stopped on their nodes. args' asks must be valid.
func (p *Proxy) Split(args *wrpc.AMAllocateRequest) split {
	now := p.node.cfg.Clock.Now()
	s := split{Forward: *args}
	s.Forward.Asks, s.Forward.Releases = nil, nil
	var stop []*Node
	var stopIDs []string
	p.mu.Lock()
	at := p.attempt(args.AppID, args.Attempt)
	_, listAt := p.dist.List()
	wasUnmet := at.unmet
	at.unmet = 0
	budget := p.perCall
	for _, ask := range args.Asks {
		if ask.ExecutionType != scheduler.Opportunistic || p.centralized {
			s.Forward.Asks = append(s.Forward.Asks, ask)
			continue
		}
		want := ask
		if p.perCall > 0 {
			want.Count = min(want.Count, budget)
		}
		got := p.allocateLocal(at, args, want, now)
		budget -= len(got)
		s.Local = append(s.Local, got...)
		rest := ask.Count - len(got)
		fallback := scheduler.OpportunisticFallback(ask, listAt != 0, p.dist.Reachable(nil), rest)
		if rest > 0 && fallback == 0 {
			s.Unmet = true
			at.unmet += rest
		}
		if fallback > 0 || at.fallback[ask.AskID] {
			twin := ask
			twin.ExecutionType, twin.Count = scheduler.Guaranteed, fallback
			s.Forward.Asks = append(s.Forward.Asks, twin)
			at.fallback[ask.AskID] = fallback > 0
		}
	}
	for _, id := range args.Releases {
		if n, ok := at.minted[id]; ok {
			delete(at.minted, id)
			stop, stopIDs = append(stop, n), append(stopIDs, id)
			continue
		}
		s.Forward.Releases = append(s.Forward.Releases, id)
	}
	unmetRose := at.unmet > wasUnmet
	p.mu.Unlock()
	if unmetRose {
		p.node.pokeHeartbeat()
	}
	for i, n := range stop {
		if n != nil { // one never started needs nothing
			n.Stop(stopIDs[i], scheduler.ReasonKilled)
		}
	}
	s.NeedServers = len(s.Forward.Asks)+len(s.Forward.Releases)+len(s.Forward.Promotions) > 0
	return s
}

// allocateLocal allocates an opportunistic ask from the room. IDs embed
// this node and its registration epoch, and tokens are signed with the
// node's certified key, as an agent's are. p.mu must be held.
func (p *Proxy) allocateLocal(at *proxyAttempt, args *wrpc.AMAllocateRequest, ask scheduler.Ask, now time.Time) []wrpc.ContainerInfo {
	signer := p.node.minter()
	if signer == nil || now.UnixNano() >= signer.Expiry() {
		return nil
	}
	if ask.Count <= 0 {
		return nil
	}
	nodes := p.dist.Allocate(ask, nil, now) // simulated AMs blacklist no node
	if len(nodes) == 0 {
		return nil
	}
	p.node.mu.Lock()
	epoch := p.node.epoch
	p.node.mu.Unlock()
	prefix := scheduler.AgentContainerIDPrefix + p.node.cfg.ID + "-" + strconv.FormatUint(epoch, 10) + "-"
	out := make([]wrpc.ContainerInfo, 0, len(nodes))
	claims := make([]identity.Claims, 0, len(nodes))
	expiry := min(now.Add(identity.ContainerTokenLifetime).UnixNano(), signer.Expiry()+int64(identity.ContainerTokenLifetime))
	for _, n := range nodes {
		p.seq++
		id := prefix + strconv.FormatUint(p.seq, 10)
		out = append(out, wrpc.ContainerInfo{ID: id, AppID: args.AppID, Attempt: args.Attempt, NodeID: n.NodeID, NodeAddress: n.Address,
			AskID: ask.AskID, ExecutionType: string(scheduler.Opportunistic), State: string(scheduler.ContainerAllocated),
			Resources: ask.Resources, AllocatedAt: now.UnixNano(), ExpectedDuration: ask.ExpectedDuration, Progress: args.Progress})
		claims = append(claims, identity.Claims{Kind: identity.KindContainer, AppID: args.AppID, Attempt: args.Attempt, ContainerID: id,
			NodeID: n.NodeID, Resources: ask.Resources, ExecutionType: scheduler.Opportunistic, Expiry: expiry})
	}
	toks, err := signer.SignBatch(claims, now.UnixNano())
	if err != nil {
		return nil
	}
	for i := range out {
		out[i].Token = toks[i]
		at.minted[out[i].ID] = nil
	}
	return out
}

// Started records the node a container the proxy allocated was started on,
// so that releasing it stops it there.
func (p *Proxy) Started(app string, attempt int, id string, n *Node) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if at := p.attempts[attemptKey{app, attempt}]; at != nil {
		if _, ok := at.minted[id]; ok {
			at.minted[id] = n
		}
	}
}

// Synced records an answer from the servers: completed containers need
// no stopping any more; a terminal app is forgotten.
func (p *Proxy) Synced(app string, attempt int, reply *wrpc.AMAllocateResponse) {
	p.mu.Lock()
	defer p.mu.Unlock()
	at := p.attempts[attemptKey{app, attempt}]
	if at == nil {
		return
	}
	for _, c := range reply.Completed {
		delete(at.minted, c.ID)
	}
	if scheduler.AppState(reply.AppState).Terminal() {
		delete(p.attempts, attemptKey{app, attempt})
	}
}

// Forget drops an attempt that finished.
func (p *Proxy) Forget(app string, attempt int) {
	p.mu.Lock()
	delete(p.attempts, attemptKey{app, attempt})
	p.mu.Unlock()
}

// attempt returns what the proxy remembers of an attempt. p.mu must be
// held.
func (p *Proxy) attempt(app string, attempt int) *proxyAttempt {
	k := attemptKey{app, attempt}
	at, ok := p.attempts[k]
	if !ok {
		at = &proxyAttempt{minted: map[string]*Node{}, fallback: map[uint64]bool{}}
		p.attempts[k] = at
	}
	return at
}
