package fsm

import (
	"encoding/binary"

	iradix "github.com/hashicorp/go-immutable-radix/v2"
	"github.com/weft-sched/weft/scheduler"
)

// Operations on the cluster (SPEC §20): draining a node, and garbage
// collection of finished apps and DOWN nodes. Both are proposed by the
// leader (drain through Node.Drain) with every time and every ID inside
// the command, so each server applies exactly the same change.

// NodeDrainRequest drains a node or ends its drain. Drain true makes a
// READY (or DRAINING) node DRAINING until Deadline (Unix ns, computed by
// the leader), when the leader kills what still runs there; false makes a
// DRAINING node READY again. A DOWN node cannot be drained.
type NodeDrainRequest struct {
	ID       string `codec:"id"`
	Drain    bool   `codec:"drain"`
	Deadline int64  `codec:"deadline"`
	Now      int64  `codec:"now"`
}

// GCRequest removes finished apps (with their containers) and DOWN nodes
// from the state. An app is removed only if it is terminal and none of its
// containers is live, a node only if it is DOWN; others named are left as
// they are, so a command proposed from an older state changes only what is
// still garbage. The result is a *GCResult.
type GCRequest struct {
	AppIDs  []string `codec:"app_ids"`
	NodeIDs []string `codec:"node_ids"`
}

// GCResult counts what a GCRequest removed.
type GCResult struct {
	Apps       int `codec:"apps"`
	Containers int `codec:"containers"`
	Nodes      int `codec:"nodes"`
}

// DrainingNodes returns the DRAINING nodes in ID order.
func (s *State) DrainingNodes() []*scheduler.Node { return collect(s.draining, nil) }

// NumFinishedApps returns how many terminal apps the state holds.
func (s *State) NumFinishedApps() int { return s.numFinished }

// FinishedApps calls fn with terminal apps, those that finished first
// first, until fn returns false: garbage collection reads the oldest
// without looking at the rest.
func (s *State) FinishedApps(fn func(*scheduler.App) bool) {
	it := s.finished.Root().Iterator()
	for _, a, ok := it.Next(); ok && fn(a); _, a, ok = it.Next() {
	}
}

// DownNodesBefore returns the nodes DOWN since at or before t (Unix ns),
// longest down first.
func (s *State) DownNodesBefore(t int64) []*scheduler.Node {
	var out []*scheduler.Node
	if t < 0 {
		return nil
	}
	it := s.down.Root().Iterator()
	for k, n, ok := it.Next(); ok; k, n, ok = it.Next() {
		if binary.BigEndian.Uint64(k[:8]) > uint64(t) {
			break
		}
		out = append(out, n)
	}
	return out
}

// drainingKey, downKey and finishedKey return a node's or app's key in
// the draining, down and finished indexes, or nil when it does not belong.
func drainingKey(n *scheduler.Node) []byte {
	if n.Status != scheduler.NodeDraining {
		return nil
	}
	return []byte(n.ID)
}

func downKey(n *scheduler.Node) []byte {
	if n.Status != scheduler.NodeDown {
		return nil
	}
	return timeKey(n.StatusAt, n.ID)
}

func finishedKey(a *scheduler.App) []byte { return timeKey(a.FinishedAt, a.ID) }

// reindexTree moves v in a secondary index from oldKey to newKey (nil:
// not indexed).
func reindexTree[T any](tx **iradix.Txn[T], tree *iradix.Tree[T], oldKey, newKey []byte, v T) {
	if oldKey == nil && newKey == nil {
		return
	}
	idx := lazy(tx, tree)
	if oldKey != nil && string(oldKey) != string(newKey) {
		idx.Delete(oldKey)
	}
	if newKey != nil {
		idx.Insert(newKey, v)
	}
}

