package server

import (
	"time"

	"github.com/weft-sched/weft/fsm"
	"github.com/weft-sched/weft/scheduler"
)

// preemptLoop runs on the leader once a second (SPEC §11): it kills the
// containers whose preemption warning has run out, then asks the scheduler
// which containers starving apps need, marks them (their AMs are warned
// through AM.Allocate) and records the preemption. Starvation clocks live
// as long as this leadership, so a failover restarts them.
func (s *Server) preemptLoop(stopCh chan struct{}) {
	clocks := scheduler.NewStarvationClocks()
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	for {
		select {
		case <-tick.C:
		case <-stopCh:
			return
		}
		now := time.Now()
		st := s.fsm.State()
		cfg := st.QueueConfig().Scheduler.Preemption
		var due []string
		for _, n := range st.Nodes() {
			for _, c := range st.NodeLiveContainers(n.ID) {
				if c.PreemptKillAt > 0 && c.PreemptKillAt <= now.UnixNano() && !c.KillRequested {
					due = append(due, c.ID)
				}
			}
		}
		if len(due) > 0 {
			s.logger.Info("killing preempted containers", "count", len(due))
			if _, _, err := s.raftApply(fsm.ContainerStopType, &fsm.ContainerStopRequest{IDs: due, Reason: scheduler.ReasonPreempted, Now: now.UnixNano()}); err != nil {
				s.logger.Error("kill preempted containers", "error", err)
			}
		}
		plan := scheduler.PlanPreemption(st, now, clocks)
		if len(plan) == 0 {
			continue
		}
		marks := make([]fsm.PreemptMark, len(plan))
		for i, p := range plan {
			marks[i] = fsm.PreemptMark{ContainerID: p.ContainerID, ForApp: p.ForApp, Reason: p.Reason}
			s.logger.Info("preempting", "container", p.ContainerID, "victim_app", p.VictimApp, "node", p.NodeID,
				"for_app", p.ForApp, "reason", p.Reason, "kill_in", cfg.WaitBeforeKill)
		}
		if _, _, err := s.raftApply(fsm.PreemptMarkType, &fsm.PreemptMarkRequest{
			Marks: marks, KillAt: now.Add(cfg.WaitBeforeKill).UnixNano(), Now: now.UnixNano(),
		}); err != nil {
			s.logger.Error("mark preempted containers", "error", err)
		}
	}
}
