package fsm

import (
	"sync/atomic"

	"github.com/weft-sched/weft/scheduler"
)

// Table names a replicated table; each keeps the Raft index of its last
// change so that blocking queries wake only for the table they watch.
type Table uint8

// Tables. Values appear in snapshots: never renumber one.
const (
	TableQueues Table = iota
	numTables
)

// String returns the table's name.
func (t Table) String() string {
	switch t {
	case TableQueues:
		return "queues"
	}
	return "unknown"
}

// State is an immutable snapshot of the replicated state. Every method is
// safe to call from any goroutine; nothing reachable from a State is ever
// modified after it is published.
type State struct {
	index      uint64
	tableIndex [numTables]uint64
	queues     *scheduler.QueueConfig
	resolved   []*scheduler.Queue
	changed    chan struct{}
}

// Index returns the Raft index of the last entry applied to this state.
func (s *State) Index() uint64 { return s.index }

// TableIndex returns the Raft index of the last change to table t.
func (s *State) TableIndex(t Table) uint64 { return s.tableIndex[t] }

// QueueConfig returns the queue configuration. Callers must not modify it.
func (s *State) QueueConfig() *scheduler.QueueConfig { return s.queues }

// Queues returns the resolved queue tree, parents before children.
// Callers must not modify it.
func (s *State) Queues() []*scheduler.Queue { return s.resolved }

// Changed returns a channel that is closed when a newer state is published.
func (s *State) Changed() <-chan struct{} { return s.changed }

func newState() *State {
	s := &State{changed: make(chan struct{})}
	s.setQueues(scheduler.DefaultQueueConfig())
	return s
}

func (s *State) setQueues(c *scheduler.QueueConfig) {
	s.queues = c
	s.resolved = c.Resolve()
}

// Store holds the current State. It has one writer (the FSM) and any number
// of lock-free readers.
type Store struct {
	cur atomic.Pointer[State]
}

// NewStore returns a store holding the initial state of a new cluster.
func NewStore() *Store {
	st := &Store{}
	st.cur.Store(newState())
	return st
}

// Current returns the latest published state.
func (st *Store) Current() *State { return st.cur.Load() }

// txn is a copy-on-write change to the store. Table values in it must be
// replaced, never mutated, because the previous State shares them.
type txn struct {
	st   *Store
	prev *State
	next State
}

func (st *Store) begin() *txn {
	prev := st.cur.Load()
	t := &txn{st: st, prev: prev, next: *prev}
	return t
}

// commit publishes the new state at the given Raft index and wakes every
// watcher of the previous one.
func (t *txn) commit(index uint64) {
	t.next.index = index
	t.next.changed = make(chan struct{})
	n := t.next
	t.st.cur.Store(&n)
	close(t.prev.changed)
}

// replace publishes s wholesale (restore) and wakes every watcher.
func (st *Store) replace(s *State) {
	s.changed = make(chan struct{})
	prev := st.cur.Swap(s)
	close(prev.changed)
}
