package fsm

import (
	iradix "github.com/hashicorp/go-immutable-radix/v2"
	"github.com/weft-sched/weft/scheduler"
)

// txn is a copy-on-write change to the store, spanning one log entry or a
// whole batch. Values stored in tables are never mutated: a change stores a
// modified copy. Reads inside a txn see its own writes.
type txn struct {
	st    *Store
	prev  *State
	next  State
	index uint64 // Raft index of the entry being applied

	nodes       *iradix.Txn[*scheduler.Node]
	apps        *iradix.Txn[*scheduler.App]
	activeApps  *iradix.Txn[*scheduler.App]
	activeUIDs  *iradix.Txn[*scheduler.App]
	containers  *indexTxn[*scheduler.Container]
	byApp       *indexTxn[*scheduler.Container]
	byAppChange *indexTxn[*scheduler.Container]
	liveByNode  *indexTxn[*scheduler.Container]
	marked      *indexTxn[*scheduler.Container]
	unstarted   *indexTxn[*scheduler.Container]
	draining    *iradix.Txn[*scheduler.Node]
	down        *iradix.Txn[*scheduler.Node]
	finished    *iradix.Txn[*scheduler.App]

	requests        *iradix.Txn[*RequestRecord]
	requestsByIndex *iradix.Txn[*RequestRecord]

	// Copies of apps and nodes this txn made and stored: no published
	// state can see them yet, so the txn may keep changing them in place
	// (a plan touches the same app and node many times).
	ownApps  map[string]*scheduler.App
	ownNodes map[string]*scheduler.Node
}

func (st *Store) begin() *txn {
	prev := st.cur.Load()
	return &txn{st: st, prev: prev, next: *prev}
}

func lazy[T any](tx **iradix.Txn[T], tree *iradix.Tree[T]) *iradix.Txn[T] {
	if *tx == nil {
		*tx = tree.Txn()
	}
	return *tx
}

// open is lazy for the container indexes.
func open[V any](tx **indexTxn[V], ix index[V]) *indexTxn[V] {
	if *tx == nil {
		*tx = ix.Txn()
	}
	return *tx
}

// current returns an index as of this txn: what tx made of ix, if the txn
// opened it.
func current[V any](tx *indexTxn[V], ix index[V]) index[V] {
	if tx != nil {
		return tx.Index()
	}
	return ix
}

func (t *txn) touch(tab Table) { t.next.tableIndex[tab] = t.index }

func (t *txn) node(id string) (*scheduler.Node, bool) {
	if t.nodes != nil {
		return t.nodes.Get([]byte(id))
	}
	return t.next.nodes.Get([]byte(id))
}

func (t *txn) putNode(n *scheduler.Node) {
	t.touch(TableNodes)
	if n.Reservation != nil && n.Status != scheduler.NodeReady {
		t.releaseNodeReservation(n)
	}
	if t.ownNodes[n.ID] == n {
		return // already in the tree: it was changed in place
	}
	old, existed := t.node(n.ID)
	lazy(&t.nodes, t.next.nodes).Insert([]byte(n.ID), n)
	// Only a new copy can change a node's status: one changed in place
	// (above) is being accounted.
	var oldDrain, oldDown []byte
	if existed {
		oldDrain, oldDown = drainingKey(old), downKey(old)
	}
	reindexTree(&t.draining, t.next.draining, oldDrain, drainingKey(n), n)
	reindexTree(&t.down, t.next.down, oldDown, downKey(n), n)
	if t.ownNodes == nil {
		t.ownNodes = map[string]*scheduler.Node{}
	}
	t.ownNodes[n.ID] = n
}

// mutableNode returns a node this txn may change in place; the caller
// stores it with putNode.
func (t *txn) mutableNode(id string) (*scheduler.Node, bool) {
	if n, ok := t.ownNodes[id]; ok {
		return n, true
	}
	n, ok := t.node(id)
	if !ok {
		return nil, false
	}
	return n.Copy(), true
}

// freeUID returns the uid of r a new app at the txn's index takes: the
// first, from a place that moves with the index (so that consecutive apps
// take consecutive uids, and a freed one is taken again only once the
// range has come round), that no live app holds. It reports false when
// every uid of r is held.
func (t *txn) freeUID(r UIDRange) (uint32, bool) {
	if r.Empty() {
		return 0, false
	}
	size := uint64(r.Last-r.First) + 1
	uids := current2(t.activeUIDs, t.next.activeUIDs)
	if uint64(t.next.numActiveUIDs) >= size {
		return 0, false // every one held (or more: apps of an older, wider range)
	}
	for i, start := uint64(0), t.index%size; i < size; i++ {
		uid := r.First + uint32((start+i)%size)
		if _, held := uids.Get(uidKey(uid)); !held {
			return uid, true
		}
	}
	return 0, false
}

