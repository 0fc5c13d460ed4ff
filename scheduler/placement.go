package scheduler

import "sort"

// State is the read-only view of the cluster that scheduling decisions
// read. fsm.State satisfies it; tests use small in-memory versions.
type State interface {
	// Nodes returns every registered node.
	Nodes() []*Node
	// ActiveApps returns apps that are not finished, in submission order.
	ActiveApps() []*App
	// QueueConfig returns the queue configuration.
	QueueConfig() *QueueConfig
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

// PlanGuaranteed decides guaranteed placements for pending AM containers and
// asks: apps in submission order, within an app the AM first and then asks
// by priority (higher first), each on the node the placement policy prefers
// among READY nodes with room. Strict locality (relax=false) is honoured.
// It never places more than a node's free guaranteed capacity.
func PlanGuaranteed(st State) []Placement {
	nodes := readyNodes(st.Nodes())
	if len(nodes) == 0 {
		return nil
	}
	policy := st.QueueConfig().Scheduler.Placement
	cluster := Resources{}
	for _, n := range nodes {
		cluster = cluster.Add(n.node.Capacity)
	}
	var plan []Placement
	for _, app := range st.ActiveApps() {
		if app.State.Terminal() {
			continue
		}
		if app.AMPending {
			if n := pickNode(nodes, app.Spec.AMResources, Locality{Relax: true}, policy, cluster); n != nil {
				n.free = n.free.Sub(app.Spec.AMResources)
				plan = append(plan, Placement{AppID: app.ID, Attempt: app.CurrentAttempt() + 1, AskID: AMAskID,
					NodeID: n.node.ID, Resources: app.Spec.AMResources, IsAM: true})
			}
			continue // task asks belong to a registered attempt
		}
		if app.State != AppRunning {
			continue
		}
		asks := append([]Ask(nil), app.Asks...)
		sort.SliceStable(asks, func(i, j int) bool { return asks[i].Priority > asks[j].Priority })
		for _, ask := range asks {
			if ask.ExecutionType == Opportunistic {
				continue
			}
			for i := 0; i < ask.Count; i++ {
				n := pickNode(nodes, ask.Resources, ask.Locality, policy, cluster)
				if n == nil {
					break
				}
				n.free = n.free.Sub(ask.Resources)
				plan = append(plan, Placement{AppID: app.ID, Attempt: app.CurrentAttempt(), AskID: ask.AskID,
					NodeID: n.node.ID, Resources: ask.Resources})
			}
		}
	}
	return plan
}

type candidate struct {
	node *Node
	free Resources
}

func readyNodes(all []*Node) []*candidate {
	out := make([]*candidate, 0, len(all))
	for _, n := range all {
		if n.Status == NodeReady {
			out = append(out, &candidate{node: n, free: n.FreeGuaranteed()})
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].node.ID < out[j].node.ID })
	return out
}

// pickNode returns the node the placement policy prefers for r, or nil.
func pickNode(nodes []*candidate, r Resources, loc Locality, policy PlacementPolicy, cluster Resources) *candidate {
	var best *candidate
	var bestShare float64
	for _, c := range nodes {
		if !r.Fits(c.free) || !localityAllows(loc, c.node) {
			continue
		}
		share := DominantShare(c.node.Capacity.Sub(c.free), c.node.Capacity)
		if best == nil || policy == PlacementBinpack && share > bestShare || policy != PlacementBinpack && share < bestShare {
			best, bestShare = c, share
		}
	}
	return best
}

func localityAllows(loc Locality, n *Node) bool {
	if loc.Relax || len(loc.Nodes) == 0 && len(loc.Racks) == 0 {
		return true
	}
	for _, id := range loc.Nodes {
		if id == n.ID {
			return true
		}
	}
	for _, rack := range loc.Racks {
		if rack == n.Rack {
			return true
		}
	}
	return false
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
