package scheduler

import (
	"fmt"
	"math"
	"strings"
	"time"
)

// PendingReason says why an app, or its next ask, is not placed.
type PendingReason struct {
	Code    string // stable machine code, one of the Pending* constants
	Message string // one line a user can act on
}

// Codes of PendingReason (SPEC §16 "Why pending"). WhyPending tries them
// in this order and reports the first that applies: what no waiting mends
// first, then the limits, then room, then what the next pass will do.
const (
	// PendingNoNodes: no node is READY.
	PendingNoNodes = "no_nodes"
	// PendingNoNodeLargeEnough: the next container is larger than every
	// READY node's capacity.
	PendingNoNodeLargeEnough = "no_node_large_enough"
	// PendingMaxRunningApps: the app waits for a max_running_apps slot of
	// its leaf or an ancestor.
	PendingMaxRunningApps = "max_running_apps"
	// PendingMaxAMShare: the app's AM container would take its leaf's AM
	// containers past max_am_share.
	PendingMaxAMShare = "max_am_share"
	// PendingMaxResources: the next container would take the leaf or an
	// ancestor past its max_resources.
	PendingMaxResources = "max_resources"
	// PendingUserLimit: the app's user is at its capacity leaf's user
	// limit (user_limit_factor × capacity).
	PendingUserLimit = "user_limit"
	// PendingNodeReserved: the only nodes with room for it are reserved for
	// a starved app while preemption frees them.
	PendingNodeReserved = "node_reserved"
	// PendingBlacklisted: the only nodes with room for it are on the app's
	// node blacklist (blacklist.go).
	PendingBlacklisted = "blacklisted"
	// PendingClusterFull: no node has room for it; the message says
	// whether preemption may free some, and when.
	PendingClusterFull = "cluster_full"
	// PendingLocality: nodes elsewhere have room, but the ask's locality
	// (delay scheduling, or relax = false) does not accept them yet.
	PendingLocality = "locality"
	// PendingAMNotRegistered: the AM container is placed; the app waits for
	// the AM to register.
	PendingAMNotRegistered = "am_not_registered"
	// PendingAM: nothing holds the AM container back; the next scheduling
	// pass places it.
	PendingAM = "am_pending"
	// PendingAsk: nothing holds the next ask back; the next scheduling pass
	// places it.
	PendingAsk = "ask_pending"
)

// LocalityMemory is read-only access to the leader's delay-scheduling memory.
type LocalityMemory interface {
	// Wait reports how many scheduling opportunities an ask has missed and since when it waits.
	Wait(appID string, askID uint64) (missed int, since time.Time, ok bool)
}

// Wait implements LocalityMemory. It must not be called concurrently with
// Schedule, which updates the memory (see LocalityWaits).
func (l *LocalityWaits) Wait(appID string, askID uint64) (missed int, since time.Time, ok bool) {
	w, ok := l.waits[askKey{appID, askID}]
	if !ok {
		return 0, time.Time{}, false
	}
	return w.missed, w.since, true
}

// WhyPending explains, for every active app with unplaced demand (its AM or its asks), why it is not placed now.
// locality may be nil (a follower answering a stale read): locality waits are then reported without counts.
//
// It looks at the app's next container as a scheduling pass would (its AM
// while that is unplaced, else its highest-priority ask) against the state
// as it is, and reports the first reason that applies, in the order of the
// Pending* codes: whether any READY node exists and is large enough, the
// limits (max_running_apps, max_am_share, max_resources), whether a node
// has room that is not reserved for another app (nor on the app's
// blacklist in force), and whether the ask's
// locality accepts such a node now. An app whose AM is placed but has not
// registered is reported too; an app with nothing to place is not. It
// reads st only, costs O(apps + nodes) for clusters of a few node shapes
// (plus the live containers, to find reserved nodes, when preemption is
// on), and decides nothing.
func WhyPending(st State, now time.Time, locality LocalityMemory) map[string]PendingReason {
	v := newPendingView(st, now, locality)
	out := map[string]PendingReason{}
	for _, a := range v.t.apps {
		if r, ok := v.why(a); ok {
			out[a.app.ID] = r
		}
	}
	return out
}

