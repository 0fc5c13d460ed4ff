package scheduler

import (
	"container/heap"
	"sort"
	"time"
)

// State is the read-only view of the cluster that scheduling decisions
// read. fsm.State satisfies it; tests use small in-memory versions.
type State interface {
	// Nodes returns every registered node.
	Nodes() []*Node
	// ActiveApps returns apps that are not finished, in submission order.
	ActiveApps() []*App
	// QueueConfig returns the queue configuration.
	QueueConfig() *QueueConfig
	// Queues returns the resolved queue tree, parents before children.
	Queues() []*Queue
	// NodeLiveContainers returns the containers on a node not yet completed.
	NodeLiveContainers(nodeID string) []*Container
	// PreemptionMarked returns the live containers marked for preemption
	// (PreemptKillAt set), in order of kill time then ID. The state keeps
	// them indexed: this must not scan every container.
	PreemptionMarked() []*Container
}

// Placement is one container the leader decided to allocate: guaranteed
// (from a scheduling pass) or opportunistic (centralized allocation). Its
// ID is assigned when the plan carrying it is applied.
type Placement struct {
	AppID     string    `codec:"app_id"`
	Attempt   int       `codec:"attempt"`
	AskID     uint64    `codec:"ask_id"`
	NodeID    string    `codec:"node_id"`
	Resources Resources `codec:"resources"`
	IsAM      bool      `codec:"is_am"`
	// Opportunistic marks a centrally allocated opportunistic container
	// (a bool, not an ExecutionType: placements are the scheduling pass's
	// hot path, and it fits in IsAM's padding).
	Opportunistic bool `codec:"opportunistic,omitempty"`
	// Reserve makes the entry a node reservation of a capacity queue
	// instead (reservation.go): NodeID is held for the container the rest
	// describes. Unreserve releases that reservation.
	Reserve   bool `codec:"reserve,omitempty"`
	Unreserve bool `codec:"unreserve,omitempty"`
}

// candidate is a node with what a pass has left of its guaranteed room.
type candidate struct {
	node  *Node
	free  Resources
	share float64 // dominant share of its capacity allocated
	index int     // position in the pass's node heap, -1 when out of it
}

func (c *candidate) refresh() {
	c.share = DominantShare(c.node.Capacity.Sub(c.free), c.node.Capacity)
}

func readyNodes(all []*Node) ([]*candidate, map[string]string, Resources) {
	out := make([]*candidate, 0, len(all))
	rackOf := make(map[string]string, len(all))
	var cluster Resources
	for _, n := range all {
		rackOf[n.ID] = n.Rack
		if n.Status == NodeReady {
			c := &candidate{node: n, free: n.FreeGuaranteed(), index: -1}
			c.refresh()
			out = append(out, c)
			cluster = cluster.Add(n.Capacity)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].node.ID < out[j].node.ID })
	return out, rackOf, cluster
}

// fence is what keeps one app off nodes in a pass: nodes reserved for
// another app while preemption frees them, and the app's blacklist.
type fence struct {
	app      string
	reserved map[string]string // node → the app it is reserved for
	avoid    NodeSet           // the app's blacklist, when in force
}

// bars reports whether the fence keeps its app off node id.
func (f fence) bars(id string) bool {
	if for_, ok := f.reserved[id]; ok && for_ != f.app {
		return true
	}
	return f.avoid.Has(id)
}

// pickNode returns the node the placement policy prefers for r among those
// acceptable at the locality level and not barred by f, or nil. Spread
// prefers the least allocated dominant share, binpack the most.
func pickNode(nodes []*candidate, r Resources, loc Locality, level int, rackOf map[string]string, policy PlacementPolicy, f fence) *candidate {
	var best *candidate
	var bestShare float64
	for _, c := range nodes {
		if !r.Fits(c.free) || !nodeAt(loc, c.node, level, rackOf) || f.bars(c.node.ID) {
			continue
		}
		if best == nil || policy == PlacementBinpack && c.share > bestShare || policy != PlacementBinpack && c.share < bestShare {
			best, bestShare = c, c.share
		}
	}
	return best
}

// namedNode returns, of the nodes loc names, the one the placement policy
// prefers that has room for r, or nil. It looks the names up (the pass's
// nodes are sorted by ID) instead of scanning every node.
func (s *pass) namedNode(loc Locality, r Resources, f fence) *candidate {
	var buf [8]*candidate
	named := buf[:0]
	for _, id := range loc.Nodes {
		i := sort.Search(len(s.nodes), func(i int) bool { return s.nodes[i].node.ID >= id })
		if i < len(s.nodes) && s.nodes[i].node.ID == id {
			named = append(named, s.nodes[i])
		}
	}
	if len(named) == 0 {
		return nil
	}
	return pickNode(named, r, loc, levelNode, s.rackOf, s.cfg.Placement, f)
}