// current2 reads an iradix tree through the txn's open transaction, if any.
func current2[T any](tx *iradix.Txn[T], tree *iradix.Tree[T]) interface {
	Get([]byte) (T, bool)
} {
	if tx != nil {
		return tx
	}
	return tree
}

func (t *txn) app(id string) (*scheduler.App, bool) {
	if t.apps != nil {
		return t.apps.Get([]byte(id))
	}
	return t.next.apps.Get([]byte(id))
}

// mutableApp returns an app this txn may change in place; the caller
// stores it with putApp.
func (t *txn) mutableApp(id string) (*scheduler.App, bool) {
	if a, ok := t.ownApps[id]; ok {
		return a, true
	}
	a, ok := t.app(id)
	if !ok {
		return nil, false
	}
	return a.Copy(), true
}

func (t *txn) putApp(a *scheduler.App) {
	a.ModifyIndex = t.index
	if a.State.Terminal() && len(a.Reservations) > 0 {
		t.releaseAppReservations(a)
	}
	// An app this txn stored before is in the trees already, changed in
	// place: in the active apps too, unless it was terminal then.
	stored := t.ownApps[a.ID] == a
	if !stored {
		lazy(&t.apps, t.next.apps).Insert([]byte(a.ID), a)
		if t.ownApps == nil {
			t.ownApps = map[string]*scheduler.App{}
		}
		t.ownApps[a.ID] = a
	}
	if a.UID != 0 {
		uids := lazy(&t.activeUIDs, t.next.activeUIDs)
		if holder, ok := uids.Get(uidKey(a.UID)); a.State.Terminal() && ok && holder.ID == a.ID {
			uids.Delete(uidKey(a.UID))
			t.next.numActiveUIDs--
		} else if !a.State.Terminal() {
			if _, replaced := uids.Insert(uidKey(a.UID), a); !replaced {
				t.next.numActiveUIDs++
			}
		}
	}
	if a.State.Terminal() {
		lazy(&t.activeApps, t.next.activeApps).Delete(indexKey(a.CreateIndex))
		// An app is terminal for good, and its finish time never changes.
		if _, replaced := lazy(&t.finished, t.next.finished).Insert(finishedKey(a), a); !replaced {
			t.next.numFinished++
		}
	} else if !stored {
		lazy(&t.activeApps, t.next.activeApps).Insert(indexKey(a.CreateIndex), a)
	}
	t.touch(TableApps)
}

func (t *txn) container(id string) (*scheduler.Container, bool) {
	return current(t.containers, t.next.containers).Get(id)
}

// putContainer stores c and keeps the indexes, its node's accounting and
// its app's usage in step with the change from the previous version of c
// (if any).
func (t *txn) putContainer(c *scheduler.Container) { t.storeContainer(c, true) }

// storeContainer is putContainer; accountApp false leaves the app's usage
// to a caller that updates the app itself in the same step.
func (t *txn) storeContainer(c *scheduler.Container, accountApp bool) {
	c.ModifyIndex = t.index
	old, existed := open(&t.containers, t.next.containers).Insert(c.ID, c)
	open(&t.byApp, t.next.byApp).Insert(pairKey(c.AppID, c.ID), c)
	live := open(&t.liveByNode, t.next.liveByNode)
	if c.State.Live() {
		live.Insert(pairKey(c.NodeID, c.ID), c)
	} else if existed && old.State.Live() {
		live.Delete(pairKey(c.NodeID, c.ID))
	}
	t.reindex(&t.byAppChange, t.next.byAppChange, old, c, existed, changeKey)
	t.reindex(&t.marked, t.next.marked, old, c, existed, markedKey)
	t.reindex(&t.unstarted, t.next.unstarted, old, c, existed, unstartedKey)
	if n, ok := t.mutableNode(c.NodeID); ok {
		if existed {
			account(n, old, -1)
		}
		account(n, c, 1)
		t.putNode(n)
	}
	if accountApp {
		// An app's usage counts its live guaranteed containers, so it
		// changes when a container is born, ends, or is promoted.
		was := existed && holdsGuaranteed(old)
		if is := holdsGuaranteed(c); was != is {
			if a, ok := t.mutableApp(c.AppID); ok {
				if is {
					a.Used, a.Live = a.Used.Add(c.Resources), a.Live+1
				} else {
					a.Used, a.Live = a.Used.Sub(c.Resources), a.Live-1
				}
				t.putApp(a)
			}
		}
	}
	t.touch(TableContainers)
}

