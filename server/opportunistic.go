package server

import (
	"context"
	"math/rand/v2"
	"reflect"
	"slices"
	"sync"
	"time"

	"github.com/weft-sched/weft/fsm"
	wrpc "github.com/weft-sched/weft/rpc"
	"github.com/weft-sched/weft/scheduler"
)

// loadBoard is the leader's view for opportunistic work (SPEC §10): the
// least-loaded node list and the queue limit pushed to agents, rebuilt at
// most every sorting_nodes_interval from the loads agents report, and the
// room the centralized allocator has left on the list's nodes.
type loadBoard struct {
	mu       sync.Mutex
	since    time.Time // leadership began (board reset)
	computed time.Time
	// list is the first nodes_used entries of the ranking: the centralized
	// allocator's list.
	list []scheduler.LeastLoadedNode
	// candidates is how many nodes the whole ranking had; deal holds the
	// windows of this computation, prev those of the one before (at
	// prevAt).
	candidates int
	deal, prev windows
	prevAt     int64
	// grown holds the windows grown since the computation for the unmet
	// demand their holders reported (grow), replaced whole on each change
	// so that a rebuild may read it outside mu; pool is the computation's
	// left-over entries, queue places and all, that no window has taken
	// yet; maxWindow is the largest a window may grow.
	grown     map[string]grownWindow
	pool      []scheduler.LeastLoadedNode
	maxWindow int
	lastStamp int64
	// shared says every agent gets list (opportunistic.shared_list, or too
	// few nodes for windows).
	shared bool
	// ams are the live AM containers the last computation saw: an agent
	// with one it did not see holds a new AM.
	ams map[string]bool
	// same holds the earlier computations (Unix ns, newest last) whose
	// list is entry for entry list: an agent holding one of them gets
	// LeastLoadedSame instead of the list again.
	same  []int64
	limit int
	// refreshing is set while a caller rebuilds the list outside mu; loads
	// and queued are its scratch space, kept from one rebuild to the next.
	refreshing bool
	loads      []scheduler.NodeLoad
	queued     []int
	demand     []int
	room       *scheduler.Room // centralized allocation's room on list
	rr         int             // where centralized round-robin goes on
	// inflight holds central placements not committed yet: a list rebuilt
	// meanwhile must not hand their places out again.
	inflight map[*scheduler.Placement]struct{}
}

// reset forgets every list: called when leadership begins, so a new leader
// waits for fresh loads instead of pushing what it knew in an older term.
func (b *loadBoard) reset(now time.Time) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.since, b.computed, b.list, b.same, b.limit, b.room, b.rr = now, time.Time{}, nil, nil, 0, nil, 0
	b.candidates, b.deal, b.prev, b.prevAt, b.ams = 0, windows{}, windows{}, 0, nil
	b.grown, b.pool = nil, nil
}

// grownWindow is a window grown within a computation, and the stamp its
// agent names it by in place of the computation's.
type grownWindow struct {
	at   int64
	list []scheduler.LeastLoadedNode
}

