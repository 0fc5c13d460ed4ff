package scheduler

import (
	"fmt"
	"math"
	"sort"
	"time"
)

// StarvationClocks is the leader's memory, kept between preemption passes,
// of since when each app has been below its fair-share threshold and each
// queue below its min share. A new leader starts with empty clocks, so a
// failover never preempts early.
type StarvationClocks struct {
	apps   map[string]time.Time
	queues map[string]time.Time
}

// NewStarvationClocks returns clocks with nothing starving.
func NewStarvationClocks() *StarvationClocks {
	return &StarvationClocks{apps: map[string]time.Time{}, queues: map[string]time.Time{}}
}

// tick records whether key is below its share now and reports for how long
// it has been.
func tick(m map[string]time.Time, seen map[string]bool, key string, below bool, now time.Time) time.Duration {
	if !below {
		delete(m, key)
		return 0
	}
	seen[key] = true
	since, ok := m[key]
	if !ok {
		m[key] = now
		return 0
	}
	return now.Sub(since)
}

// Preemption is a container to take from its app, and for whom.
type Preemption struct {
	ContainerID string
	VictimApp   string
	NodeID      string
	Resources   Resources
	ForApp      string
	Reason      string
}

// PlanPreemption decides which guaranteed containers to preempt (SPEC §11,
// seed 002). It does nothing unless preemption is enabled and cluster
// utilization (the largest share of any resource allocated) reaches the
// threshold. An app starves for its fair share when it has unmet demand
// and its usage stays below threshold × instantaneous fair share for
// fair_share_preemption_timeout; a queue starves for its min share when it
// has unmet demand and stays below min share for min_share_preemption_timeout,
// the amount going to its apps by demand, largest first. An AM container
// that max_am_share holds back is no unmet demand: preempting others would
// not let it run. The starved amount (less what marked containers are
// already freeing for the app) becomes whole containers of the app's
// requests, no more than it holds as the queue's policy measures (see
// starvedRequests). For each such container it picks, on one node,
// containers of apps over their fair share in preemptable queues whose
// release (with what is free) fits the request, never taking an app below
// its fair share, non-AM containers first, and the node with fewest AM
// victims first; at the first container no node can be freed enough for
// (or that fits somewhere already), nothing more is preempted for that app.
func PlanPreemption(st State, now time.Time, clocks *StarvationClocks) []Preemption {
	cfg := st.QueueConfig().Scheduler.Preemption
	if !cfg.Enabled {
		clocks.apps, clocks.queues = map[string]time.Time{}, map[string]time.Time{}
		return nil
	}
	nodes, _, cluster := readyNodes(st.Nodes())
	t := buildTree(st, cluster)
	shares := t.fairShares(st.Queues(), cluster)
	t.holdAMs(shares, cluster, freeOf(nodes)) // an AM max_am_share holds back does not starve
	appFair := appFairShares(t, shares)

	// What is already being freed: per starved app, and per node for the
	// app the node is reserved for (no other app may use that room).
	inFlight := map[string]Resources{}
	marked := map[string]bool{}
	room := newPreemptRoom(nodes)
	for _, c := range st.PreemptionMarked() {
		inFlight[c.PreemptFor] = inFlight[c.PreemptFor].Add(c.Resources)
		marked[c.ID] = true
		room.add(c.NodeID, c.PreemptFor, c.Resources)
	}

	starved := starvation(t, shares, appFair, clocks, now, cluster)
	if utilization(nodes, cluster) < cfg.ClusterUtilizationThreshold || len(starved) == 0 {
		return nil
	}
	remaining := map[string]Resources{} // victim apps' usage as preemption proceeds
	for _, a := range t.apps {
		remaining[a.app.ID] = a.usage
	}
	var out []Preemption
	for _, s := range starved {
		amount := clampPositive(s.amount.Sub(inFlight[s.app.app.ID]))
	requests:
		for _, rr := range starvedRequests(s.app, amount, cluster) {
			for i := 0; i < rr.count; i++ {
				victims, node := pickVictims(st, nodes, room, t, cluster, rr.res, s.app.app.ID, appFair, remaining, marked)
				if node == nil {
					// The scheduler places an app's requests in this
					// order: room freed for a later one would wait.
					break requests
				}
				id, forApp := node.node.ID, s.app.app.ID
				for _, c := range victims {
					marked[c.ID] = true
					remaining[c.AppID] = remaining[c.AppID].Sub(c.Resources)
					room.add(id, forApp, c.Resources)
					out = append(out, Preemption{ContainerID: c.ID, VictimApp: c.AppID, NodeID: c.NodeID, Resources: c.Resources,
						ForApp: forApp, Reason: s.reason})
				}
				room.add(id, forApp, Resources{}.Sub(rr.res)) // the room is the starved app's now
			}
		}
	}
	return out
}

