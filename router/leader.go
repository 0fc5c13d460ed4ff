package router

import (
	"context"
	"maps"
	"time"

	"github.com/weft-sched/weft/router/fedstate"
	"github.com/weft-sched/weft/scheduler/federation"
)

// lostCheckInterval is how often the leader looks for silent sub-clusters:
// often, so LOST comes about subcluster_timeout after the last heartbeat.
const lostCheckInterval = time.Second

// weightStep is the least change of a weight worth a Raft write.
const weightStep = 10

// lostLoop marks LOST every sub-cluster silent for subcluster_timeout,
// counting from its last heartbeat or from when this router became leader,
// whichever is later (a new leader gives every sub-cluster the time to
// reach it).
func (r *Router) lostLoop(ctx context.Context) {
	tick := r.clock.NewTicker(lostCheckInterval)
	defer tick.Stop()
	for {
		select {
		case <-tick.C():
		case <-ctx.Done():
			return
		}
		r.markLost(ctx)
	}
}

func (r *Router) markLost(ctx context.Context) {
	now := r.clock.Now()
	since := r.leaderSince.Load()
	for _, sc := range r.fsm.State().Subclusters() {
		if sc.State == federation.StateLost || sc.State == federation.StateDecommissioned {
			continue
		}
		if now.Sub(time.Unix(0, max(sc.LastHeartbeat, since))) < r.config.SubclusterTimeout {
			continue
		}
		_, _, err := r.apply(ctx, fedstate.MarkLostType, &fedstate.MarkLostRequest{ID: sc.ID, LastHeartbeat: sc.LastHeartbeat, Now: now.UnixNano()})
		if err != nil {
			r.logger.Debug("sub-cluster not marked lost", "subcluster", sc.ID, "error", err)
			continue
		}
		r.logger.Warn("sub-cluster marked LOST: no heartbeat", "subcluster", sc.ID, "silent_for", now.Sub(time.Unix(0, sc.LastHeartbeat)))
	}
}

// generatorLoop runs the global policy generator every gpg_interval.
func (r *Router) generatorLoop(ctx context.Context) {
	tick := r.clock.NewTicker(r.config.GPGInterval)
	defer tick.Stop()
	for {
		select {
		case <-tick.C():
		case <-ctx.Done():
			return
		}
		r.generate(ctx)
	}
}

// generate recomputes the weights of every queue whose policy takes the
// generator's weights (weighted or priority with none of its own) and of
// the default, and writes those that moved (federation.WeightsMoved) in
// one entry.
func (r *Router) generate(ctx context.Context) {
	st := r.fsm.State()
	loads := st.Loads()
	queues := map[string]bool{"": true}
	for _, p := range st.Policies() {
		queues[p.Queue] = true
	}
	out := map[string]map[string]uint32{}
	for q := range queues {
		p := st.Policy(q)
		if len(p.Weights) > 0 {
			continue // the operator's weights: left alone
		}
		prev, _ := st.Weights(q)
		next := federation.GenerateWeights(q, prev, loads)
		if next != nil && federation.WeightsMoved(prev, next, weightStep) {
			out[q] = maps.Clone(next)
		}
	}
	if len(out) == 0 {
		return
	}
	_, gen := st.Weights("")
	if _, _, err := r.apply(ctx, fedstate.WeightsWriteType, &fedstate.WeightsWriteRequest{Generation: gen + 1, Weights: out}); err != nil {
		r.logger.Warn("generated weights not written", "error", err)
		return
	}
	r.logger.Info("wrote generated weights", "queues", len(out), "generation", gen+1)
}
