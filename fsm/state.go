package fsm

import (
	"encoding/binary"
	"strings"
	"sync/atomic"

	iradix "github.com/hashicorp/go-immutable-radix/v2"
	"github.com/weft-sched/weft/scheduler"
)

// Table names a replicated table; each keeps the Raft index of its last
// change so that blocking queries wake only for the table they watch.
type Table uint8

// Tables. Values appear in snapshots: never renumber one.
const (
	TableQueues Table = iota
	TableNodes
	TableApps
	TableContainers
	TableACL
	numTables
)

// String returns the table's name.
func (t Table) String() string {
	return [...]string{"queues", "nodes", "apps", "containers", "acl", "unknown"}[min(int(t), int(numTables))]
}

// State is an immutable snapshot of the replicated state. Every method is
// safe to call from any goroutine; nothing reachable from a State is ever
// modified after it is published, and callers must not modify what they
// get from it.
type State struct {
	index      uint64
	tableIndex [numTables]uint64
	queues     *scheduler.QueueConfig
	resolved   []*scheduler.Queue

	nodes      *iradix.Tree[*scheduler.Node] // node ID
	apps       *iradix.Tree[*scheduler.App]  // app ID
	activeApps *iradix.Tree[*scheduler.App]  // big-endian create index, non-terminal apps only
	activeUIDs *iradix.Tree[*scheduler.App]  // big-endian uid, non-terminal apps with one

	// The container indexes change with every container's every change,
	// so they are copy-on-write B+ trees (index.go), cheaper to change
	// than the radix trees the other tables use.
	containers index[*scheduler.Container] // container ID
	byApp      index[*scheduler.Container] // app ID \x00 container ID
	// byAppChange: every container by app ID \x00 big-endian modify index
	// then ID, so an AM's answer reads only what changed since its index.
	byAppChange index[*scheduler.Container]
	liveByNode  index[*scheduler.Container] // node ID \x00 container ID, live containers only
	// marked: live containers marked for preemption, by kill time then ID.
	marked index[*scheduler.Container]
	// unstarted: live ALLOCATED task containers, by allocation time then ID.
	unstarted index[*scheduler.Container]
	// draining: DRAINING nodes, by ID; down: DOWN nodes, by the time
	// they went down then ID; finished: terminal apps, by finish time
	// then ID (numFinished of them). The leader's drain and garbage
	// collection duties read only these (ops.go).
	draining    *iradix.Tree[*scheduler.Node]
	down        *iradix.Tree[*scheduler.Node]
	finished    *iradix.Tree[*scheduler.App]
	numFinished int
	// numActiveUIDs counts activeUIDs' entries.
	numActiveUIDs int

	// workloadKeys signs workload tokens, oldest first (identity.go).
	workloadKeys []*WorkloadKey

	requests        *iradix.Tree[*RequestRecord] // request ID
	requestsByIndex *iradix.Tree[*RequestRecord] // big-endian Raft index of first application
	numRequests     int

	acl aclTables

	changed chan struct{}
}

var _ scheduler.State = (*State)(nil)

// Index returns the Raft index of the last entry applied to this state.
func (s *State) Index() uint64 { return s.index }

// TableIndex returns the Raft index of the last change to table t.
func (s *State) TableIndex(t Table) uint64 { return s.tableIndex[t] }

// QueueConfig returns the queue configuration.
func (s *State) QueueConfig() *scheduler.QueueConfig { return s.queues }

// Queues returns the resolved queue tree, parents before children.
func (s *State) Queues() []*scheduler.Queue { return s.resolved }

// Changed returns a channel that is closed when a newer state is published.
func (s *State) Changed() <-chan struct{} { return s.changed }

// Node returns a node by ID.
func (s *State) Node(id string) (*scheduler.Node, bool) { return s.nodes.Get([]byte(id)) }

// Nodes returns every registered node in ID order.
func (s *State) Nodes() []*scheduler.Node { return collect(s.nodes, nil) }

// App returns an app by ID.
func (s *State) App(id string) (*scheduler.App, bool) { return s.apps.Get([]byte(id)) }

// Apps returns every app in ID order.
func (s *State) Apps() []*scheduler.App { return collect(s.apps, nil) }

// ActiveApps returns the apps that are not finished, in submission order.
func (s *State) ActiveApps() []*scheduler.App { return collect(s.activeApps, nil) }

// AppByUID returns the live app whose containers run as uid, if any.
func (s *State) AppByUID(uid uint32) (*scheduler.App, bool) { return s.activeUIDs.Get(uidKey(uid)) }

func uidKey(uid uint32) []byte {
	var b [4]byte
	binary.BigEndian.PutUint32(b[:], uid)
	return b[:]
}

// Container returns a container by ID.
func (s *State) Container(id string) (*scheduler.Container, bool) { return s.containers.Get(id) }

// Containers returns every container in ID order.
func (s *State) Containers() []*scheduler.Container { return s.containers.Values("") }