// DominantShare is the largest component of used as a fraction of total
// (seed 004); resources absent from total are ignored. It does not
// allocate: it sits on the scheduler's hot path.
func DominantShare(used, total Resources) float64 {
	var max float64
	if total.MemoryMB > 0 {
		max = float64(used.MemoryMB) / float64(total.MemoryMB)
	}
	if total.Vcores > 0 {
		if s := float64(used.Vcores) / float64(total.Vcores); s > max {
			max = s
		}
	}
	for name, t := range total.Extended {
		if t > 0 {
			if s := float64(used.Extended[name]) / float64(t); s > max {
				max = s
			}
		}
	}
	return max
}

// Decision is the result of one scheduling pass.
type Decision struct {
	Placements []Placement
}

// DefaultMaxPlacements bounds one plan so that a Raft entry stays small
// and the next pass sees fresh state soon.
const DefaultMaxPlacements = 4096

// Schedule runs one guaranteed scheduling pass over st at now (SPEC §9):
// repeatedly walk the queue tree from root, at each level taking the child
// its parent's policy ranks first (skipping queues with nothing to place or
// at max_resources), in the leaf the app by priority then policy, and its
// AM container or highest-priority ask; place it on the node the placement
// policy prefers, relaxing locality by delay scheduling. An app whose AM
// container would take its leaf past max_am_share gets none (see holdAMs).
// waits is the delay-scheduling memory kept between passes (it may be
// nil). At most maxPlacements are decided.
func Schedule(st State, now time.Time, waits *LocalityWaits, maxPlacements int) Decision {
	if waits == nil {
		waits = NewLocalityWaits()
	}
	if !demandPending(st.ActiveApps()) {
		// Nothing to place: a pass would only walk every node. The leader
		// runs one at every state change (a node registering, a batch of
		// container reports), so with 10,000 nodes and no demand this was
		// most of its CPU. What the pass would have swept goes the same.
		waits.sweep()
		return Decision{}
	}
	nodes, rackOf, cluster := readyNodes(st.Nodes())
	var d Decision
	if len(nodes) == 0 {
		return d
	}
	t := buildTree(st, cluster)
	if t.amsPending() {
		t.holdAMs(t.fairShares(st.Queues(), cluster), cluster, freeOf(nodes))
	}
	s := &pass{st: st, tree: t, nodes: nodes, rackOf: rackOf, cluster: cluster, now: now, waits: waits,
		cfg: st.QueueConfig().Scheduler}
	s.heap = newNodeHeap(nodes, s.cfg.Placement == PlacementBinpack)
	if s.cfg.Preemption.Enabled {
		s.reserved = reservations(st)
	}
	if len(t.held) > 0 {
		d.Placements = s.fulfilReservations(t.held, s.cfg.Capacity.ReservationWait())
	}
	for len(d.Placements) < maxPlacements {
		p, ok := s.assign(t.root)
		if !ok {
			break
		}
		d.Placements = append(d.Placements, p)
	}
	for _, k := range s.missed {
		if w, ok := waits.waits[k]; ok {
			w.missed++
		}
	}
	waits.sweep()
	return d
}

// demandPending reports whether any app waits for an AM container or has
// an ask outstanding.
func demandPending(apps []*App) bool {
	for _, a := range apps {
		if a.State.Terminal() {
			continue
		}
		if a.AMPending {
			return true
		}
		for _, ask := range a.Asks {
			if ask.Count > 0 {
				return true
			}
		}
	}
	return false
}

// pass is the working state of one scheduling pass.
type pass struct {
	st      State
	tree    *tree
	nodes   []*candidate
	rackOf  map[string]string
	cluster Resources
	now     time.Time
	waits   *LocalityWaits
	cfg     SchedulerConfig
	missed  []askKey
	heap    *nodeHeap
	// gravities caches the center of gravity of each reduce ask of the
	// pass (see cogrs.go).
	gravities map[askKey]Locality
	reserved  map[string]string // node → the starved app its preempted room is for
}

// fence returns what keeps a off nodes in this pass: the nodes reserved
// for other apps, and its blacklist unless that is ignored (blacklist.go),
// worked out once per app and pass.
func (s *pass) fence(a *appNode) fence {
	if !a.avoidKnown {
		a.avoid, a.avoidKnown = AvoidedNodes(a.app.Blacklist, s.isReady, len(s.nodes)), true
	}
	return fence{app: a.app.ID, reserved: s.reserved, avoid: a.avoid}
}