type starvedApp struct {
	app    *appNode
	amount Resources
	reason string
}

// appFairShares divides each leaf's instantaneous fair share among its
// runnable apps by weight 1.
func appFairShares(t *tree, shares QueueShares) map[string]Resources {
	out := map[string]Resources{}
	for path, q := range t.byPath {
		if !q.queue.IsLeaf() {
			continue
		}
		var apps []*appNode
		for _, a := range q.apps {
			if a.runnable {
				apps = append(apps, a)
			}
		}
		parts := make([]Shareable, len(apps))
		for i := range parts {
			parts[i] = Shareable{Weight: 1}
		}
		for i, s := range ComputeShares(parts, shares.Instantaneous[path]) {
			out[apps[i].app.ID] = s
		}
	}
	return out
}

func starvation(t *tree, shares QueueShares, appFair map[string]Resources, clocks *StarvationClocks, now time.Time, cluster Resources) []starvedApp {
	seenApps, seenQueues := map[string]bool{}, map[string]bool{}
	byApp := map[string]*starvedApp{}
	var order []string
	add := func(a *appNode, amount Resources, reason string) {
		if s, ok := byApp[a.app.ID]; ok {
			s.amount = maxEach(s.amount, amount)
			return
		}
		byApp[a.app.ID] = &starvedApp{app: a, amount: amount, reason: reason}
		order = append(order, a.app.ID)
	}
	for _, a := range t.apps {
		q := a.queue.queue
		if !a.runnable {
			continue
		}
		// The clock runs while the app stays below threshold × fair share
		// (as its policy compares), even for a moment without outstanding
		// asks (its AM registering); preemption needs unmet demand now, and
		// takes min(threshold × fair share, demand) − usage (YARN).
		threshold := appFair[a.app.ID].ScaleFloat(q.FairSharePreemptionThreshold)
		below := belowShare(a.usage, threshold, q.Policy, cluster)
		waited := tick(clocks.apps, seenApps, a.app.ID, below, now)
		fairDemand := minEachRes(threshold, a.usage.Add(a.pending))
		amount := clampPositive(fairDemand.Sub(a.usage))
		if q.FairSharePreemptionTimeout > 0 && below && positive(amount) && waited >= q.FairSharePreemptionTimeout {
			add(a, amount, fmt.Sprintf("fair-share starvation of %s in %s: below %g of its fair share %s for %s",
				a.app.ID, q.Path, q.FairSharePreemptionThreshold, appFair[a.app.ID], q.FairSharePreemptionTimeout))
		}
	}
	for path, q := range t.byPath {
		if !q.queue.IsLeaf() || q.queue.MinResources.IsZero() || q.pending.IsZero() {
			continue
		}
		amount := clampPositive(minEachRes(q.queue.MinResources, q.usage.Add(q.pending)).Sub(q.usage))
		waited := tick(clocks.queues, seenQueues, path, positive(amount), now)
		if q.queue.MinSharePreemptionTimeout <= 0 || !positive(amount) || waited < q.queue.MinSharePreemptionTimeout {
			continue
		}
		// The starved amount goes to the queue's apps by demand, largest first.
		var apps []*appNode
		for _, a := range q.apps {
			if a.runnable && !a.pending.IsZero() {
				apps = append(apps, a)
			}
		}
		sort.SliceStable(apps, func(i, j int) bool { return apps[i].pending.MemoryMB > apps[j].pending.MemoryMB })
		for _, a := range apps {
			give := minEachRes(amount, a.pending)
			if !positive(give) {
				break
			}
			amount = clampPositive(amount.Sub(give))
			add(a, give, fmt.Sprintf("min-share starvation of queue %s: below its min share %s for %s",
				path, q.queue.MinResources, q.queue.MinSharePreemptionTimeout))
		}
	}
	for k := range clocks.apps {
		if !seenApps[k] {
			delete(clocks.apps, k)
		}
	}
	for k := range clocks.queues {
		if !seenQueues[k] {
			delete(clocks.queues, k)
		}
	}
	out := make([]starvedApp, 0, len(order))
	for _, id := range order {
		out = append(out, *byApp[id])
	}
	return out
}

