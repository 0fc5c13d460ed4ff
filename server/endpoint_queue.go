package server

import (
	"fmt"
	"strings"
	"time"

	"github.com/weft-sched/weft/fsm"
	wrpc "github.com/weft-sched/weft/rpc"
	"github.com/weft-sched/weft/scheduler"
)

// Queue holds the queue-configuration endpoints.
type Queue struct{ srv *Server }

// Apply validates a queue configuration and replaces the current one through
// Raft. An invalid configuration is refused with every problem listed and
// changes nothing.
func (e *Queue) Apply(args *wrpc.QueueApplyRequest, reply *wrpc.WriteResponse) error {
	if done, err := e.srv.forwardWrite("Queue.Apply", args, reply); done {
		return err
	}
	if args.Config == nil {
		return fmt.Errorf("%w: no configuration given", fsm.ErrInvalidQueueConfig)
	}
	if errs := args.Config.Validate(); len(errs) > 0 {
		msgs := make([]string, len(errs))
		for i, err := range errs {
			msgs[i] = err.Error()
		}
		return fmt.Errorf("%w: %s", fsm.ErrInvalidQueueConfig, strings.Join(msgs, "; "))
	}
	_, index, err := e.srv.raftApply(fsm.QueueConfigApplyType, &fsm.QueueConfigApplyRequest{
		Config: args.Config,
		Now:    time.Now().UnixNano(),
	})
	reply.Index = index
	return err
}

// List returns every queue in tree order.
func (e *Queue) List(args *wrpc.QueueListRequest, reply *wrpc.QueueListResponse) error {
	if done, err := e.srv.forwardRead("Queue.List", &args.RequestHeader, args, reply); done {
		return err
	}
	return e.srv.blockingQuery(&args.RequestHeader, &reply.ResponseMeta, func(st *fsm.State) (uint64, error) {
		reply.Scheduler = st.QueueConfig().Scheduler
		reply.Queues = reply.Queues[:0]
		stats := scheduler.QueueStats(st)
		for _, q := range st.Queues() {
			reply.Queues = append(reply.Queues, queueInfo(q, stats[q.Path]))
		}
		return queueIndex(st), nil
	})
}

// Status returns one queue by full path ("root." may be left out).
func (e *Queue) Status(args *wrpc.QueueStatusRequest, reply *wrpc.QueueStatusResponse) error {
	if done, err := e.srv.forwardRead("Queue.Status", &args.RequestHeader, args, reply); done {
		return err
	}
	name := args.Name
	if name != scheduler.RootQueue && !strings.HasPrefix(name, scheduler.RootQueue+".") {
		name = scheduler.RootQueue + "." + name
	}
	return e.srv.blockingQuery(&args.RequestHeader, &reply.ResponseMeta, func(st *fsm.State) (uint64, error) {
		for _, q := range st.Queues() {
			if q.Path == name {
				reply.Queue = queueInfo(q, scheduler.QueueStats(st)[q.Path])
				return queueIndex(st), nil
			}
		}
		var names []string
		for _, q := range st.Queues() {
			names = append(names, q.Path)
		}
		return 0, fmt.Errorf("queue %s %w; queues are: %s", name, wrpc.ErrNotFound, strings.Join(names, ", "))
	})
}

// queueIndex is the index a queue listing depends on: the configuration,
// and the apps and containers that make up usage and demand.
func queueIndex(st *fsm.State) uint64 {
	return max(st.TableIndex(fsm.TableQueues), st.TableIndex(fsm.TableApps), st.TableIndex(fsm.TableContainers), st.TableIndex(fsm.TableNodes))
}

func queueInfo(q *scheduler.Queue, stat scheduler.QueueStat) wrpc.QueueInfo {
	info := wrpc.NewQueueInfo(q)
	info.SteadyFairShare, info.InstantaneousFairShare = stat.SteadyFairShare, stat.InstantaneousFairShare
	info.Used, info.Pending, info.RunningApps = stat.Used, stat.Pending, stat.RunningApps
	return info
}
