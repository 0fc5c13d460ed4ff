package server

import (
	"sync"

	"github.com/weft-sched/weft/fsm"
	"github.com/weft-sched/weft/scheduler"
)

// headrooms keeps the headroom of every app in a capacity leaf, as of one
// state: AM.Allocate answers it to each AM (YARN's headroom), and many AMs
// polling the same state share one computation.
type headrooms struct {
	mu     sync.Mutex
	tables [4]uint64
	byApp  map[string]scheduler.Resources
}

// of returns app's headroom in st, or nil when app is not in a capacity
// leaf (fair queues answer none).
func (h *headrooms) of(st *fsm.State, app *scheduler.App) *scheduler.Resources {
	if !inCapacityLeaf(st, app.Queue) {
		return nil
	}
	tables := [4]uint64{st.TableIndex(fsm.TableQueues), st.TableIndex(fsm.TableNodes), st.TableIndex(fsm.TableApps), st.TableIndex(fsm.TableContainers)}
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.byApp == nil || tables != h.tables {
		h.byApp, h.tables = scheduler.Headrooms(st), tables
	}
	r, ok := h.byApp[app.ID]
	if !ok {
		return nil
	}
	return &r
}

func inCapacityLeaf(st *fsm.State, path string) bool {
	for _, q := range st.Queues() {
		if q.Path == path {
			return q.Capacity != nil && q.IsLeaf()
		}
	}
	return false
}