// pendingView is the analysis WhyPending makes of one state.
type pendingView struct {
	t           *tree
	cfg         SchedulerConfig
	now         time.Time
	locality    LocalityMemory
	nodes       []*candidate
	byID        map[string]*candidate
	rackOf      map[string]string
	cluster     Resources
	shapes      []*candidate       // READY nodes of capacities no other one holds
	open        roomSet            // room on nodes reserved for nobody
	openRack    map[string]roomSet // the same by rack
	reserved    []*candidate       // nodes reserved for a starved app, by ID
	reservedFor map[string]string
	appFair     map[string]Resources
	victims     int // apps in preemptable queues over their fair share
	util        float64
}

func newPendingView(st State, now time.Time, locality LocalityMemory) *pendingView {
	nodes, rackOf, cluster := readyNodes(st.Nodes())
	t := buildTree(st, cluster)
	shares := t.fairShares(st.Queues(), cluster)
	t.holdAMs(shares, cluster, freeOf(nodes))
	v := &pendingView{t: t, cfg: st.QueueConfig().Scheduler, now: now, locality: locality, nodes: nodes,
		byID: make(map[string]*candidate, len(nodes)), rackOf: rackOf, cluster: cluster,
		openRack: map[string]roomSet{}, appFair: appFairShares(t, shares), util: utilization(nodes, cluster)}
	v.reservedFor = map[string]string{}
	if v.cfg.Preemption.Enabled {
		v.reservedFor = reservations(st)
	}
	for _, n := range nodes {
		v.byID[n.node.ID] = n
		v.addShape(n)
		if _, ok := v.reservedFor[n.node.ID]; ok {
			v.reserved = append(v.reserved, n)
			continue
		}
		v.open.add(n.free)
		rs := v.openRack[n.node.Rack]
		rs.add(n.free)
		v.openRack[n.node.Rack] = rs
	}
	for _, a := range t.apps {
		if a.queue.queue.Preemptable && belowShare(v.appFair[a.app.ID], a.usage, a.queue.queue.Policy, cluster) {
			v.victims++
		}
	}
	return v
}

// addShape keeps n among the node shapes unless another node's capacity
// holds n's, and drops those whose capacity n's holds.
func (v *pendingView) addShape(n *candidate) {
	for _, x := range v.shapes {
		if n.node.Capacity.Fits(x.node.Capacity) {
			return
		}
	}
	kept := v.shapes[:0]
	for _, x := range v.shapes {
		if !x.node.Capacity.Fits(n.node.Capacity) {
			kept = append(kept, x)
		}
	}
	v.shapes = append(kept, n)
}

// largeEnough reports whether some READY node's capacity holds r, and if
// none does, the node that comes closest: the one whose capacity covers
// the largest fraction of r in r's scarcest resource.
func (v *pendingView) largeEnough(r Resources) (bool, *candidate) {
	var closest *candidate
	best := -1.0
	for _, n := range v.shapes {
		if r.Fits(n.node.Capacity) {
			return true, nil
		}
		if c := coverage(n.node.Capacity, r); c > best {
			closest, best = n, c
		}
	}
	return false, closest
}

// coverage is the smallest fraction of a resource of r that capacity holds.
func coverage(capacity, r Resources) float64 {
	c := math.Inf(1)
	for _, name := range r.Names() {
		if want := r.Get(name); want > 0 {
			c = math.Min(c, float64(capacity.Get(name))/float64(want))
		}
	}
	return c
}

// utilization is the largest share of any resource allocated on nodes.
func utilization(nodes []*candidate, cluster Resources) float64 {
	var used Resources
	for _, n := range nodes {
		used = used.Add(n.node.AllocatedGuaranteed)
	}
	return DominantShare(used, cluster)
}

