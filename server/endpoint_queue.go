package server

import (
	"context"
	"strings"

	"github.com/weft-sched/weft/fsm"
	wrpc "github.com/weft-sched/weft/rpc"
	"github.com/weft-sched/weft/scheduler"
)

// Queue holds the queue-configuration endpoints.
type Queue struct{ srv *Server }

// Apply validates a queue configuration and replaces the current one through
// Raft. An invalid configuration is refused with every problem listed and
// changes nothing. A dry run changes nothing either: it answers what
// applying the configuration would do (SPEC §20), computed on the leader's
// state by scheduler.PlanQueueConfig.
func (e *Queue) Apply(ctx context.Context, args *wrpc.QueueApplyRequest, reply *wrpc.QueueApplyResponse) error {
	if done, err := e.srv.forwardWrite(ctx, "Queue.Apply", args, reply); done {
		return err
	}
	if args.Config == nil {
		return wrpc.Errorf(wrpc.CodeBadRequest, "invalid queue configuration: no configuration given")
	}
	if errs := args.Config.Validate(); len(errs) > 0 {
		msgs := make([]string, len(errs))
		for i, err := range errs {
			msgs[i] = err.Error()
		}
		return wrpc.Errorf(wrpc.CodeBadRequest, "invalid queue configuration: %s", strings.Join(msgs, "; "))
	}
	if args.DryRun {
		plan, err := scheduler.PlanQueueConfig(e.srv.fsm.State(), args.Config)
		if err != nil {
			return wrpc.Errorf(wrpc.CodeConflict, "invalid queue configuration: %v", err)
		}
		reply.Plan = newQueuePlan(plan)
		reply.Warnings = QueueConfigWarnings(args.Config)
		return nil
	}
	_, index, err := e.srv.raftApplyRequest(ctx, &args.RequestHeader, fsm.QueueConfigApplyType, &fsm.QueueConfigApplyRequest{
		Config: args.Config,
		Now:    e.srv.clock.Now().UnixNano(),
	})
	reply.Index = index
	reply.Warnings = QueueConfigWarnings(args.Config)
	return err
}

// QueueConfigWarnings lists what a valid queue configuration does that its
// author may not expect.
func QueueConfigWarnings(c *scheduler.QueueConfig) []string {
	var out []string
	if _, err := c.CheckSubmitQueue(""); err != nil {
		out = append(out, "there is no root.default queue: apps submitted without -queue will be refused; leaf queues are "+strings.Join(c.Leaves(), ", "))
	}
	return out
}

// List returns every queue in tree order.
func (e *Queue) List(ctx context.Context, args *wrpc.QueueListRequest, reply *wrpc.QueueListResponse) error {
	if done, err := e.srv.forwardRead(ctx, "Queue.List", &args.RequestHeader, args, reply); done {
		return err
	}
	return e.srv.blockingQuery(ctx, &args.RequestHeader, &reply.ResponseMeta, queueIndex, func(st *fsm.State) (uint64, error) {
		reply.Scheduler = st.QueueConfig().Scheduler
		reply.Queues = reply.Queues[:0]
		stats := scheduler.QueueStats(st)
		for _, q := range st.Queues() {
			if e.srv.canReadQueue(ctx, q.Path) {
				reply.Queues = append(reply.Queues, queueInfo(q, stats[q.Path]))
			}
		}
		return queueIndex(st)
	})
}

// Status returns one queue by full path ("root." may be left out).
func (e *Queue) Status(ctx context.Context, args *wrpc.QueueStatusRequest, reply *wrpc.QueueStatusResponse) error {
	if done, err := e.srv.forwardRead(ctx, "Queue.Status", &args.RequestHeader, args, reply); done {
		return err
	}
	name := args.Name
	if name != scheduler.RootQueue && !strings.HasPrefix(name, scheduler.RootQueue+".") {
		name = scheduler.RootQueue + "." + name
	}
	find := func(st *fsm.State) (*scheduler.Queue, error) {
		var names []string // what the caller may read, for the answer when name is not among them
		for _, q := range st.Queues() {
			if !e.srv.canReadQueue(ctx, q.Path) {
				continue
			}
			if q.Path == name {
				return q, nil
			}
			names = append(names, q.Path)
		}
		if len(names) == 0 {
			names = []string{"none"}
		}
		return nil, wrpc.Errorf(wrpc.CodeNotFound, "%s; queues are: %s", e.srv.notFoundText(ctx, "queue "+name, "queues"), strings.Join(names, ", "))
	}
	watch := func(st *fsm.State) (uint64, error) {
		if _, err := find(st); err != nil {
			return 0, err
		}
		return queueIndex(st)
	}
	return e.srv.blockingQuery(ctx, &args.RequestHeader, &reply.ResponseMeta, watch, func(st *fsm.State) (uint64, error) {
		q, err := find(st)
		if err != nil {
			return 0, err
		}
		reply.Queue = queueInfo(q, scheduler.QueueStats(st)[q.Path])
		return queueIndex(st)
	})
}

// queueIndex is the index a queue listing depends on: the configuration,
// and the apps and containers that make up usage and demand.
func queueIndex(st *fsm.State) (uint64, error) {
	return max(st.TableIndex(fsm.TableQueues), st.TableIndex(fsm.TableApps), st.TableIndex(fsm.TableContainers), st.TableIndex(fsm.TableNodes)), nil
}

func queueInfo(q *scheduler.Queue, stat scheduler.QueueStat) wrpc.QueueInfo {
	info := wrpc.NewQueueInfo(q)
	info.SteadyFairShare, info.InstantaneousFairShare = stat.SteadyFairShare, stat.InstantaneousFairShare
	info.Used, info.Pending, info.RunningApps = stat.Used, stat.Pending, stat.RunningApps
	if c := q.Capacity; c != nil {
		info.Capacity = &wrpc.QueueCapacityInfo{Capacity: c.Capacity, MaxCapacity: c.MaxCapacity, UserLimitFactor: c.UserLimitFactor,
			MinimumUserLimitPercent: c.MinimumUserLimitPercent, MaximumAMResourcePercent: c.MaximumAMResourcePercent,
			AbsoluteCapacity: 100 * c.Abs, AbsoluteMaxCapacity: 100 * c.AbsMax, UsedCapacity: 100 * scheduler.UsedOf(stat.Used, stat.SteadyFairShare)}
	}
	return info
}

// newQueuePlan is the wire form of a dry run's plan.
func newQueuePlan(p scheduler.QueuePlan) *wrpc.QueuePlan {
	out := &wrpc.QueuePlan{Queues: []wrpc.QueueShareChange{}, Preemptable: []wrpc.PreemptableApp{}}
	for _, q := range p.Queues {
		out.Queues = append(out.Queues, wrpc.QueueShareChange{Name: q.Path, Added: q.Added, Removed: q.Removed,
			SteadyFairShareNow: q.SteadyNow, SteadyFairShareAfter: q.SteadyAfter,
			InstantaneousFairShareNow: q.InstantaneousNow, InstantaneousFairShareAfter: q.InstantaneousAfter})
	}
	for _, a := range p.Preemptable {
		out.Preemptable = append(out.Preemptable, wrpc.PreemptableApp{AppID: a.AppID, Queue: a.Queue, Used: a.Used,
			FairShareNow: a.FairShareNow, FairShareAfter: a.FairShareAfter})
	}
	return out
}
