package scheduler

import (
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
}

// Placement is one guaranteed container the leader decided to allocate.
// Its ID is assigned when the plan carrying it is applied.
type Placement struct {
	AppID     string    `codec:"app_id"`
	Attempt   int       `codec:"attempt"`
	AskID     uint64    `codec:"ask_id"`
	NodeID    string    `codec:"node_id"`
	Resources Resources `codec:"resources"`
	IsAM      bool      `codec:"is_am"`
}

// candidate is a node with what a pass has left of its guaranteed room.
type candidate struct {
	node *Node
	free Resources
}

func readyNodes(all []*Node) ([]*candidate, map[string]string, Resources) {
	out := make([]*candidate, 0, len(all))
	rackOf := make(map[string]string, len(all))
	var cluster Resources
	for _, n := range all {
		rackOf[n.ID] = n.Rack
		if n.Status == NodeReady {
			out = append(out, &candidate{node: n, free: n.FreeGuaranteed()})
			cluster = cluster.Add(n.Capacity)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].node.ID < out[j].node.ID })
	return out, rackOf, cluster
}

// pickNode returns the node the placement policy prefers for r among those
// acceptable at the locality level, or nil. Spread prefers the least
// allocated dominant share, binpack the most.
func pickNode(nodes []*candidate, r Resources, loc Locality, level int, rackOf map[string]string, policy PlacementPolicy) *candidate {
	var best *candidate
	var bestShare float64
	for _, c := range nodes {
		if !r.Fits(c.free) || !nodeAt(loc, c.node, level, rackOf) {
			continue
		}
		share := DominantShare(c.node.Capacity.Sub(c.free), c.node.Capacity)
		if best == nil || policy == PlacementBinpack && share > bestShare || policy != PlacementBinpack && share < bestShare {
			best, bestShare = c, share
		}
	}
	return best
}

// DominantShare is the largest component of used as a fraction of total
// (seed 004); resources absent from total are ignored.
func DominantShare(used, total Resources) float64 {
	var max float64
	for _, name := range total.Names() {
		t := total.Get(name)
		if t <= 0 {
			continue
		}
		if s := float64(used.Get(name)) / float64(t); s > max {
			max = s
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
// policy prefers, relaxing locality by delay scheduling. waits is the
// delay-scheduling memory kept between passes (it may be nil). At most
// maxPlacements are decided.
func Schedule(st State, now time.Time, waits *LocalityWaits, maxPlacements int) Decision {
	if waits == nil {
		waits = NewLocalityWaits()
	}
	nodes, rackOf, cluster := readyNodes(st.Nodes())
	var d Decision
	if len(nodes) == 0 {
		return d
	}
	t := buildTree(st, cluster)
	s := &pass{tree: t, nodes: nodes, rackOf: rackOf, cluster: cluster, now: now, waits: waits,
		cfg: st.QueueConfig().Scheduler}
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

// pass is the working state of one scheduling pass.
type pass struct {
	tree    *tree
	nodes   []*candidate
	rackOf  map[string]string
	cluster Resources
	now     time.Time
	waits   *LocalityWaits
	cfg     SchedulerConfig
	missed  []askKey
}

// assign places one container somewhere below q, or reports that nothing
// below q can be placed in this pass (and marks q blocked).
func (s *pass) assign(q *qnode) (Placement, bool) {
	if q.blocked || q.pending.IsZero() {
		return Placement{}, false
	}
	if q.queue.IsLeaf() {
		apps := make([]*appNode, 0, len(q.apps))
		for _, a := range q.apps {
			if !a.blocked && a.runnable && !a.pending.IsZero() {
				apps = append(apps, a)
			}
		}
		sort.Slice(apps, func(i, j int) bool {
			a, b := apps[i], apps[j]
			if a.app.Spec.Priority != b.app.Spec.Priority {
				return a.app.Spec.Priority > b.app.Spec.Priority
			}
			return Less(q.queue.Policy, a.sched(), b.sched(), s.cluster)
		})
		for _, a := range apps {
			if p, ok := s.tryApp(q, a); ok {
				return p, true
			}
			a.blocked = true
		}
		q.blocked = true
		return Placement{}, false
	}
	kids := make([]*qnode, 0, len(q.children))
	for _, c := range q.children {
		if !c.blocked && !c.pending.IsZero() {
			kids = append(kids, c)
		}
	}
	sort.Slice(kids, func(i, j int) bool {
		return Less(q.queue.Policy, kids[i].sched(), kids[j].sched(), s.cluster)
	})
	for _, c := range kids {
		if p, ok := s.assign(c); ok {
			return p, true
		}
	}
	q.blocked = true
	return Placement{}, false
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
		if q.queue.MaxResources != nil && !q.usage.Add(r).WithinLimit(*q.queue.MaxResources) {
			return Placement{}, false
		}
	}
	var n *candidate
	var loc Locality
	var key askKey
	if ask != nil {
		loc = ask.Locality
		key = askKey{a.app.ID, ask.AskID}
		level := levelAny
		if len(loc.Nodes) > 0 || len(loc.Racks) > 0 {
			level = allowedLevel(loc, s.waits.get(key, s.now), s.cfg.Locality, s.now)
		}
		n = pickNode(s.nodes, r, loc, level, s.rackOf, s.cfg.Placement)
		if n == nil && level < levelAny && loc.Relax && pickNode(s.nodes, r, loc, levelAny, s.rackOf, s.cfg.Placement) != nil {
			s.missed = append(s.missed, key) // a looser level had room: one missed opportunity
		}
	} else {
		n = pickNode(s.nodes, r, Locality{}, levelAny, s.rackOf, s.cfg.Placement)
	}
	if n == nil {
		return Placement{}, false
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
	a.usage = a.usage.Add(r)
	a.pending = a.pending.Sub(r)
	for q := leaf; q != nil; q = q.parent {
		q.usage = q.usage.Add(r)
		q.pending = q.pending.Sub(r)
	}
	return p, true
}

// withAMPlaced returns a copy of app that no longer needs its AM container
// (for the rest of the pass its task asks wait for the AM to register).
func withAMPlaced(app *App) *App {
	c := *app
	c.AMPending = false
	c.Asks = nil
	return &c
}
