package agent

import (
	"context"
	"math/rand/v2"
	"sync"
	"time"

	"github.com/weft-sched/weft/internal/gossip"
	wrpc "github.com/weft-sched/weft/rpc"
	"github.com/weft-sched/weft/scheduler"
)

// distScheduler is the agent's distributed opportunistic scheduler (SPEC
// §10, seed 000). It holds the least-loaded list the leader pushes in
// heartbeat responses and the room left on each of its nodes (a
// scheduler.DistributedRoom, which the simulator's AMRMProxy shares), and
// allocates opportunistic asks from it with
// scheduler.AllocateOpportunistic, so an AMRMProxy never waits for a
// server to allocate them. When no list has come
// from the leader for a while (no leader, or the servers cannot be
// reached) it renews the room itself from the loads of the agents gossip
// knows, so allocation goes on.
type distScheduler struct {
	margin time.Duration // how long before a list's computation its loads may still miss an allocation

	mu          sync.Mutex
	dist        *scheduler.DistributedRoom // the list, its room and recent allocations
	nodesUsed   int                        // the leader's last list length: how many nodes a renewal keeps
	fromLeader  time.Time                  // when the leader last sent (or confirmed) a list
	limit       int
	maxPerCall  int // opportunistic.max_allocations_per_am_heartbeat
	centralized bool
	renewed     chan struct{} // closed when the room is renewed
}

// newDistScheduler returns a scheduler with no list yet. If none comes
// from the leader it renews one itself, as when lists stop coming.
func newDistScheduler(margin time.Duration, now time.Time) *distScheduler {
	return &distScheduler{margin: margin, fromLeader: now, dist: scheduler.NewDistributedRoom(margin), renewed: make(chan struct{})}
}

// update takes what a heartbeat response says about opportunistic work;
// sent is the computation the heartbeat said the agent held. A list whose
// computation differs from the one held replaces it, and its room starts
// afresh, round-robin from a random node (scheduler.DistributedRoom).
func (d *distScheduler) update(resp *wrpc.HeartbeatResponse, sent int64, now time.Time) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.centralized = resp.Centralized
	if resp.LeastLoadedAt == 0 {
		return // a new leader still gathering loads: keep what we have
	}
	d.fromLeader = now
	d.limit, d.maxPerCall = resp.QueueLimit, resp.MaxAllocationsPerAM
	news := scheduler.ListNews{At: resp.LeastLoadedAt, List: resp.LeastLoaded, Age: resp.LeastLoadedAge, Same: resp.LeastLoadedSame,
		Candidates: resp.LeastLoadedCandidates}
	if d.dist.Update(news, sent, now, rand.Uint64()) {
		if !resp.LeastLoadedSame {
			d.nodesUsed = len(resp.LeastLoaded)
		}
		d.renewedLocked()
	}
}

// turnedAway records that a node turned away a container allocated here:
// nothing more goes there until the next list.
func (d *distScheduler) turnedAway(node string) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.dist.TurnedAway(node)
}

// perCall is the cap on opportunistic containers one Allocate gets (0:
// none).
func (d *distScheduler) perCall() int {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.maxPerCall
}

// renewedLocked wakes those waiting for a renewed room. d.mu must be held.
func (d *distScheduler) renewedLocked() {
	close(d.renewed)
	d.renewed = make(chan struct{})
}

// allocate places what it can of an opportunistic ask, on no node in
// avoid, and returns one list entry per container and how many of the
// list's nodes are not in avoid.
func (d *distScheduler) allocate(ask scheduler.Ask, avoid scheduler.NodeSet, now time.Time) ([]scheduler.LeastLoadedNode, int) {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.dist.Allocate(ask, avoid, now), d.dist.Reachable(avoid)
}

// schedView is what the AMRMProxy and the heartbeat loop need of the
// distributed scheduler at one moment.
type schedView struct {
	Centralized bool            // opportunistic asks go to the leader
	ListKnown   bool            // a list is held (from the leader or a renewal)
	ListLen     int             // its length: 0 means every queue is full
	At          int64           // its computation
	Renewed     <-chan struct{} // closed when the room is next renewed
}

