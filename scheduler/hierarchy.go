package scheduler

import (
	"fmt"
	"sort"
)

// tree is the queue hierarchy with the apps and usage of one state, the
// working structure of a scheduling pass.
type tree struct {
	root   *qnode
	byPath map[string]*qnode
	apps   []*appNode
	byApp  map[string]*appNode
	// held are the capacity queues' node reservations (reservation.go).
	held []heldNode
}

type qnode struct {
	queue    *Queue
	parent   *qnode
	children []*qnode
	apps     []*appNode // leaves only, in submission order
	usage    Resources  // guaranteed usage of every app below
	pending  Resources  // what runnable apps below still ask for
	demand   Resources  // what every app below still asks for (for display)
	start    uint64     // oldest runnable app with pending work below
	running  int        // apps occupying a max_running_apps slot below
	amUsage  Resources  // leaves: AM containers their apps hold
	blocked  bool       // nothing below can be placed in this pass
	// max is the queue's limit: max_resources, or a capacity queue's
	// max_capacity (nil: none).
	max *Resources
	// cap is a capacity leaf's limits and users (nil: not one).
	cap *capLeaf
	s   Schedulable
}

type appNode struct {
	app      *App
	queue    *qnode
	usage    Resources
	pending  Resources
	asks     []Ask // by priority, highest first
	runnable bool
	amHeld   bool   // its AM would pass its leaf's max_am_share (see holdAMs)
	waiting  string // why a non-runnable or AM-held app waits
	blocked  bool
	s        Schedulable
	// avoid is the app's blacklist as a pass honours it (nil: none or
	// ignored), once avoidKnown.
	avoid      NodeSet
	avoidKnown bool
	// reservations is how many nodes the app holds reserved.
	reservations int
}

func (q *qnode) sched() *Schedulable {
	q.s.Usage, q.s.Demand = q.usage, q.usage.Add(q.pending)
	return &q.s
}

func (a *appNode) sched() *Schedulable {
	a.s.Usage, a.s.Demand = a.usage, a.usage.Add(a.pending)
	return &a.s
}

// occupiesSlot reports whether an app counts against max_running_apps: it
// has (or had, in this attempt) an AM container, or is running.
func occupiesSlot(a *App) bool { return !a.AMPending || a.State == AppRunning }

func buildTree(st State, cluster Resources) *tree {
	t := &tree{byPath: map[string]*qnode{}, byApp: map[string]*appNode{}}
	for _, q := range st.Queues() {
		n := &qnode{queue: q, start: ^uint64(0)}
		n.s = Schedulable{Name: q.Path, Weight: q.Weight, Min: q.MinResources}
		if q.Parent == "" {
			t.root = n
		} else if p := t.byPath[q.Parent]; p != nil {
			n.parent = p
			p.children = append(p.children, n)
		}
		n.max = q.MaxResources
		t.byPath[q.Path] = n
	}
	t.capacities(st.Queues(), cluster, st.QueueConfig().Scheduler.Capacity.MinAllocation())
	// Apps in submission order: slots of max_running_apps go first come,
	// first served, and apps that already hold one keep it.
	apps := st.ActiveApps()
	for pass := 0; pass < 2; pass++ {
		for _, app := range apps {
			leaf := t.byPath[app.Queue]
			if leaf == nil || occupiesSlot(app) != (pass == 0) {
				continue
			}
			a := &appNode{app: app, queue: leaf, usage: app.Used, pending: app.Pending()}
			a.s = Schedulable{Name: app.ID, Weight: 1, Priority: app.Spec.Priority, Start: app.CreateIndex}
			a.asks = append([]Ask(nil), app.Asks...)
			sort.SliceStable(a.asks, func(i, j int) bool { return a.asks[i].Priority > a.asks[j].Priority })
			reserved := t.holdReserved(a, leaf)
			a.runnable = true
			if pass == 1 {
				for q := leaf; q != nil; q = q.parent {
					if q.queue.MaxRunningApps != nil && q.running >= *q.queue.MaxRunningApps {
						a.runnable = false
						a.waiting = fmt.Sprintf("queue %s is at max_running_apps %d", q.queue.Path, *q.queue.MaxRunningApps)
						break
					}
				}
			}
			for q := leaf; q != nil; q = q.parent {
				q.usage = q.usage.Add(a.usage).Add(reserved)
				q.demand = q.demand.Add(a.pending)
				if a.runnable {
					q.running++
					q.pending = q.pending.Add(a.pending)
					if !a.pending.IsZero() && app.CreateIndex < q.start {
						q.start = app.CreateIndex
					}
				}
			}
			if !app.AMPending {
				leaf.amUsage = leaf.amUsage.Add(app.Spec.AMResources)
			}
			if leaf.cap != nil {
				u := leaf.cap.user(app.Spec.User)
				u.used = u.used.Add(a.usage).Add(reserved)
				if a.runnable {
					leaf.cap.addDemand(app.Spec.User, a.pending)
				}
			}
			leaf.apps = append(leaf.apps, a)
			t.apps = append(t.apps, a)
			t.byApp[app.ID] = a
		}
	}
	for _, q := range t.byPath {
		sort.Slice(q.apps, func(i, j int) bool { return q.apps[i].app.CreateIndex < q.apps[j].app.CreateIndex })
		q.s.Start = q.start
	}
	return t
}