// starvedRequest is count containers of res that preemption frees room for.
type starvedRequest struct {
	res   Resources
	count int
}

// starvedRequests turns a starved amount into whole containers of the app's
// requests (YARN FSAppAttempt.getStarvedResourceRequests): its AM container
// while that is pending, then its asks by priority, highest first; of each
// it takes n = floor(starved ÷ request) containers, at most the ask's count,
// measuring the ratio the way the app's queue policy does (see starvedRatio),
// and takes n × request off starved, until starved is no longer positive by
// that measure. A request larger than what is left is skipped.
func starvedRequests(a *appNode, starved, cluster Resources) []starvedRequest {
	p := a.queue.queue.Policy
	var out []starvedRequest
	take := func(r Resources, count int) bool {
		n := min(starvedRatio(starved, r, p, cluster), count)
		if n > 0 {
			out = append(out, starvedRequest{res: r, count: n})
			starved = clampPositive(starved.Sub(r.Scale(int64(n))))
		}
		return positiveBy(starved, p, cluster)
	}
	if !positiveBy(starved, p, cluster) {
		return nil
	}
	if a.app.AMPending && !take(a.app.Spec.AMResources, 1) {
		return out
	}
	for _, ask := range a.asks {
		if ask.Count > 0 && !take(ask.Resources, ask.Count) {
			break
		}
	}
	return out
}

// starvedRatio is how many whole containers of r the starved amount holds:
// by memory for fair and fifo, by dominant share of the cluster for drf
// (DominantShare(starved) ÷ DominantShare(r)), as belowShare measures.
func starvedRatio(starved, r Resources, p Policy, cluster Resources) int {
	var num, den float64
	if p == PolicyDRF {
		num, den = DominantShare(starved, cluster), DominantShare(r, cluster)
	} else {
		num, den = float64(starved.MemoryMB), float64(r.MemoryMB)
	}
	switch {
	case num <= 0:
		return 0
	case den <= 0:
		return math.MaxInt
	}
	return int(min(math.Floor(num/den+1e-9), math.MaxInt32)) // shares are floats: 1 ÷ (1/3) is 3
}

// positiveBy reports whether r is more than nothing as the policy measures.
func positiveBy(r Resources, p Policy, cluster Resources) bool {
	if p == PolicyDRF {
		return DominantShare(r, cluster) > 0
	}
	return r.MemoryMB > 0
}

// preemptRoom is the room being freed by preemption, per node and per
// starved app it is freed for: that room is the app's, never another's.
type preemptRoom struct {
	byNode map[string]map[string]Resources
	nodes  map[string]*candidate
	// fitsFree caches whether a request (by its String) fits some node's
	// free capacity: that does not change during a pass.
	fitsFree map[string]bool
}

func newPreemptRoom(nodes []*candidate) *preemptRoom {
	r := &preemptRoom{byNode: map[string]map[string]Resources{}, nodes: make(map[string]*candidate, len(nodes)), fitsFree: map[string]bool{}}
	for _, n := range nodes {
		r.nodes[n.node.ID] = n
	}
	return r
}

func (r *preemptRoom) add(node, app string, res Resources) {
	if r.byNode[node] == nil {
		r.byNode[node] = map[string]Resources{}
	}
	r.byNode[node][app] = r.byNode[node][app].Add(res)
}

// freeFor returns what app could use on n: its free capacity and the room
// being freed there for app.
func (r *preemptRoom) freeFor(n *candidate, app string) Resources {
	return n.free.Add(r.byNode[n.node.ID][app])
}

