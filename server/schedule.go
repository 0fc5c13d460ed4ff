package server

import (
	"context"
	"slices"
	"time"

	"github.com/weft-sched/weft/fsm"
	"github.com/weft-sched/weft/internal/metrics"
	"github.com/weft-sched/weft/scheduler"
)

// plansInFlight is how many plans the leader may have decided and not
// seen applied: while one commits (its Raft round trip, fsyncs and every
// server's apply), the next is decided on the state with the first in
// flight (scheduler.WithPlanned). One at a time, a 4,096-placement plan
// cost a pass, its encoding, the round trip and the leader's apply in
// series, and the two cores sat idle in turns.
const plansInFlight = 2

// planCommit is the outcome of committing one plan.
type planCommit struct {
	plan   []scheduler.Placement
	tables [4]uint64 // the tables' indexes when it was decided
	placed int
	err    error
}

// scheduleLoop runs on the leader. Whenever the replicated state changes
// (and once a second, so that asks waiting for locality can relax) it runs
// a scheduling pass and commits the placements as one plan, deciding the
// next while at most plansInFlight commit; bursts of changes coalesce
// because each pass reads the newest state. A plan whose placements were
// all refused is not retried until a table changes. The delay-scheduling
// memory lives as long as this leadership.
func (s *Server) scheduleLoop(ctx context.Context) {
	var refusedAt [4]uint64
	s.waitsMu.Lock()
	s.waits = scheduler.NewLocalityWaits()
	s.waitsMu.Unlock()
	tick := s.clock.NewTicker(time.Second)
	defer tick.Stop()
	var inflight [][]scheduler.Placement
	done := make(chan planCommit, plansInFlight)
	for {
		st := s.fsm.State()
		tables := [4]uint64{st.TableIndex(fsm.TableQueues), st.TableIndex(fsm.TableNodes), st.TableIndex(fsm.TableApps), st.TableIndex(fsm.TableContainers)}
		if len(inflight) < plansInFlight && tables != refusedAt {
			s.waitsMu.Lock()
			pass := metrics.Start()
			plan := scheduler.Schedule(scheduler.WithPlanned(st, inflight...), s.clock.Now(), s.waits, scheduler.DefaultMaxPlacements).Placements
			metrics.SchedulingPass(pass)
			s.waitsMu.Unlock()
			if len(plan) > 0 {
				inflight = append(inflight, plan)
				go func() {
					placed, err := s.commitPlan(ctx, plan)
					done <- planCommit{plan: plan, tables: tables, placed: placed, err: err}
				}()
				continue // decide the next while this one commits
			}
		}
		select {
		case c := <-done:
			inflight = slices.DeleteFunc(inflight, func(p []scheduler.Placement) bool { return &p[0] == &c.plan[0] })
			switch {
			case c.err != nil:
				s.logger.Error("plan failed", "error", c.err)
				select {
				case <-s.clock.After(100 * time.Millisecond):
				case <-ctx.Done():
					return
				}
			case c.placed == 0:
				refusedAt = c.tables
			}
		case <-st.Changed():
		case <-tick.C():
		case <-ctx.Done():
			return
		}
	}
}

// commitPlan applies a plan through Raft and returns how many of its
// entries (placements, and capacity queues' reservations) the FSM
// accepted.
func (s *Server) commitPlan(ctx context.Context, plan []scheduler.Placement) (int, error) {
	proposed := metrics.Start()
	res, _, err := s.raftApply(ctx, fsm.PlanApplyType, &fsm.PlanApplyRequest{Placements: plan, Now: s.clock.Now().UnixNano()})
	if err != nil {
		return 0, err
	}
	r := res.(*fsm.PlanResult)
	// A container placed has an ID; a reservation made or released
	// (capacity queues) has none and is no placement.
	placed := 0
	for _, id := range r.IDs {
		if id != "" {
			placed++
		}
	}
	metrics.PlanCommitted(proposed, placed, len(r.Refused))
	for _, why := range r.Refused {
		s.logger.Debug("placement refused", "reason", why)
	}
	s.logger.Debug("plan committed", "placed", placed, "reservations", len(plan)-placed-len(r.Refused), "refused", len(r.Refused))
	return len(plan) - len(r.Refused), nil
}
