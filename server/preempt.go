package server

import (
	"context"
	"time"

	"github.com/weft-sched/weft/fsm"
	"github.com/weft-sched/weft/scheduler"
)

// leaderDuties is the leader's once-a-second work (SPEC §11, §12, §20):
// marking nodes DOWN, expiring allocations never started, killing preempted
// containers whose warning has run out, planning new preemptions, killing
// what still runs on drained nodes at their deadline and collecting
// garbage (drain.go, gc.go). Each
// duty reads the state, decides with a pure function of it and the time,
// and writes what it decided through Raft; none of them scans every live
// container (the FSM keeps time-ordered indexes of what they look for).
// The starvation clocks and node clocks live as long as this leadership,
// so a failover restarts them.
func (s *Server) leaderDuties(ctx context.Context) {
	clocks := scheduler.NewStarvationClocks()
	tick := s.clock.NewTicker(time.Second)
	defer tick.Stop()
	for {
		select {
		case <-tick.C():
		case <-ctx.Done():
			return
		}
		now := s.clock.Now()
		s.livenessTick(ctx, now)
		s.expiryTick(ctx, now)
		s.preemptTick(ctx, now, clocks)
		s.drainTick(ctx, now)
		s.gcTick(ctx, now)
		s.unmanagedTick(ctx, now)
	}
}

// livenessTick marks DOWN the nodes the liveness rule finds dead.
func (s *Server) livenessTick(ctx context.Context, now time.Time) {
	st := s.fsm.State()
	s.livenessMu.Lock()
	wasIsolated := s.liveness.Isolated()
	downs := s.liveness.Tick(now, st.Nodes())
	isolated := s.liveness.Isolated()
	s.livenessMu.Unlock()
	switch {
	case isolated && !wasIsolated:
		s.logger.Warn("this leader hears from fewer than half of its nodes; it may be cut off, so it marks no node down for silence until it hears from most of them again")
	case wasIsolated && !isolated:
		s.logger.Info("this leader hears from most of its nodes again; heartbeat clocks restarted")
	}
	for _, d := range downs {
		s.logger.Warn("marking node down", "node", d.ID, "epoch", d.Epoch, "reason", d.Reason)
		if _, _, err := s.raftApply(ctx, fsm.NodeStatusType, &fsm.NodeStatusRequest{
			ID: d.ID, Epoch: d.Epoch, Status: scheduler.NodeDown, Reason: d.Reason, Now: now.UnixNano(),
		}); err != nil {
			s.logger.Error("mark node down", "node", d.ID, "error", err)
		}
	}
}

// expiryTick reclaims allocations not started within ContainerStartTimeout.
func (s *Server) expiryTick(ctx context.Context, now time.Time) {
	ids := unstartedExpired(s.fsm.State(), now)
	if len(ids) == 0 {
		return
	}
	s.logger.Info("reclaiming allocations never started", "count", len(ids), "timeout", ContainerStartTimeout)
	if _, _, err := s.raftApply(ctx, fsm.ContainerStopType, &fsm.ContainerStopRequest{IDs: ids, Reason: scheduler.ReasonExpired, Now: now.UnixNano()}); err != nil {
		s.logger.Error("expire unstarted containers", "error", err)
	}
}

// preemptTick kills the containers whose preemption warning has run out,
// then asks the scheduler which containers starving apps need, marks them
// (their AMs are warned through AM.Allocate) and records the preemption.
func (s *Server) preemptTick(ctx context.Context, now time.Time, clocks *scheduler.StarvationClocks) {
	st := s.fsm.State()
	if due := preemptionKillsDue(st, now); len(due) > 0 {
		s.logger.Info("killing preempted containers", "count", len(due))
		if _, _, err := s.raftApply(ctx, fsm.ContainerStopType, &fsm.ContainerStopRequest{IDs: due, Reason: scheduler.ReasonPreempted, Now: now.UnixNano()}); err != nil {
			s.logger.Error("kill preempted containers", "error", err)
		}
	}
	plan := scheduler.PlanPreemption(st, now, clocks)
	if len(plan) == 0 {
		return
	}
	wait := st.QueueConfig().Scheduler.Preemption.WaitBeforeKill
	marks := make([]fsm.PreemptMark, len(plan))
	for i, p := range plan {
		marks[i] = fsm.PreemptMark{ContainerID: p.ContainerID, ForApp: p.ForApp, Reason: p.Reason}
		s.logger.Info("preempting", "container", p.ContainerID, "victim_app", p.VictimApp, "node", p.NodeID,
			"for_app", p.ForApp, "reason", p.Reason, "kill_in", wait)
	}
	if _, _, err := s.raftApply(ctx, fsm.PreemptMarkType, &fsm.PreemptMarkRequest{
		Marks: marks, KillAt: now.Add(wait).UnixNano(), Now: now.UnixNano(),
	}); err != nil {
		s.logger.Error("mark preempted containers", "error", err)
		return
	}
	countPreemptions(plan)
}

// unstartedExpired returns the allocations of st not started within
// ContainerStartTimeout of now.
func unstartedExpired(st *fsm.State, now time.Time) []string {
	due := st.AllocatedBefore(now.Add(-ContainerStartTimeout).UnixNano())
	ids := make([]string, len(due))
	for i, c := range due {
		ids[i] = c.ID
	}
	return ids
}

// preemptionKillsDue returns the containers of st marked for preemption
// whose warning has run out by now and that are not being killed yet.
func preemptionKillsDue(st *fsm.State, now time.Time) []string {
	var due []string
	for _, c := range st.PreemptionsDue(now.UnixNano()) {
		if !c.KillRequested {
			due = append(due, c.ID)
		}
	}
	return due
}