// roomSet answers whether a container fits in one of a set of nodes' room,
// keeping only rooms no other one holds entirely: few in practice, as
// nodes come in a few shapes.
type roomSet []Resources

func (s *roomSet) add(r Resources) {
	for _, x := range *s {
		if r.Fits(x) {
			return
		}
	}
	kept := (*s)[:0]
	for _, x := range *s {
		if !x.Fits(r) {
			kept = append(kept, x)
		}
	}
	*s = append(kept, r)
}

func (s roomSet) fits(r Resources) bool {
	for _, x := range s {
		if r.Fits(x) {
			return true
		}
	}
	return false
}

// why returns the reason of one app, or false when it has nothing pending.
// Reasons that no waiting mends come first (no node, none large enough),
// then the limits, then room.
func (v *pendingView) why(a *appNode) (PendingReason, bool) {
	r, ask := v.next(a)
	if ask == nil && !a.app.AMPending {
		if a.app.State == AppRunning {
			return PendingReason{}, false
		}
		node := "its node"
		if n := len(a.app.Attempts); n > 0 && a.app.Attempts[n-1].NodeID != "" {
			node = a.app.Attempts[n-1].NodeID
		}
		return PendingReason{PendingAMNotRegistered, fmt.Sprintf("AM container placed on %s, waiting for it to register", node)}, true
	}
	what := describe(r, ask)
	switch {
	case len(v.nodes) == 0:
		return PendingReason{PendingNoNodes, "no node is READY: nothing can be placed until a node registers or leaves DRAINING"}, true
	}
	if ok, closest := v.largeEnough(r); !ok {
		return PendingReason{PendingNoNodeLargeEnough, fmt.Sprintf("%s is larger than every node; the largest is %s (%s)",
			what, closest.node.ID, closest.node.Capacity)}, true
	}
	switch {
	case !a.runnable:
		return PendingReason{PendingMaxRunningApps, a.waiting}, true
	case a.amHeld:
		return PendingReason{PendingMaxAMShare, a.waiting}, true
	}
	for q := a.queue; q != nil; q = q.parent {
		if m := q.max; m != nil && !q.usage.Add(r).WithinLimit(*m) {
			limit := "max_resources"
			if q.queue.Capacity != nil {
				limit = "max_capacity"
			}
			return PendingReason{PendingMaxResources, fmt.Sprintf("queue %s is at %s %s: it uses %s, and %s would pass it",
				q.queue.Path, limit, m, q.usage, what)}, true
		}
	}
	if a.queue.overUserLimit(a.app.Spec.User) {
		return PendingReason{PendingUserLimit, a.queue.cap.describe(a.queue.queue, a.app.Spec.User, a.queue.usage)}, true
	}
	if !v.roomAnywhere(a.app.ID, r) {
		for _, n := range v.reserved {
			if x := v.reservedFor[n.node.ID]; x != a.app.ID && r.Fits(n.free) {
				return PendingReason{PendingNodeReserved, fmt.Sprintf(
					"the only nodes with room for %s are reserved for starved app %s while preemption frees them (%s)", what, x, n.node.ID)}, true
			}
		}
		return PendingReason{PendingClusterFull, v.clusterFull(a, what)}, true
	}
	if avoid := AvoidedNodes(a.app.Blacklist, v.isReady, len(v.nodes)); avoid != nil && !v.roomOff(a.app.ID, r, avoid) {
		return PendingReason{PendingBlacklisted, fmt.Sprintf("the only nodes with room for %s are on the app's blacklist (%s): it waits for room elsewhere",
			what, strings.Join(a.app.Blacklist, ", "))}, true
	}
	if ask != nil {
		if msg, waiting := v.localityWait(a.app.ID, ask); waiting {
			return PendingReason{PendingLocality, msg}, true
		}
		return PendingReason{PendingAsk, fmt.Sprintf("%s is not placed yet: nothing holds it back, the next scheduling pass places it", what)}, true
	}
	return PendingReason{PendingAM, "AM container not placed yet: nothing holds it back, the next scheduling pass places it"}, true
}

