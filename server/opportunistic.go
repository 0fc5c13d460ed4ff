package server

import (
	"sync"
	"time"

	"github.com/weft-sched/weft/fsm"
	"github.com/weft-sched/weft/scheduler"
)

// loadBoard caches the least-loaded node list and the queue limit that the
// leader pushes to agents; they are rebuilt at most every
// sorting_nodes_interval from the loads agents report.
type loadBoard struct {
	mu       sync.Mutex
	computed time.Time
	list     []scheduler.LeastLoadedNode
	limit    int
}

// opportunisticView returns the current least-loaded list and queue limit.
func (s *Server) opportunisticView(st *fsm.State, now time.Time) ([]scheduler.LeastLoadedNode, int) {
	cfg := st.QueueConfig().Scheduler.Opportunistic
	if cfg.SortingNodesInterval <= 0 || cfg.NodesUsed <= 0 {
		cfg = scheduler.DefaultOpportunisticConfig()
	}
	b := &s.board
	b.mu.Lock()
	defer b.mu.Unlock()
	if now.Sub(b.computed) < cfg.SortingNodesInterval {
		return b.list, b.limit
	}
	reported := s.liveness.loads()
	var loads []scheduler.NodeLoad
	var queued []int
	for _, n := range st.Nodes() {
		l, ok := reported[n.ID]
		if n.Status != scheduler.NodeReady || !ok {
			continue
		}
		loads = append(loads, scheduler.NodeLoad{NodeID: n.ID, Address: n.Address, Rack: n.Rack, Capacity: n.Capacity,
			Used: l.Used, Queued: l.Queued, QueueCapacity: l.QueueCapacity})
		queued = append(queued, l.Queued)
	}
	b.list = scheduler.LeastLoaded(loads, cfg.NodesUsed)
	b.limit = scheduler.QueueLimit(queued, cfg.QueueLimitStdev, cfg.MinQueueLength, cfg.MaxQueueLength)
	b.computed = now
	return b.list, b.limit
}