// isReady reports whether id is one of the pass's (READY) nodes, which
// are sorted by ID.
func (s *pass) isReady(id string) bool {
	i := sort.Search(len(s.nodes), func(i int) bool { return s.nodes[i].node.ID >= id })
	return i < len(s.nodes) && s.nodes[i].node.ID == id
}

// reservations maps each node with containers being preempted to the app
// they are preempted for: until the victims are gone, only that app may
// use the node, so the room preemption frees is not taken by another. A
// node marked for two apps is reserved for the one whose victims die
// first. It reads the state's index of marked containers, not every
// container.
func reservations(st State) map[string]string {
	out := map[string]string{}
	for _, c := range st.PreemptionMarked() {
		if _, taken := out[c.NodeID]; !taken && c.PreemptFor != "" {
			out[c.NodeID] = c.PreemptFor
		}
	}
	return out
}

// assign places one container somewhere below q, or reports that nothing
// below q can be placed in this pass (and marks q blocked).
func (s *pass) assign(q *qnode) (Placement, bool) {
	if q.blocked || q.pending.IsZero() {
		return Placement{}, false
	}
	if q.queue.IsLeaf() {
		for {
			var best *appNode
			for _, a := range q.apps {
				if a.blocked || !a.runnable || a.pending.IsZero() {
					continue
				}
				if best == nil || a.app.Spec.Priority > best.app.Spec.Priority ||
					a.app.Spec.Priority == best.app.Spec.Priority && Less(q.queue.Policy, a.sched(), best.sched(), s.cluster) {
					best = a
				}
			}
			if best == nil {
				q.blocked = true
				return Placement{}, false
			}
			if p, ok := s.tryApp(q, best); ok {
				return p, true
			}
			best.blocked = true
		}
	}
	for {
		var best *qnode
		for _, c := range q.children {
			if c.blocked || c.pending.IsZero() {
				continue
			}
			if best == nil || Less(q.queue.Policy, c.sched(), best.sched(), s.cluster) {
				best = c
			}
		}
		if best == nil {
			q.blocked = true
			return Placement{}, false
		}
		if p, ok := s.assign(best); ok {
			return p, true
		}
	}
}

// tryApp places the app's AM container or its highest-priority ask.
func (s *pass) tryApp(leaf *qnode, a *appNode) (Placement, bool) {
	var r Resources
	var ask *Ask
	if a.app.AMPending {
		r = a.app.Spec.AMResources
	} else {
		for i := range a.asks {
			if a.asks[i].Count > 0 {
				ask = &a.asks[i]
				break
			}
		}
		if ask == nil {
			return Placement{}, false
		}
		r = ask.Resources
	}
	for q := leaf; q != nil; q = q.parent {
		if q.max != nil && !q.usage.Add(r).WithinLimit(*q.max) {
			return Placement{}, false
		}
	}
	if leaf.overUserLimit(a.app.Spec.User) {
		return Placement{}, false
	}
	var n *candidate
	var loc Locality
	var key askKey
	level := levelAny
	f := s.fence(a)
	if ask != nil {
		loc = ask.Locality
		key = askKey{a.app.ID, ask.AskID}
		if len(ask.Feeders) > 0 {
			loc = s.gravity(key, ask.Feeders)
		}
		if len(loc.Nodes) > 0 || len(loc.Racks) > 0 {
			level = allowedLevel(loc, s.waits.get(key, s.now), s.cfg.Locality, s.now)
		}
		switch {
		case level == levelAny && len(ask.Feeders) > 0:
			n = leastWTND(s.nodes, r, ask.Feeders, s.rackOf, f)
		case level == levelAny || level == levelRack:
			// Relaxed means it may go further, not that it must: a named
			// node with room comes first (a map on its split's node).
			n = s.namedNode(loc, r, f)
			if n == nil && level == levelAny {
				n = s.heap.best(r, f)
			} else if n == nil {
				n = pickNode(s.nodes, r, loc, level, s.rackOf, s.cfg.Placement, f)
				if n == nil && loc.Relax && s.heap.best(r, f) != nil {
					s.missed = append(s.missed, key)
				}
			}
		default:
			n = pickNode(s.nodes, r, loc, level, s.rackOf, s.cfg.Placement, f)
			if n == nil && loc.Relax && s.heap.best(r, f) != nil {
				s.missed = append(s.missed, key) // a looser level had room: one missed opportunity
			}
		}
	} else {
		n = s.heap.best(r, f)
	}
	if n == nil {
		// A capacity leaf's container that fits nowhere holds a node
		// until it does (reservation.go).
		p, ok := s.reserve(a, r, ask, loc, level)
		if ok {
			s.charge(leaf, a, ask, r)
		}
		return p, ok
	}
	p := Placement{AppID: a.app.ID, Attempt: a.app.CurrentAttempt(), NodeID: n.node.ID, Resources: r}
	if ask == nil {
		p.IsAM, p.Attempt = true, a.app.CurrentAttempt()+1
		a.app = withAMPlaced(a.app)
	} else {
		p.AskID = ask.AskID
		ask.Count--
		s.waits.placed(key)
	}
	n.free = n.free.Sub(r)
	n.refresh()
	s.heap.update(n)
	a.usage = a.usage.Add(r)
	s.chargeQueues(leaf, a, r)
	return p, true
}