// next is what a pass would place next for a: its AM (ask nil) or its
// highest-priority ask with containers left.
func (v *pendingView) next(a *appNode) (Resources, *Ask) {
	if a.app.AMPending {
		return a.app.Spec.AMResources, nil
	}
	for i := range a.asks {
		if a.asks[i].Count > 0 {
			return a.asks[i].Resources, &a.asks[i]
		}
	}
	return Resources{}, nil
}

func describe(r Resources, ask *Ask) string {
	if ask == nil {
		return fmt.Sprintf("the AM container (%s)", r)
	}
	return fmt.Sprintf("ask %d (%d × %s)", ask.AskID, ask.Count, r)
}

// usable reports whether app may be placed on n: it is reserved for no
// other app.
func (v *pendingView) usable(n *candidate, app string) bool {
	x, ok := v.reservedFor[n.node.ID]
	return !ok || x == app
}

// isReady reports whether id is a READY node.
func (v *pendingView) isReady(id string) bool { return v.byID[id] != nil }

// roomOff reports whether r fits a node app may use that is not in avoid.
// It walks every READY node: only apps with a blacklist in force call it.
func (v *pendingView) roomOff(app string, r Resources, avoid NodeSet) bool {
	for _, n := range v.nodes {
		if !avoid.Has(n.node.ID) && v.usable(n, app) && r.Fits(n.free) {
			return true
		}
	}
	return false
}

// roomAnywhere reports whether r fits a node app may use.
func (v *pendingView) roomAnywhere(app string, r Resources) bool {
	if v.open.fits(r) {
		return true
	}
	for _, n := range v.reserved {
		if v.reservedFor[n.node.ID] == app && r.Fits(n.free) {
			return true
		}
	}
	return false
}

// roomAt reports whether r fits a node app may use that loc accepts at
// level (see nodeAt).
func (v *pendingView) roomAt(app string, r Resources, loc Locality, level int) bool {
	for _, id := range loc.Nodes {
		if n := v.byID[id]; n != nil && v.usable(n, app) && r.Fits(n.free) {
			return true
		}
	}
	if level == levelNode && len(loc.Nodes) > 0 {
		return false
	}
	racks := loc.Racks
	if level != levelStrict {
		for _, id := range loc.Nodes {
			racks = append(racks[:len(racks):len(racks)], v.rackOf[id])
		}
	}
	for _, rack := range racks {
		if v.openRack[rack].fits(r) {
			return true
		}
		for _, n := range v.reserved {
			if n.node.Rack == rack && v.reservedFor[n.node.ID] == app && r.Fits(n.free) {
				return true
			}
		}
	}
	return false
}

// localityWait reports whether an ask that some node has room for waits
// because its locality does not accept those nodes yet, and says how long.
func (v *pendingView) localityWait(app string, ask *Ask) (string, bool) {
	loc := ask.Locality
	if len(loc.Nodes) == 0 && len(loc.Racks) == 0 {
		return "", false
	}
	w := &localityWait{since: v.now} // an ask no pass has considered yet waits from now
	if v.locality != nil {
		if missed, since, ok := v.locality.Wait(app, ask.AskID); ok {
			w.missed, w.since = missed, since
		}
	}
	level := allowedLevel(loc, w, v.cfg.Locality, v.now)
	if level == levelAny || v.roomAt(app, ask.Resources, loc, level) {
		return "", false
	}
	where := describeLocality(loc)
	if level == levelStrict {
		return fmt.Sprintf("ask %d may only run on %s (relax = false), and none of them has room; other nodes do", ask.AskID, where), true
	}
	delay, name := v.cfg.Locality.NodeDelay, "node_delay"
	if level == levelRack {
		delay, name = Delay{Opportunities: delay.Opportunities + v.cfg.Locality.RackDelay.Opportunities,
			Duration: delay.Duration + v.cfg.Locality.RackDelay.Duration}, "node_delay + rack_delay"
		where = "the racks of " + where
	}
	switch {
	case v.locality == nil:
		return fmt.Sprintf("waiting for locality on %s (%s %s); other nodes have room", where, name, delay), true
	case delay.Duration > 0:
		return fmt.Sprintf("waiting for locality on %s: waited %s of %s %s; other nodes have room",
			where, v.now.Sub(w.since).Round(time.Millisecond), name, delay.Duration), true
	}
	return fmt.Sprintf("waiting for locality on %s: %d of %s %d opportunities skipped; other nodes have room",
		where, w.missed, name, delay.Opportunities), true
}