// grow gives the agent on node, which reported demand its window could
// not place, entries of the pool at once, in the answer to that very
// heartbeat, rather than at the next computation a heartbeat later. held
// is the list the heartbeat said the agent holds: only a report made
// against the window last given grows it, so one demand heard twice (its
// AM has not asked since) grows it once. It takes the pool's entries best
// first until their free room holds the demand, one container an entry
// (so that, while nodes stand free, the demand starts rather than waits in
// queues), then counts their queue places; the window is at most
// maxWindow. The entries were no window's, so still no node's room is
// handed out by two proxies (only agents without AMs may start one
// container on a left-over node). It returns the grown window and its
// stamp, or false when it does not grow. b.mu must be held.
func (b *loadBoard) grow(node string, demand int, held int64, now time.Time) ([]scheduler.LeastLoadedNode, int64, bool) {
	if demand <= 0 || len(b.pool) == 0 {
		return nil, 0, false
	}
	// An agent the computation dealt no window (its first AM started
	// since) grows one from nothing: the left-over entry it shares with
	// the others stays theirs.
	cur, stamp := b.deal.byAgent[node], b.computed.UnixNano()
	if g, ok := b.grown[node]; ok {
		cur, stamp = g.list, g.at
	}
	if held != stamp {
		return nil, 0, false
	}
	room := min(len(b.pool), b.maxWindow-len(cur))
	n, need := 0, demand
	for n < room && need > 0 {
		if !b.pool[n].Free.IsZero() {
			need--
		}
		n++
	}
	for i := 0; i < n && need > 0; i++ {
		need -= b.pool[i].QueueSpace
	}
	for n < room && need > 0 {
		need -= b.pool[n].QueueSpace
		if !b.pool[n].Free.IsZero() {
			need--
		}
		n++
	}
	if n == 0 {
		return nil, 0, false
	}
	list := make([]scheduler.LeastLoadedNode, 0, len(cur)+n)
	list = append(append(list, cur...), b.pool[:n]...)
	b.pool = b.pool[n:]
	stamp = max(now.UnixNano(), b.lastStamp+1)
	if stamp == b.computed.UnixNano() {
		stamp++
	}
	b.lastStamp = stamp
	grown := make(map[string]grownWindow, len(b.grown)+1)
	for k, v := range b.grown {
		grown[k] = v
	}
	grown[node] = grownWindow{at: stamp, list: list}
	b.grown = grown
	return list, stamp, true
}

// opportunisticConfig returns the cluster's settings, or the defaults for
// a configuration written before they existed.
func opportunisticConfig(st *fsm.State) scheduler.OpportunisticConfig {
	cfg := st.QueueConfig().Scheduler.Opportunistic
	if cfg.SortingNodesInterval <= 0 || cfg.NodesUsed <= 0 {
		return scheduler.DefaultOpportunisticConfig()
	}
	return cfg
}

// minWindow is the fewest nodes a window may average: with fewer, the
// list is shared (see refreshBoard).
const minWindow = 2

// maxReportedDemand bounds the opportunistic demand the leader takes from
// one agent's heartbeat: beyond it, a window is as large as it may be
// anyway (scheduler.MaxWindowFactor).
const maxReportedDemand = 1 << 20

// listGrace is how long a new leader waits for every READY node's first
// load report before it computes a list from the nodes heard so far: a
// list built from one node's report would send every container there.
func listGrace(cfg scheduler.OpportunisticConfig) time.Duration {
	return max(2*cfg.SortingNodesInterval, 2*time.Second)
}

// opportunisticView fills a heartbeat response's opportunistic view for
// the agent on node, whose heartbeat reported demand its window could not
// place: its window of the least-loaded list (grown for that demand, see
// grow) when the agent holds an older computation (or, to an agent that says it understands,
// LeastLoadedSame when its window is entry for entry the one it holds),
// the computation, its age and how many nodes the whole list had, the
// queue limit and the cap on allocations per Allocate. It rebuilds the
// list when the last one is older than the sorting interval. Right after a
// leadership change it says nothing (at 0, limit 0) until the loads are in.
func (s *Server) opportunisticView(st *fsm.State, now time.Time, node string, agentHas int64, sameListOK bool, demand int, reply *wrpc.HeartbeatResponse) {
	b := &s.board
	b.mu.Lock()
	defer b.mu.Unlock()
	if !s.refreshBoard(st, now) {
		return
	}
	reply.LeastLoadedAt, reply.LeastLoadedAge, reply.QueueLimit = b.computed.UnixNano(), now.Sub(b.computed), b.limit
	reply.LeastLoadedCandidates = b.candidates
	reply.MaxAllocationsPerAM = opportunisticConfig(st).MaxAllocationsPerAMHeartbeat
	if !b.shared {
		if list, at, ok := b.grow(node, demand, agentHas, now); ok {
			reply.LeastLoadedAt, reply.LeastLoaded = at, list
			return
		}
		if g, ok := b.grown[node]; ok {
			if reply.LeastLoadedAt = g.at; g.at != agentHas {
				reply.LeastLoaded = g.list
			}
			return
		}
	}
	if reply.LeastLoadedAt == agentHas {
		return
	}
	if b.shared {
		if sameListOK && agentHas != 0 && slices.Contains(b.same, agentHas) {
			reply.LeastLoadedSame = true
		} else {
			reply.LeastLoaded = b.list
		}
		return
	}
	window := b.deal.of(node)
	if sameListOK && agentHas != 0 && agentHas == b.prevAt && sameList(window, b.prev.of(node)) {
		reply.LeastLoadedSame = true
		return
	}
	reply.LeastLoaded = window
}