// reindex keeps a secondary index whose key ("": not indexed) derives
// from a container, as c replaces old.
func (t *txn) reindex(tx **indexTxn[*scheduler.Container], ix index[*scheduler.Container],
	old, c *scheduler.Container, existed bool, key func(*scheduler.Container) string) {
	var oldKey string
	if existed {
		oldKey = key(old)
	}
	newKey := key(c)
	if oldKey == "" && newKey == "" {
		return
	}
	idx := open(tx, ix)
	if oldKey != "" && oldKey != newKey {
		idx.Delete(oldKey)
	}
	if newKey != "" {
		idx.Insert(newKey, c)
	}
}

func holdsGuaranteed(c *scheduler.Container) bool {
	return c.State.Live() && c.ExecutionType == scheduler.Guaranteed
}

// account adds (sign 1) or removes (sign -1) c's share of node n's usage:
// live guaranteed containers hold their resources from allocation on;
// opportunistic ones use the node only while they run, and count as queued
// while they wait.
func account(n *scheduler.Node, c *scheduler.Container, sign int64) {
	if !c.State.Live() {
		return
	}
	running := c.State == scheduler.ContainerRunning
	switch {
	case c.ExecutionType == scheduler.Guaranteed:
		n.AllocatedGuaranteed = n.AllocatedGuaranteed.Add(c.Resources.Scale(sign))
		if running {
			n.RunningGuaranteed += int(sign)
		}
	case running:
		n.AllocatedOpportunistic = n.AllocatedOpportunistic.Add(c.Resources.Scale(sign))
		n.RunningOpportunistic += int(sign)
	case c.State == scheduler.ContainerQueued:
		n.Queued += int(sign)
	}
}

// liveOnNode returns the live containers on a node as of this txn.
func (t *txn) liveOnNode(nodeID string) []*scheduler.Container {
	return current(t.liveByNode, t.next.liveByNode).Values(nodeID + "\x00")
}

// active returns the active apps as of this txn, in submission order.
func (t *txn) active() []*scheduler.App {
	if t.activeApps != nil {
		return collectTxn(t.activeApps, nil)
	}
	return collect(t.next.activeApps, nil)
}

// appContainers returns an app's containers as of this txn.
func (t *txn) appContainers(appID string) []*scheduler.Container {
	return current(t.byApp, t.next.byApp).Values(appID + "\x00")
}

// appContainersChangedSince is State.AppContainersChangedSince as of this
// txn.
func (t *txn) appContainersChangedSince(appID string, index uint64) []*scheduler.Container {
	return changedSince(current(t.byAppChange, t.next.byAppChange), appID, index)
}

func collectTxn[T any](tx *iradix.Txn[T], prefix []byte) []T {
	var out []T
	it := tx.Root().Iterator()
	if prefix != nil {
		it.SeekPrefix(prefix)
	}
	for _, v, ok := it.Next(); ok; _, v, ok = it.Next() {
		out = append(out, v)
	}
	return out
}

// commitTree replaces *dst with the tree a txn built, if it built one.
func commitTree[T any](dst **iradix.Tree[T], tx *iradix.Txn[T]) {
	if tx != nil {
		*dst = tx.CommitOnly()
	}
}

// commitIndex replaces *dst with the index a txn built, if it built one.
func commitIndex[V any](dst *index[V], tx *indexTxn[V]) {
	if tx != nil {
		*dst = tx.Commit()
	}
}

// commit publishes the new state at the given Raft index and wakes every
// watcher of the previous one.
func (t *txn) commit(index uint64) {
	commitTree(&t.next.nodes, t.nodes)
	commitTree(&t.next.apps, t.apps)
	commitTree(&t.next.activeApps, t.activeApps)
	commitTree(&t.next.activeUIDs, t.activeUIDs)
	commitIndex(&t.next.containers, t.containers)
	commitIndex(&t.next.byApp, t.byApp)
	commitIndex(&t.next.byAppChange, t.byAppChange)
	commitIndex(&t.next.liveByNode, t.liveByNode)
	commitIndex(&t.next.marked, t.marked)
	commitIndex(&t.next.unstarted, t.unstarted)
	commitTree(&t.next.draining, t.draining)
	commitTree(&t.next.down, t.down)
	commitTree(&t.next.finished, t.finished)
	commitTree(&t.next.requests, t.requests)
	commitTree(&t.next.requestsByIndex, t.requestsByIndex)
	t.next.index = index
	t.next.changed = make(chan struct{})
	n := t.next
	t.st.cur.Store(&n)
	close(t.prev.changed)
}