// charge counts a reservation of r for a's ask (its AM container when ask
// is nil) as the pass counts a placement, but for the node's room.
func (s *pass) charge(leaf *qnode, a *appNode, ask *Ask, r Resources) {
	if ask == nil {
		a.app = withAMPlaced(a.app)
	} else {
		ask.Count--
	}
	s.chargeQueues(leaf, a, r)
}

// chargeQueues moves r from a's demand to its use, in its leaf, its
// user's and every ancestor's.
func (s *pass) chargeQueues(leaf *qnode, a *appNode, r Resources) {
	a.pending = a.pending.Sub(r)
	if leaf.cap != nil {
		leaf.cap.placed(a.app.Spec.User, r)
	}
	for q := leaf; q != nil; q = q.parent {
		q.usage = q.usage.Add(r)
		q.pending = q.pending.Sub(r)
	}
}

// withAMPlaced returns a copy of app that no longer needs its AM container
// (for the rest of the pass its task asks wait for the AM to register).
func withAMPlaced(app *App) *App {
	c := *app
	c.AMPending = false
	c.Asks = nil
	return &c
}

// nodeHeap orders a pass's nodes by allocated dominant share: least first
// for spread, most first for binpack. Nodes with no memory or no vcores
// left drop out, so a packed cluster costs nothing to search.
type nodeHeap struct {
	items   []*candidate
	binpack bool
}

func newNodeHeap(nodes []*candidate, binpack bool) *nodeHeap {
	h := &nodeHeap{binpack: binpack}
	for _, c := range nodes {
		if c.free.MemoryMB > 0 && c.free.Vcores > 0 {
			c.index = len(h.items)
			h.items = append(h.items, c)
		}
	}
	heap.Init(h)
	return h
}

func (h *nodeHeap) Len() int { return len(h.items) }
func (h *nodeHeap) Less(i, j int) bool {
	a, b := h.items[i], h.items[j]
	if a.share != b.share {
		return a.share < b.share != h.binpack
	}
	return a.node.ID < b.node.ID
}
func (h *nodeHeap) Swap(i, j int) {
	h.items[i], h.items[j] = h.items[j], h.items[i]
	h.items[i].index, h.items[j].index = i, j
}
func (h *nodeHeap) Push(x any) {
	c := x.(*candidate)
	c.index = len(h.items)
	h.items = append(h.items, c)
}
func (h *nodeHeap) Pop() any {
	c := h.items[len(h.items)-1]
	h.items = h.items[:len(h.items)-1]
	c.index = -1
	return c
}

// best returns the most preferred node with room for r that f does not
// bar, leaving the heap as it was.
func (h *nodeHeap) best(r Resources, f fence) *candidate {
	var skipped []*candidate
	var found *candidate
	for h.Len() > 0 {
		c := h.items[0]
		if r.Fits(c.free) && !f.bars(c.node.ID) {
			found = c
			break
		}
		skipped = append(skipped, heap.Pop(h).(*candidate))
	}
	for _, c := range skipped {
		heap.Push(h, c)
	}
	return found
}

// update restores the heap after c's free room changed.
func (h *nodeHeap) update(c *candidate) {
	switch {
	case c.index < 0:
	case c.free.MemoryMB <= 0 || c.free.Vcores <= 0:
		heap.Remove(h, c.index)
	default:
		heap.Fix(h, c.index)
	}
}

// gravity is the locality of a reduce ask with feeders: its centers of
// gravity among the pass's nodes, computed once per pass.
func (s *pass) gravity(key askKey, feeders []Feeder) Locality {
	if loc, ok := s.gravities[key]; ok {
		return loc
	}
	if s.gravities == nil {
		s.gravities = map[askKey]Locality{}
	}
	loc := gravityLocality(feeders, s.nodes, s.rackOf)
	s.gravities[key] = loc
	return loc
}
