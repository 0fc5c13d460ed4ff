package server

import (
	"time"

	"github.com/weft-sched/weft/fsm"
	"github.com/weft-sched/weft/scheduler"
)

// scheduleLoop runs on the leader. Whenever the replicated state changes
// (and once a second, so that asks waiting for locality can relax) it runs
// a scheduling pass and commits the placements as one plan; bursts of
// changes coalesce because each pass reads the newest state. A plan whose
// placements were all refused is not retried until a table changes. The
// delay-scheduling memory lives as long as this leadership.
func (s *Server) scheduleLoop(stopCh chan struct{}) {
	var refusedAt [4]uint64
	waits := scheduler.NewLocalityWaits()
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	for {
		st := s.fsm.State()
		tables := [4]uint64{st.TableIndex(fsm.TableQueues), st.TableIndex(fsm.TableNodes), st.TableIndex(fsm.TableApps), st.TableIndex(fsm.TableContainers)}
		if tables != refusedAt {
			if plan := scheduler.Schedule(st, time.Now(), waits, scheduler.DefaultMaxPlacements).Placements; len(plan) > 0 {
				placed, err := s.commitPlan(plan)
				switch {
				case err != nil:
					s.logger.Error("plan failed", "error", err)
					select {
					case <-time.After(100 * time.Millisecond):
					case <-stopCh:
						return
					}
					continue
				case placed == 0:
					refusedAt = tables
				default:
					continue // look again at once: the plan changed the state
				}
			}
		}
		select {
		case <-st.Changed():
		case <-tick.C:
		case <-stopCh:
			return
		}
	}
}

// commitPlan applies a plan through Raft and returns how many placements
// the FSM accepted.
func (s *Server) commitPlan(plan []scheduler.Placement) (int, error) {
	res, _, err := s.raftApply(fsm.PlanApplyType, &fsm.PlanApplyRequest{Placements: plan, Now: time.Now().UnixNano()})
	if err != nil {
		return 0, err
	}
	r := res.(*fsm.PlanResult)
	for _, why := range r.Refused {
		s.logger.Debug("placement refused", "reason", why)
	}
	placed := len(plan) - len(r.Refused)
	s.logger.Debug("plan committed", "placed", placed, "refused", len(r.Refused))
	return placed, nil
}
