package server

import (
	"context"
	"time"

	"github.com/weft-sched/weft/fsm"
	"github.com/weft-sched/weft/internal/metrics"
	"github.com/weft-sched/weft/scheduler"
)

// scheduleLoop runs on the leader. Whenever the replicated state changes
// (and once a second, so that asks waiting for locality can relax) it runs
// a scheduling pass and commits the placements as one plan; bursts of
// changes coalesce because each pass reads the newest state. A plan whose
// placements were all refused is not retried until a table changes. The
// delay-scheduling memory lives as long as this leadership.
func (s *Server) scheduleLoop(ctx context.Context) {
	var refusedAt [4]uint64
	s.waitsMu.Lock()
	s.waits = scheduler.NewLocalityWaits()
	s.waitsMu.Unlock()
	tick := s.clock.NewTicker(time.Second)
	defer tick.Stop()
	for {
		st := s.fsm.State()
		tables := [4]uint64{st.TableIndex(fsm.TableQueues), st.TableIndex(fsm.TableNodes), st.TableIndex(fsm.TableApps), st.TableIndex(fsm.TableContainers)}
		if tables != refusedAt {
			s.waitsMu.Lock()
			pass := metrics.Start()
			plan := scheduler.Schedule(st, s.clock.Now(), s.waits, scheduler.DefaultMaxPlacements).Placements
			metrics.SchedulingPass(pass)
			s.waitsMu.Unlock()
			if len(plan) > 0 {
				placed, err := s.commitPlan(ctx, plan)
				switch {
				case err != nil:
					s.logger.Error("plan failed", "error", err)
					select {
					case <-s.clock.After(100 * time.Millisecond):
					case <-ctx.Done():
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
		case <-tick.C():
		case <-ctx.Done():
			return
		}
	}
}

// commitPlan applies a plan through Raft and returns how many placements
// the FSM accepted.
func (s *Server) commitPlan(ctx context.Context, plan []scheduler.Placement) (int, error) {
	proposed := metrics.Start()
	res, _, err := s.raftApply(ctx, fsm.PlanApplyType, &fsm.PlanApplyRequest{Placements: plan, Now: s.clock.Now().UnixNano()})
	if err != nil {
		return 0, err
	}
	r := res.(*fsm.PlanResult)
	metrics.PlanCommitted(proposed, len(plan)-len(r.Refused), len(r.Refused))
	for _, why := range r.Refused {
		s.logger.Debug("placement refused", "reason", why)
	}
	placed := len(plan) - len(r.Refused)
	s.logger.Debug("plan committed", "placed", placed, "refused", len(r.Refused))
	return placed, nil
}