// fitsSomewhere reports whether ask fits what app could use on some node.
func (r *preemptRoom) fitsSomewhere(ask Resources, app string) bool {
	key := ask.String()
	fits, known := r.fitsFree[key]
	if !known {
		for _, n := range r.nodes {
			if ask.Fits(n.free) {
				fits = true
				break
			}
		}
		r.fitsFree[key] = fits
	}
	if fits {
		return true
	}
	for id, byApp := range r.byNode {
		if room, ok := byApp[app]; ok {
			if n := r.nodes[id]; n != nil && ask.Fits(n.free.Add(room)) {
				return true
			}
		}
	}
	return false
}

// pickVictims finds the node where the fewest (AM-sparing) victims free
// room for ask. It returns nothing when ask already fits somewhere it may
// go — the scheduler will place it — or when no node can be freed enough.
// Room being freed for another starved app is not ask's. A node that needs
// one victim and no AM is as good as any: the search stops there.
func pickVictims(st State, nodes []*candidate, room *preemptRoom, t *tree, cluster, ask Resources, forApp string,
	appFair, remaining map[string]Resources, marked map[string]bool) ([]*Container, *candidate) {
	if room.fitsSomewhere(ask, forApp) {
		return nil, nil
	}
	var best []*Container
	var bestNode *candidate
	bestAMs := 0
	for _, n := range nodes {
		free := room.freeFor(n, forApp)
		var cands []*Container
		for _, c := range st.NodeLiveContainers(n.node.ID) {
			if marked[c.ID] || c.ExecutionType != Guaranteed || c.AppID == forApp {
				continue
			}
			an := t.byApp[c.AppID]
			if an == nil || !an.queue.queue.Preemptable {
				continue
			}
			cands = append(cands, c)
		}
		sort.SliceStable(cands, func(i, j int) bool {
			if cands[i].IsAM != cands[j].IsAM {
				return !cands[i].IsAM
			}
			return cands[i].CreateIndex > cands[j].CreateIndex // newest first
		})
		left := map[string]Resources{}
		var victims []*Container
		ams := 0
		for _, c := range cands {
			if ask.Fits(free) {
				break
			}
			u, ok := left[c.AppID]
			if !ok {
				u = remaining[c.AppID]
			}
			after := u.Sub(c.Resources)
			if belowShare(after, appFair[c.AppID], t.byApp[c.AppID].queue.queue.Policy, cluster) {
				continue // would take its app below its fair share
			}
			left[c.AppID] = after
			victims = append(victims, c)
			free = free.Add(c.Resources)
			if c.IsAM {
				ams++
			}
		}
		if !ask.Fits(free) {
			continue
		}
		if bestNode == nil || ams < bestAMs || ams == bestAMs && len(victims) < len(best) {
			best, bestNode, bestAMs = victims, n, ams
			if ams == 0 && len(victims) <= 1 {
				break // no node can do better
			}
		}
	}
	return best, bestNode
}

// belowShare compares usage with a share the way the queue's policy does
// (YARN's resource calculators): drf by dominant share of the cluster,
// fair and fifo by memory.
func belowShare(usage, share Resources, p Policy, cluster Resources) bool {
	if p == PolicyDRF {
		return DominantShare(usage, cluster) < DominantShare(share, cluster)
	}
	return usage.MemoryMB < share.MemoryMB
}

func positive(r Resources) bool {
	if r.MemoryMB > 0 || r.Vcores > 0 {
		return true
	}
	for _, v := range r.Extended {
		if v > 0 {
			return true
		}
	}
	return false
}

func clampPositive(r Resources) Resources {
	out := Resources{MemoryMB: max(0, r.MemoryMB), Vcores: max(0, r.Vcores)}
	for k, v := range r.Extended {
		if v > 0 {
			out = out.With(k, v)
		}
	}
	return out
}

func minEachRes(a, b Resources) Resources {
	out := Resources{MemoryMB: min(a.MemoryMB, b.MemoryMB), Vcores: min(a.Vcores, b.Vcores)}
	for k, v := range a.Extended {
		out = out.With(k, min(v, b.Extended[k]))
	}
	return out
}

func maxEach(a, b Resources) Resources {
	out := Resources{MemoryMB: max(a.MemoryMB, b.MemoryMB), Vcores: max(a.Vcores, b.Vcores)}
	for k, v := range a.Extended {
		out = out.With(k, max(v, b.Extended[k]))
	}
	for k, v := range b.Extended {
		if _, ok := a.Extended[k]; !ok {
			out = out.With(k, v)
		}
	}
	return out
}