func describeLocality(loc Locality) string {
	var parts []string
	if len(loc.Nodes) > 0 {
		parts = append(parts, "nodes "+strings.Join(loc.Nodes, ", "))
	}
	if len(loc.Racks) > 0 {
		parts = append(parts, "racks "+strings.Join(loc.Racks, ", "))
	}
	return strings.Join(parts, " and ")
}

// clusterFull words why no node has room for an app, and whether
// preemption may make some, by the configuration (SPEC §11).
func (v *pendingView) clusterFull(a *appNode, what string) string {
	q := a.queue.queue
	fair := v.appFair[a.app.ID]
	head := fmt.Sprintf("no node has room for %s; the app holds %s", what, a.usage)
	const wait = "it waits for running containers to end"
	if !v.cfg.Preemption.Enabled {
		return fmt.Sprintf("%s (its fair share is %s) and preemption is off: %s", head, fair, wait)
	}
	if !belowShare(a.usage, fair, q.Policy, v.cluster) {
		return fmt.Sprintf("%s, at or over its fair share %s, so preemption does not act for it: %s", head, fair, wait)
	}
	head = fmt.Sprintf("%s, below its fair share %s", head, fair)
	threshold := fair.ScaleFloat(q.FairSharePreemptionThreshold)
	fairShare := q.FairSharePreemptionTimeout > 0 && belowShare(a.usage, threshold, q.Policy, v.cluster)
	minShare := q.MinSharePreemptionTimeout > 0 && !q.MinResources.IsZero() &&
		positive(clampPositive(minEachRes(q.MinResources, a.queue.usage.Add(a.queue.pending)).Sub(a.queue.usage)))
	switch {
	case !fairShare && !minShare && q.FairSharePreemptionTimeout == 0:
		return fmt.Sprintf("%s, but queue %s has no fair_share_preemption_timeout, so it never starves: %s", head, q.Path, wait)
	case !fairShare && !minShare:
		return fmt.Sprintf("%s, but not below fair_share_preemption_threshold %g of it (%s), so it does not starve: %s",
			head, q.FairSharePreemptionThreshold, threshold, wait)
	case v.util < v.cfg.Preemption.ClusterUtilizationThreshold:
		return fmt.Sprintf("%s, but cluster utilization %.0f%% is under preemption's cluster_utilization_threshold %.0f%%: %s",
			head, 100*v.util, 100*v.cfg.Preemption.ClusterUtilizationThreshold, wait)
	case v.victims == 0:
		return fmt.Sprintf("%s, but no app in a preemptable queue is over its fair share: preemption would take them below theirs, so %s",
			head, wait)
	case fairShare:
		return fmt.Sprintf("%s: preemption may free room once it has been below %g of it for fair_share_preemption_timeout %s",
			head, q.FairSharePreemptionThreshold, q.FairSharePreemptionTimeout)
	}
	return fmt.Sprintf("%s, and queue %s is below its min share %s: preemption may free room once it has been so for min_share_preemption_timeout %s",
		head, q.Path, q.MinResources, q.MinSharePreemptionTimeout)
}