// applyNodeDrain drains a node or ends its drain.
func (t *txn) applyNodeDrain(req *NodeDrainRequest) error {
	n, ok := t.node(req.ID)
	if !ok {
		return reject(ErrNotFound, "node %s is not registered", req.ID)
	}
	switch {
	case n.Status == scheduler.NodeDown && req.Drain:
		return reject(ErrConflict, "node %s is DOWN: only a node that is up can be drained", req.ID)
	case req.Drain && req.Deadline <= 0:
		return reject(ErrInvalid, "deadline: give when the drain ends")
	case !req.Drain && n.Status != scheduler.NodeDraining:
		return nil // not draining: nothing to end
	case req.Drain && n.Status == scheduler.NodeDraining && n.DrainDeadline == req.Deadline:
		return nil
	}
	n = n.Copy()
	if req.Drain {
		if n.Status != scheduler.NodeDraining {
			n.StatusAt = req.Now
		}
		n.Status, n.StatusReason, n.DrainDeadline = scheduler.NodeDraining, "drained by an operator", req.Deadline
	} else {
		n.Status, n.StatusReason, n.DrainDeadline, n.StatusAt = scheduler.NodeReady, "", 0, req.Now
	}
	t.putNode(n)
	return nil
}

// applyGC removes the named apps and nodes that are still garbage.
func (t *txn) applyGC(req *GCRequest) *GCResult {
	res := &GCResult{}
	for _, id := range req.AppIDs {
		a, ok := t.app(id)
		if !ok || !a.State.Terminal() {
			continue
		}
		cs := t.appContainers(id)
		if anyLive(cs) {
			continue // its last containers are being killed: next time
		}
		for _, c := range cs {
			open(&t.containers, t.next.containers).Delete(c.ID)
			open(&t.byApp, t.next.byApp).Delete(pairKey(c.AppID, c.ID))
			open(&t.byAppChange, t.next.byAppChange).Delete(changeKey(c))
		}
		lazy(&t.apps, t.next.apps).Delete([]byte(id))
		if _, ok := lazy(&t.finished, t.next.finished).Delete(finishedKey(a)); ok {
			t.next.numFinished--
		}
		delete(t.ownApps, id)
		res.Apps++
		res.Containers += len(cs)
		t.touch(TableApps)
		if len(cs) > 0 {
			t.touch(TableContainers)
		}
	}
	for _, id := range req.NodeIDs {
		n, ok := t.node(id)
		if !ok || n.Status != scheduler.NodeDown || len(t.liveOnNode(id)) > 0 {
			continue
		}
		lazy(&t.nodes, t.next.nodes).Delete([]byte(id))
		lazy(&t.down, t.next.down).Delete(downKey(n))
		delete(t.ownNodes, id)
		res.Nodes++
		t.touch(TableNodes)
	}
	return res
}

func anyLive(cs []*scheduler.Container) bool {
	for _, c := range cs {
		if c.State.Live() {
			return true
		}
	}
	return false
}

// GCPolicy says what garbage collection removes (SPEC §20): finished apps
// past the newest MaxCompletedApps or finished at or before AppsBefore,
// and nodes DOWN since at or before NodesBefore (times in Unix ns).
type GCPolicy struct {
	MaxCompletedApps int
	AppsBefore       int64
	NodesBefore      int64
	// Limit bounds how many apps and how many nodes one command names.
	Limit int
}

// Garbage returns the command that collects what p says is garbage in s,
// or nil when there is none. It reads the oldest finished apps and the
// longest-DOWN nodes only, never the whole state: its cost is that of what
// it returns (plus the containers of the apps it must skip because some
// are still being killed).
func (s *State) Garbage(p GCPolicy) *GCRequest {
	req := &GCRequest{}
	excess := s.numFinished - p.MaxCompletedApps
	s.FinishedApps(func(a *scheduler.App) bool {
		if len(req.AppIDs) >= p.Limit || excess <= 0 && a.FinishedAt > p.AppsBefore {
			return false
		}
		if !anyLive(s.AppContainers(a.ID)) {
			req.AppIDs = append(req.AppIDs, a.ID)
			excess--
		}
		return true
	})
	for _, n := range s.DownNodesBefore(p.NodesBefore) {
		if len(req.NodeIDs) >= p.Limit {
			break
		}
		req.NodeIDs = append(req.NodeIDs, n.ID)
	}
	if len(req.AppIDs)+len(req.NodeIDs) == 0 {
		return nil
	}
	return req
}
