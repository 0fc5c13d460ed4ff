package scheduler

import (
	"fmt"
	"sort"
)

// QueuePlan is what replacing the queue configuration would do to the
// running cluster (SPEC §20, `weft queue apply -dry-run`): every queue's
// fair shares now and after, and the running apps the new configuration
// would make preemptable.
type QueuePlan struct {
	Queues      []QueueShareChange
	Preemptable []PreemptableApp
}

// QueueShareChange is one queue's steady and instantaneous fair share
// under the current and the proposed configuration. A queue only in the
// current one is Removed, one only in the proposed one Added.
type QueueShareChange struct {
	Path                                 string
	Added, Removed                       bool
	SteadyNow, SteadyAfter               Resources
	InstantaneousNow, InstantaneousAfter Resources
}

// PreemptableApp is a running app that is not preemptable now and would
// be under the proposed configuration: its queue is preemptable and its
// usage is over its fair share (as its queue's policy compares), so the
// preemption rules (PlanPreemption) may take containers from it for a
// starved app.
type PreemptableApp struct {
	AppID                        string
	Queue                        string
	Used                         Resources
	FairShareNow, FairShareAfter Resources
}

// configView is st under another queue configuration.
type configView struct {
	State
	cfg    *QueueConfig
	queues []*Queue
}

func (v configView) QueueConfig() *QueueConfig { return v.cfg }
func (v configView) Queues() []*Queue          { return v.queues }

// shareView is what one configuration makes of the state: fair shares by
// queue and by app, and the apps that are possible preemption victims.
type shareView struct {
	queues []*Queue
	shares QueueShares
	apps   map[string]*appNode
	fair   map[string]Resources
	victim map[string]bool
}

func viewOf(st State, cluster Resources) shareView {
	t := buildTree(st, cluster)
	shares := t.fairShares(st.Queues(), cluster)
	v := shareView{queues: st.Queues(), shares: shares, apps: t.byApp, fair: appFairShares(t, shares), victim: map[string]bool{}}
	if !st.QueueConfig().Scheduler.Preemption.Enabled {
		return v
	}
	for _, a := range t.apps {
		q := a.queue.queue
		if a.runnable && q.Preemptable && positive(a.usage) && belowShare(v.fair[a.app.ID], a.usage, q.Policy, cluster) {
			v.victim[a.app.ID] = true
		}
	}
	return v
}

// PlanQueueConfig computes, without changing anything, what replacing st's
// queue configuration with next would do: with the same nodes and apps, it
// computes fair shares and possible preemption victims under both with the
// scheduler's own fair-share and preemption rules. next must validate; an
// active app whose queue would not be a leaf of next is an error (the
// configuration would be refused), naming the queue and the app.
func PlanQueueConfig(st State, next *QueueConfig) (QueuePlan, error) {
	leaves := map[string]bool{}
	for _, q := range next.Leaves() {
		leaves[q] = true
	}
	for _, a := range st.ActiveApps() {
		if !leaves[a.Queue] {
			return QueuePlan{}, fmt.Errorf("queue %s has active apps (e.g. %s); it must stay a leaf until they finish", a.Queue, a.ID)
		}
	}
	cluster := ClusterCapacity(st)
	now := viewOf(st, cluster)
	after := viewOf(configView{State: st, cfg: next, queues: next.Resolve()}, cluster)

	var plan QueuePlan
	seen := map[string]bool{}
	for _, q := range now.queues {
		seen[q.Path] = true
		_, kept := after.shares.Steady[q.Path]
		plan.Queues = append(plan.Queues, QueueShareChange{Path: q.Path, Removed: !kept,
			SteadyNow: now.shares.Steady[q.Path], SteadyAfter: after.shares.Steady[q.Path],
			InstantaneousNow: now.shares.Instantaneous[q.Path], InstantaneousAfter: after.shares.Instantaneous[q.Path]})
	}
	for _, q := range after.queues {
		if !seen[q.Path] {
			plan.Queues = append(plan.Queues, QueueShareChange{Path: q.Path, Added: true,
				SteadyAfter: after.shares.Steady[q.Path], InstantaneousAfter: after.shares.Instantaneous[q.Path]})
		}
	}
	for id := range after.victim {
		if now.victim[id] {
			continue
		}
		a := after.apps[id]
		plan.Preemptable = append(plan.Preemptable, PreemptableApp{AppID: id, Queue: a.app.Queue, Used: a.usage,
			FairShareNow: now.fair[id], FairShareAfter: after.fair[id]})
	}
	sort.Slice(plan.Preemptable, func(i, j int) bool {
		return CompareIDs(plan.Preemptable[i].AppID, plan.Preemptable[j].AppID) < 0
	})
	return plan, nil
}