// view returns the scheduler's current view.
func (d *distScheduler) view() schedView {
	d.mu.Lock()
	defer d.mu.Unlock()
	_, at := d.dist.List()
	return schedView{Centralized: d.centralized, ListKnown: at != 0, ListLen: d.dist.Reachable(nil), At: at, Renewed: d.renewed}
}

// snapshot returns the current list and queue limit.
func (d *distScheduler) snapshot() ([]scheduler.LeastLoadedNode, int) {
	d.mu.Lock()
	defer d.mu.Unlock()
	list, _ := d.dist.List()
	return list, d.limit
}

// stale reports whether the leader has sent no list for longer than
// after, and how many nodes a renewed list should keep.
func (d *distScheduler) stale(now time.Time, after time.Duration) (bool, int) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if now.Sub(d.fromLeader) <= after || d.centralized {
		return false, 0
	}
	return true, max(d.nodesUsed, scheduler.DefaultOpportunisticConfig().NodesUsed)
}

// renew installs a list computed here from the nodes' own loads, unless
// the leader sent one meanwhile.
func (d *distScheduler) renew(loads []scheduler.NodeLoad, nodesUsed int, now time.Time, after time.Duration) {
	list := scheduler.LeastLoaded(loads, nodesUsed)
	d.mu.Lock()
	defer d.mu.Unlock()
	if now.Sub(d.fromLeader) <= after {
		return
	}
	d.dist.Install(list, now.UnixNano(), now, rand.Uint64())
	d.renewedLocked()
}

// maxRenewPoll bounds how many agents one renewal asks for their load.
const maxRenewPoll = 32

// renewLoop renews the room while the leader sends no lists: every
// interval, once none has come for three intervals, it asks up to
// maxRenewPoll agents that gossip knows (a random sample) for their loads.
func (a *Agent) renewLoop() {
	interval := a.config.HeartbeatInterval
	tick := a.clock.NewTicker(interval)
	defer tick.Stop()
	for {
		select {
		case <-tick.C():
		case <-a.ctx.Done():
			return
		}
		stale, nodesUsed := a.sched.stale(a.clock.Now(), 3*interval)
		if !stale {
			continue
		}
		agents := gossip.AliveAgents(a.serf)
		rand.Shuffle(len(agents), func(i, j int) { agents[i], agents[j] = agents[j], agents[i] })
		agents = agents[:min(len(agents), maxRenewPoll)]
		loads := a.pollLoads(agents, interval)
		a.sched.renew(loads, nodesUsed, a.clock.Now(), 3*interval)
		a.logger.Debug("no list from the leader; renewed opportunistic room from the nodes", "answered", len(loads), "asked", len(agents))
	}
}

// pollLoads asks each agent for its load (Agent.Load), waiting at most
// timeout; agents that do not answer in time are left out.
func (a *Agent) pollLoads(agents []gossip.Agent, timeout time.Duration) []scheduler.NodeLoad {
	type answer struct {
		ag   gossip.Agent
		resp wrpc.AgentLoadResponse
		ok   bool
	}
	ctx, cancel := context.WithTimeout(a.ctx, timeout)
	defer cancel()
	answers := make(chan answer, len(agents))
	for _, ag := range agents {
		go func() {
			if ag.ID == a.config.NodeID {
				answers <- answer{ag, a.loadResponse(), true}
				return
			}
			var resp wrpc.AgentLoadResponse
			err := a.agentPool.Call(ctx, ag.RPCAddr, "Agent.Load", &wrpc.RequestHeader{}, &resp)
			answers <- answer{ag, resp, err == nil}
		}()
	}
	// Every call ends by the deadline, so every answer comes.
	var out []scheduler.NodeLoad
	for range agents {
		if r := <-answers; r.ok {
			out = append(out, scheduler.NodeLoad{NodeID: r.ag.ID, Address: r.ag.RPCAddr, Rack: r.resp.Rack,
				Capacity: r.resp.Capacity, Used: r.resp.Load.Used, Queued: r.resp.Load.Queued, QueueCapacity: r.resp.Load.QueueCapacity})
		}
	}
	return out
}
