package server

import (
	"context"
	"time"

	"github.com/weft-sched/weft/fsm"
)

// gcBatch bounds how many apps (and how many nodes) one garbage
// collection command removes, so that one Raft entry stays small; a
// backlog goes over several ticks.
const gcBatch = 2000

// gcTick removes from the state (SPEC §20) the finished apps beyond the
// newest MaxCompletedApps or finished longer than AppGCThreshold ago, with
// their containers, and the nodes DOWN for longer than NodeGCThreshold. It
// proposes one command naming exactly what to remove, so every server
// removes the same; finding it reads only the oldest finished apps and
// DOWN nodes (fsm.State.Garbage), so a tick with nothing to collect costs
// next to nothing.
func (s *Server) gcTick(ctx context.Context, now time.Time) {
	req := s.fsm.State().Garbage(fsm.GCPolicy{
		MaxCompletedApps: s.config.MaxCompletedApps,
		AppsBefore:       now.Add(-s.config.AppGCThreshold).UnixNano(),
		NodesBefore:      now.Add(-s.config.NodeGCThreshold).UnixNano(),
		Limit:            gcBatch,
	})
	if req == nil {
		return
	}
	res, _, err := s.raftApply(ctx, fsm.GCType, req)
	if err != nil {
		s.logger.Error("garbage collection", "error", err)
		return
	}
	if r, ok := res.(*fsm.GCResult); ok {
		s.logger.Info("garbage collected", "apps", r.Apps, "containers", r.Containers, "nodes", r.Nodes)
	}
}