// windows is one computation's list as dealt to the agents: a window of
// it for each agent that runs AMs (by node ID), and the entries none was
// dealt, which the other agents share one entry each
// (scheduler.DealWindows).
type windows struct {
	byAgent  map[string][]scheduler.LeastLoadedNode
	leftover []scheduler.LeastLoadedNode
}

// of returns the agent's window: the one dealt to it if it runs AMs, else
// one leftover entry (the same for a fixed share of the agents, so that an
// agent whose AM has just started has somewhere to begin), else an empty
// one.
func (w windows) of(node string) []scheduler.LeastLoadedNode {
	if win, ok := w.byAgent[node]; ok {
		return win
	}
	if len(w.leftover) == 0 {
		return emptyWindow
	}
	i := int(fnv32(node) % uint32(len(w.leftover)))
	return w.leftover[i : i+1 : i+1]
}

// emptyWindow is every agent's window when nothing is left over: one
// slice, so a batch of answers holds it once (rpc.ShareLeastLoaded).
var emptyWindow = []scheduler.LeastLoadedNode{}

// fnv32 hashes s (FNV-1a).
func fnv32(s string) uint32 {
	h := uint32(2166136261)
	for i := 0; i < len(s); i++ {
		h ^= uint32(s[i])
		h *= 16777619
	}
	return h
}

// maxSameLists bounds loadBoard.same.
const maxSameLists = 16

// sameList reports whether two least-loaded lists are entry for entry
// equal.
func sameList(a, b []scheduler.LeastLoadedNode) bool {
	return slices.EqualFunc(a, b, func(x, y scheduler.LeastLoadedNode) bool { return reflect.DeepEqual(x, y) })
}