// holdReserved takes a's reservations that still stand (reservation.go)
// out of its demand and asks, records them for the pass, and returns
// what they hold, which counts against its leaf and user as use does.
// Only capacity leaves hold reservations.
func (t *tree) holdReserved(a *appNode, leaf *qnode) Resources {
	var held Resources
	if leaf.cap == nil {
		return held
	}
	for i := range a.app.Reservations {
		r := &a.app.Reservations[i]
		if reservationGone(a.app, r, i) != "" {
			continue // the pass leaves it; the FSM releases it
		}
		if r.IsAM {
			a.app = withAMPlaced(a.app)
		} else if k := askIndexOf(a.asks, r.AskID); k >= 0 {
			a.asks[k].Count--
		}
		a.pending = clampPositive(a.pending.Sub(r.Resources))
		a.reservations++
		held = held.Add(r.Resources)
		t.held = append(t.held, heldNode{r: r, app: a})
	}
	return held
}

// fairShares computes every queue's steady and instantaneous fair share,
// a leaf being active when it has a runnable app.
func (t *tree) fairShares(queues []*Queue, cluster Resources) QueueShares {
	active := map[string]bool{}
	for _, a := range t.apps {
		if a.runnable {
			active[a.queue.queue.Path] = true
		}
	}
	return ComputeQueueShares(queues, cluster, active)
}

// QueueStat is what `weft queue list` shows of a queue beside its
// configuration.
type QueueStat struct {
	SteadyFairShare        Resources
	InstantaneousFairShare Resources
	Used                   Resources
	Pending                Resources
	RunningApps            int
}

// ClusterCapacity returns the total capacity of READY nodes.
func ClusterCapacity(st State) Resources {
	_, _, c := readyNodes(st.Nodes())
	return c
}

// QueueStats computes every queue's fair shares, usage, pending demand and
// running apps.
func QueueStats(st State) map[string]QueueStat {
	cluster := ClusterCapacity(st)
	t := buildTree(st, cluster)
	shares := t.fairShares(st.Queues(), cluster)
	out := make(map[string]QueueStat, len(t.byPath))
	for path, q := range t.byPath {
		out[path] = QueueStat{
			SteadyFairShare:        shares.Steady[path],
			InstantaneousFairShare: shares.Instantaneous[path],
			Used:                   q.usage,
			Pending:                q.demand,
			RunningApps:            q.running,
		}
	}
	return out
}

// capacities gives the queues of capacity subtrees what they are
// guaranteed (Min, which orders them), their max_capacity as their limit,
// and capacity leaves their user limits, on this cluster.
func (t *tree) capacities(queues []*Queue, cluster, minAlloc Resources) {
	var steady map[string]Resources
	for _, q := range queues {
		c := q.Capacity
		if c == nil {
			continue
		}
		if steady == nil {
			steady = ComputeQueueShares(queues, cluster, nil).Steady
		}
		n := t.byPath[q.Path]
		basis := steady[c.Root]
		n.s.Min = steady[q.Path]
		_, max := capacityBounds(c, basis, minAlloc)
		if q.IsLeaf() {
			n.cap = newCapLeaf(c, basis, minAlloc)
		}
		if n.max != nil {
			max = max.CapBy(*n.max)
		}
		n.max = &max
	}
}

// overUserLimit reports whether user is above their user limit in
// capacity leaf q (never in other queues): such a user gets nothing more.
func (q *qnode) overUserLimit(user string) bool {
	return q.cap != nil && q.cap.over(user, q.usage)
}
