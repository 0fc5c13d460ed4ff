package agent

import (
	"math/rand/v2"
	"sync"
	"time"

	wrpc "github.com/weft-sched/weft/rpc"
	"github.com/weft-sched/weft/scheduler"
)

// distScheduler is the agent's distributed opportunistic scheduler (SPEC
// §10, seed 000). It holds the least-loaded list the leader pushes in
// heartbeat responses and the room left on each of its nodes, and allocates
// opportunistic asks from it with scheduler.AllocateOpportunistic, so an
// AMRMProxy never waits for a server to allocate them. When no list has
// come from the leader for a while (no leader, or the servers cannot be
// reached) it renews the room itself from the listed nodes' own loads, so
// allocation goes on.
type distScheduler struct {
	mu          sync.Mutex
	list        []scheduler.LeastLoadedNode
	leaderList  []scheduler.LeastLoadedNode // the leader's last list: the nodes a renewal asks
	at          int64                       // the list's computation (the leader's, or a renewal's)
	fromLeader  time.Time                   // when the leader last sent (or confirmed) a list
	room        *scheduler.Room
	rr          int
	limit       int
	centralized bool
	renewed     chan struct{} // closed when the room is renewed
	pos         []int         // scratch for allocate
}

func newDistScheduler() *distScheduler {
	return &distScheduler{room: scheduler.NewRoom(nil), renewed: make(chan struct{})}
}

// update takes what a heartbeat response says about opportunistic work.
// A list whose computation differs from the one held replaces it, and its
// room starts afresh, round-robin from a random node.
func (d *distScheduler) update(resp *wrpc.HeartbeatResponse, now time.Time) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.centralized = resp.Centralized
	if resp.LeastLoadedAt == 0 {
		return // a new leader still gathering loads: keep what we have
	}
	d.fromLeader = now
	d.limit = resp.QueueLimit
	if resp.LeastLoadedAt != d.at {
		d.leaderList = resp.LeastLoaded
		d.install(resp.LeastLoaded, resp.LeastLoadedAt)
	}
}

// install replaces the list and its room; d.mu must be held.
func (d *distScheduler) install(list []scheduler.LeastLoadedNode, at int64) {
	d.list, d.at = list, at
	d.room = scheduler.NewRoom(list)
	d.rr = 0
	if len(list) > 0 {
		d.rr = rand.IntN(len(list))
	}
	close(d.renewed)
	d.renewed = make(chan struct{})
}

// allocate places what it can of an opportunistic ask and returns one
// list entry per container.
func (d *distScheduler) allocate(ask scheduler.Ask) []scheduler.LeastLoadedNode {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.pos = scheduler.AllocateOpportunistic(ask, d.list, d.room, d.rr, d.pos[:0])
	d.rr += len(d.pos)
	if len(d.pos) == 0 {
		return nil
	}
	out := make([]scheduler.LeastLoadedNode, len(d.pos))
	for i, p := range d.pos {
		out[i] = d.list[p]
	}
	return out
}

// view returns whether asks are forwarded to the leader, whether any node
// can take opportunistic work, the list's computation, and a channel
// closed when the room is next renewed.
func (d *distScheduler) view() (centralized, available bool, at int64, renewed <-chan struct{}) {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.centralized, len(d.list) > 0, d.at, d.renewed
}

// snapshot returns the current list and queue limit.
func (d *distScheduler) snapshot() ([]scheduler.LeastLoadedNode, int) {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.list, d.limit
}

// staleNodes returns the nodes to ask for their loads when the leader has
// sent no list for longer than after, or nil.
func (d *distScheduler) staleNodes(now time.Time, after time.Duration) []scheduler.LeastLoadedNode {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.fromLeader.IsZero() || now.Sub(d.fromLeader) <= after || d.centralized {
		return nil
	}
	return d.leaderList
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
	d.install(list, now.UnixNano())
}

// renewLoop renews the room from the listed nodes while the leader sends
// no lists: every interval, once none has come for three intervals.
func (a *Agent) renewLoop() {
	defer a.wg.Done()
	interval := a.config.HeartbeatInterval
	tick := time.NewTicker(interval)
	defer tick.Stop()
	for {
		select {
		case <-tick.C:
		case <-a.shutdownCh:
			return
		}
		stale := a.sched.staleNodes(time.Now(), 3*interval)
		if len(stale) == 0 {
			continue
		}
		loads := a.pollLoads(stale, interval)
		a.sched.renew(loads, len(stale), time.Now(), 3*interval)
		a.logger.Debug("no list from the leader; renewed opportunistic room from the nodes", "nodes", len(loads), "asked", len(stale))
	}
}

// pollLoads asks each node for its load (Agent.Load), waiting at most
// timeout; nodes that do not answer in time are left out.
func (a *Agent) pollLoads(nodes []scheduler.LeastLoadedNode, timeout time.Duration) []scheduler.NodeLoad {
	type answer struct {
		n    scheduler.LeastLoadedNode
		resp wrpc.AgentLoadResponse
		ok   bool
	}
	answers := make(chan answer, len(nodes)) // late answers never block
	for _, n := range nodes {
		go func() {
			var resp wrpc.AgentLoadResponse
			if n.NodeID == a.config.NodeID {
				answers <- answer{n, a.loadResponse(), true}
				return
			}
			err := a.client.Pool().Call(n.Address, "Agent.Load", &wrpc.RequestHeader{}, &resp)
			answers <- answer{n, resp, err == nil}
		}()
	}
	var out []scheduler.NodeLoad
	deadline := time.After(timeout)
	for range nodes {
		select {
		case r := <-answers:
			if r.ok {
				out = append(out, scheduler.NodeLoad{NodeID: r.n.NodeID, Address: r.n.Address, Rack: r.resp.Rack,
					Capacity: r.resp.Capacity, Used: r.resp.Load.Used, Queued: r.resp.Load.Queued, QueueCapacity: r.resp.Load.QueueCapacity})
			}
		case <-deadline:
			return out
		}
	}
	return out
}