// AppContainers returns every container of an app.
func (s *State) AppContainers(appID string) []*scheduler.Container {
	return s.byApp.Values(appID + "\x00")
}

// NodeLiveContainers returns the containers on a node that are not completed.
func (s *State) NodeLiveContainers(nodeID string) []*scheduler.Container {
	return s.liveByNode.Values(nodeID + "\x00")
}

// PreemptionMarked returns the live containers marked for preemption, in
// order of their kill time: the leader's reservations and the room being
// freed come from them, without a scan of every container.
func (s *State) PreemptionMarked() []*scheduler.Container { return s.marked.Values("") }

// PreemptionsDue returns the live containers marked for preemption whose
// kill time is at or before t (Unix ns).
func (s *State) PreemptionsDue(t int64) []*scheduler.Container { return collectUpTo(s.marked, t) }

// AllocatedBefore returns the live task containers still ALLOCATED (placed,
// never started) that were allocated at or before t (Unix ns).
func (s *State) AllocatedBefore(t int64) []*scheduler.Container { return collectUpTo(s.unstarted, t) }

// collectUpTo returns the values of an index keyed by big-endian time then
// ID whose time is at most t.
func collectUpTo(ix index[*scheduler.Container], t int64) []*scheduler.Container {
	var out []*scheduler.Container
	if t < 0 {
		return nil
	}
	ix.Ascend("", func(k string, v *scheduler.Container) bool {
		if binary.BigEndian.Uint64([]byte(k[:8])) > uint64(t) {
			return false
		}
		out = append(out, v)
		return true
	})
	return out
}

// timeKey orders nodes and apps by a time (Unix ns), then by ID.
func timeKey(t int64, id string) []byte {
	return append(indexKey(uint64(max(t, 0))), id...)
}

// containerTimeKey is timeKey for the container indexes.
func containerTimeKey(t int64, id string) string {
	var b [8]byte
	binary.BigEndian.PutUint64(b[:], uint64(max(t, 0)))
	return string(b[:]) + id
}

// AppContainersChangedSince returns an app's containers last changed after
// index (created, or changed in any way since), oldest change first: an
// AM's answer built from them reads nothing it has seen.
func (s *State) AppContainersChangedSince(appID string, index uint64) []*scheduler.Container {
	return changedSince(s.byAppChange, appID, index)
}

func changedSince(ix index[*scheduler.Container], appID string, index uint64) []*scheduler.Container {
	var b [8]byte
	binary.BigEndian.PutUint64(b[:], index+1)
	prefix := appID + "\x00"
	var out []*scheduler.Container
	ix.Ascend(prefix+string(b[:]), func(k string, v *scheduler.Container) bool {
		if !strings.HasPrefix(k, prefix) {
			return false
		}
		out = append(out, v)
		return true
	})
	return out
}

// changeKey is c's key in the byAppChange index.
func changeKey(c *scheduler.Container) string {
	var b [8]byte
	binary.BigEndian.PutUint64(b[:], c.ModifyIndex)
	return c.AppID + "\x00" + string(b[:]) + c.ID
}

// markedKey and unstartedKey return c's key in the marked and unstarted
// indexes, or "" when it does not belong there.
func markedKey(c *scheduler.Container) string {
	if !c.State.Live() || c.PreemptKillAt <= 0 {
		return ""
	}
	return containerTimeKey(c.PreemptKillAt, c.ID)
}

func unstartedKey(c *scheduler.Container) string {
	if c.State != scheduler.ContainerAllocated || c.IsAM {
		return ""
	}
	return containerTimeKey(c.AllocatedAt, c.ID)
}

func collect[T any](t *iradix.Tree[T], prefix []byte) []T {
	var out []T
	it := t.Root().Iterator()
	if prefix != nil {
		it.SeekPrefix(prefix)
	}
	for _, v, ok := it.Next(); ok; _, v, ok = it.Next() {
		out = append(out, v)
	}
	return out
}

func indexKey(i uint64) []byte {
	var b [8]byte
	binary.BigEndian.PutUint64(b[:], i)
	return b[:]
}

func pairKey(a, b string) string { return a + "\x00" + b }

func newState() *State {
	s := &State{
		changed:    make(chan struct{}),
		nodes:      iradix.New[*scheduler.Node](),
		apps:       iradix.New[*scheduler.App](),
		activeApps: iradix.New[*scheduler.App](),
		activeUIDs: iradix.New[*scheduler.App](),
		draining:   iradix.New[*scheduler.Node](),
		down:       iradix.New[*scheduler.Node](),
		finished:   iradix.New[*scheduler.App](),

		requests:        iradix.New[*RequestRecord](),
		requestsByIndex: iradix.New[*RequestRecord](),

		acl: newACLTables(),
	}
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

// replace publishes s wholesale (restore) and wakes every watcher.
func (st *Store) replace(s *State) {
	s.changed = make(chan struct{})
	prev := st.cur.Swap(s)
	close(prev.changed)
}