// refreshBoard rebuilds the list and limit if they are due; it reports
// whether the board holds a list. b.mu must be held; it is let go while
// the list is computed, and meanwhile every other caller is answered from
// the board as it is: at 10,000 nodes a rebuild sorts every node's load,
// and heartbeats that waited for it behind the lock every second made the
// heartbeats' p99.
func (s *Server) refreshBoard(st *fsm.State, now time.Time) bool {
	b := &s.board
	cfg := opportunisticConfig(st)
	if !b.computed.IsZero() && now.Sub(b.computed) < cfg.SortingNodesInterval || b.refreshing {
		return !b.computed.IsZero()
	}
	b.refreshing = true
	since := b.since
	b.mu.Unlock()
	// Only the refreshing caller uses the scratch slices.
	loads, queued, demand := b.loads[:0], b.queued[:0], b.demand[:0]
	ready := 0
	nodes := st.Nodes()
	s.livenessMu.Lock()
	for _, n := range nodes {
		if n.Status != scheduler.NodeReady {
			continue
		}
		ready++
		l, ok := s.liveness.Load(n.ID)
		if !ok {
			continue
		}
		load := scheduler.NodeLoad{NodeID: n.ID, Address: n.Address, Rack: n.Rack, Capacity: n.Capacity,
			Used: l.Used, Queued: l.Queued, QueueCapacity: l.QueueCapacity, Wait: l.EstimatedQueueWait}
		if l.Measured != nil && l.UseLimit != nil {
			// Capped at the node's capacity: an agent cannot make its node
			// bigger than it registered.
			load.Measured, load.UseLimit = *l.Measured, minEach(*l.UseLimit, n.Capacity)
		}
		loads = append(loads, load)
		queued = append(queued, l.Queued)
		demand = append(demand, min(max(0, l.OpportunisticDemand), maxReportedDemand))
	}
	s.livenessMu.Unlock()
	// The windows of the computation before: a holder keeps its nodes, and
	// one that held none is new. (Only the refreshing caller replaces
	// b.deal, and never changes a map it made.)
	b.mu.Lock()
	prevHolders, prevGrown, prevAMs := b.deal.byAgent, b.grown, b.ams
	b.mu.Unlock()
	ams := make(map[string]bool, len(prevAMs))
	prevOwner := make(map[string]string, len(prevHolders))
	for holder, w := range prevHolders {
		if _, ok := prevGrown[holder]; !ok {
			for i := range w {
				prevOwner[w[i].NodeID] = holder
			}
		}
	}
	for holder, g := range prevGrown {
		for i := range g.list {
			prevOwner[g.list[i].NodeID] = holder
		}
	}
	// The agents that run AMs allocate from the list; what their AMs hold
	// no opportunistic container gets while they run.
	var holders []scheduler.ListHolder
	for i := range loads {
		_, held := prevHolders[loads[i].NodeID]
		holds, fresh := false, !held
		for _, c := range st.NodeLiveContainers(loads[i].NodeID) {
			if c.IsAM {
				loads[i].Pinned = loads[i].Pinned.Add(c.Resources)
				holds, fresh = true, fresh || !prevAMs[c.ID]
				ams[c.ID] = true
			}
		}
		if holds {
			// An AM that has just started asks before its demand is
			// reported: its agent is dealt first (scheduler.DealWindows).
			holders = append(holders, scheduler.ListHolder{NodeID: loads[i].NodeID, Demand: demand[i], New: fresh})
		}
	}
	b.loads, b.queued, b.demand = loads, queued, demand
	ranked := scheduler.RankNodes(loads, len(loads), cfg.LoadComparator)
	limit := scheduler.QueueLimit(queued, cfg.QueueLimitStdev, cfg.MinQueueLength, cfg.MaxQueueLength)
	list := ranked[:min(len(ranked), cfg.NodesUsed)]
	// Windows of fewer than two nodes each would make an AM queue behind
	// running work while another agent's nodes stand free: a list that
	// short for the agents that run AMs is shared whole, as before
	// windows (a herd of at most half as many proxies as nodes).
	shared := cfg.SharedList || len(ranked) < minWindow*len(holders)
	if shared {
		holders = nil // every agent gets list, whole
	}
	dealt := scheduler.DealWindows(ranked, holders, prevOwner, cfg.NodesUsed)
	byAgent := make(map[string][]scheduler.LeastLoadedNode, len(holders))
	for i, h := range holders {
		w := make([]scheduler.LeastLoadedNode, len(dealt[i]))
		for j, p := range dealt[i] {
			w[j] = ranked[p]
		}
		byAgent[h.NodeID] = w
	}
	rest := scheduler.Leftover(ranked, dealt)
	leftover := make([]scheduler.LeastLoadedNode, len(rest))
	pool := make([]scheduler.LeastLoadedNode, len(rest))
	for j, p := range rest {
		pool[j] = ranked[p]
		// Shared by the agents that run no AM yet: only what starts at
		// once, no queue place. An AM that has just started gets its
		// first containers running, and waits for its window (the next
		// computation) rather than queueing behind running work.
		leftover[j] = ranked[p]
		leftover[j].QueueSpace = 0
	}
	candidates := len(ranked)
	if shared {
		leftover, pool, candidates = nil, nil, 0
	}
	b.mu.Lock()
	b.refreshing = false
	if !b.since.Equal(since) {
		return !b.computed.IsZero() // leadership began again meanwhile: these loads are old
	}
	if len(loads) < ready && now.Sub(b.since) < listGrace(cfg) {
		return !b.computed.IsZero()
	}
	if !b.computed.IsZero() && sameList(b.list, list) {
		b.same = append(b.same, b.computed.UnixNano())
		if len(b.same) > maxSameLists {
			b.same = slices.Delete(b.same, 0, len(b.same)-maxSameLists)
		}
	} else {
		b.same = b.same[:0]
	}
	b.prev, b.prevAt = b.deal, b.computed.UnixNano()
	if b.computed.IsZero() {
		b.prevAt = 0
	}
	b.deal, b.candidates, b.shared, b.ams = windows{byAgent: byAgent, leftover: leftover}, candidates, shared, ams
	b.grown, b.pool = nil, pool
	b.maxWindow = scheduler.MaxWindowFactor * max(1, cfg.NodesUsed)
	b.list = list
	b.limit = limit
	b.room = scheduler.NewRoom(b.list)
	// Containers this leader placed that their nodes have not reported yet,
	// or is placing, are in no load: their places are taken.
	for i, n := range b.list {
		for _, c := range st.NodeLiveContainers(n.NodeID) {
			if c.ExecutionType == scheduler.Opportunistic && c.State == scheduler.ContainerAllocated {
				b.room.Take(i, c.Resources)
			}
		}
		for p := range b.inflight {
			if p.NodeID == n.NodeID {
				b.room.Take(i, p.Resources)
			}
		}
	}
	b.rr = 0
	if len(b.list) > 0 {
		b.rr = rand.IntN(len(b.list))
	}
	b.computed = now
	return true
}

// allocateCentral allocates opportunistic asks on the leader (SPEC §10,
// centralized allocation) from the least-loaded list with the same rule as
// the AMRMProxies, and commits the placements through Raft. Each ask's
// count is reduced by the containers of that ask placed after seenIndex,
// which the AM has not heard of yet: a retried Allocate gets nothing twice.
// No container goes to a node of the app's blacklist in force. It returns,
// per ask, how many containers it could not place, whether a list is
// known, and how many of its nodes the app may use.
func (s *Server) allocateCentral(ctx context.Context, st *fsm.State, app *scheduler.App, attempt int, asks []scheduler.Ask, seenIndex uint64) (unplaced []int, listKnown bool, listLen int, err error) {
	placedAfter := scheduler.PlacedSince(st.AppContainersChangedSince(app.ID, seenIndex), attempt, seenIndex)
	avoid := avoidedNodes(st, app)
	unplaced = make([]int, len(asks))
	var plan []scheduler.Placement
	var pos []int
	b := &s.board
	b.mu.Lock()
	listed := s.refreshBoard(st, s.clock.Now())
	listKnown, listLen = listed, scheduler.Usable(b.list, avoid)
	for i, ask := range asks {
		ask.Count = max(0, ask.Count-placedAfter[ask.AskID])
		if listed {
			pos, b.rr = scheduler.AllocateOpportunistic(ask, b.list, b.room, avoid, b.rr, pos[:0])
		}
		unplaced[i] = ask.Count - len(pos)
		for _, p := range pos {
			plan = append(plan, scheduler.Placement{AppID: app.ID, Attempt: attempt, AskID: ask.AskID,
				NodeID: b.list[p].NodeID, Resources: ask.Resources, Opportunistic: true})
		}
		pos = pos[:0]
	}
	if b.inflight == nil {
		b.inflight = map[*scheduler.Placement]struct{}{} // a leader may take writes before its loop resets the board
	}
	for i := range plan {
		b.inflight[&plan[i]] = struct{}{}
	}
	b.mu.Unlock()
	if len(plan) > 0 {
		_, err = s.commitPlan(ctx, plan)
		b.mu.Lock()
		for i := range plan {
			delete(b.inflight, &plan[i])
		}
		b.mu.Unlock()
	}
	return unplaced, listKnown, listLen, err
}

// minEach returns the lesser of a and b in memory and vcores (no other
// resource is overcommitted).
func minEach(a, b scheduler.Resources) scheduler.Resources {
	return scheduler.Resources{MemoryMB: min(a.MemoryMB, b.MemoryMB), Vcores: min(a.Vcores, b.Vcores)}
}
