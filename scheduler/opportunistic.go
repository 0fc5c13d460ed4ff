package scheduler

import (
	"math"
	"sort"
	"time"
)

// OpportunisticConfig holds the opportunistic-container settings of SPEC §10.
type OpportunisticConfig struct {
	// Distributed allocates opportunistic asks at the AM's node (true) or
	// on the leader (false).
	Distributed bool `codec:"distributed"`
	// SortingNodesInterval is how often the least-loaded list is rebuilt.
	SortingNodesInterval time.Duration `codec:"sorting_nodes_interval"`
	// NodesUsed is how many least-loaded nodes the list holds.
	NodesUsed int `codec:"nodes_used"`
	// QueueLimitStdev (k), MinQueueLength and MaxQueueLength shape the
	// queue limit: floor(mean + k·stdev) clamped to [min, max].
	QueueLimitStdev float64 `codec:"queue_limit_stdev"`
	MinQueueLength  int     `codec:"min_queue_length"`
	MaxQueueLength  int     `codec:"max_queue_length"`
	// LoadComparator ranks the nodes of the list: LoadQueueLength (""
	// too, the default) by queued containers, LoadQueueWaitTime by the
	// estimated wait of a container arriving now.
	LoadComparator string `codec:"load_comparator,omitempty"`
	// MaxAllocationsPerAMHeartbeat caps the opportunistic containers one
	// AM.Allocate receives (0: no cap).
	MaxAllocationsPerAMHeartbeat int `codec:"max_allocations_per_am_heartbeat,omitempty"`
	// SharedList sends every agent the same list of the first NodesUsed
	// nodes, each with its whole room, instead of dealing each agent that
	// runs AMs a window of its own (DealWindows): the behaviour before
	// windows, kept to measure what they bring.
	SharedList bool `codec:"shared_list,omitempty"`
}

// The least-loaded list's rankings (opportunistic.load_comparator).
const (
	LoadQueueLength   = "queue_length"
	LoadQueueWaitTime = "queue_wait_time"
)

// DefaultOpportunisticConfig returns the SPEC §10 defaults (YARN's).
func DefaultOpportunisticConfig() OpportunisticConfig {
	return OpportunisticConfig{Distributed: true, SortingNodesInterval: time.Second, NodesUsed: 10,
		QueueLimitStdev: 1.0, MinQueueLength: 5, MaxQueueLength: 15}
}

// NodeLoad is a node's load as its heartbeats report it.
type NodeLoad struct {
	NodeID  string
	Address string
	Rack    string
	// Capacity is the node's total; Used what its running containers use
	// (guaranteed and opportunistic).
	Capacity Resources
	Used     Resources
	// Queued opportunistic containers, and the most the node will queue.
	Queued        int
	QueueCapacity int
	// Pinned is what the node's AM containers hold: they run as long as
	// their apps, so no opportunistic container larger than Capacity less
	// Pinned can start there before they end.
	Pinned Resources
	// Wait is the estimated wait of a container arriving now.
	Wait time.Duration
	// Measured is what the node's containers were measured to use, and
	// UseLimit the measured use overcommit may take it to (0 for a
	// resource not overcommitted, and for a node that does not overcommit).
	Measured, UseLimit Resources
}

// opportunisticRoom returns what an opportunistic container may have on
// the node: its largest (capacity) and what starts at once (free). By
// allocation, capacity is the node's less its AMs' and free its unallocated
// resources; a resource the node overcommits goes by measured use instead:
// up to its use limit, and free as far as the limit is above the use.
func (l *NodeLoad) opportunisticRoom() (capacity, free Resources) {
	capacity, free = clampPositive(l.Capacity.Sub(l.Pinned)), clampPositive(l.Capacity.Sub(l.Used))
	if lim := l.UseLimit.MemoryMB; lim > 0 {
		capacity.MemoryMB, free.MemoryMB = lim, max(free.MemoryMB, lim-l.Measured.MemoryMB)
	}
	if lim := l.UseLimit.Vcores; lim > 0 {
		capacity.Vcores, free.Vcores = lim, max(free.Vcores, lim-l.Measured.Vcores)
	}
	return capacity, free
}

// LeastLoadedNode is one entry of the least-loaded list: a node and the
// room it had for opportunistic containers when the list was computed.
type LeastLoadedNode struct {
	NodeID  string `codec:"node_id"`
	Address string `codec:"address"`
	Rack    string `codec:"rack"`
	// Capacity is what containers may ever have there while its AMs run:
	// the node's total less its AM containers'. A container larger waits
	// for them, so it is never placed there. Free is what the node left
	// unused: a container that fits in it starts at once.
	Capacity Resources `codec:"capacity"`
	Free     Resources `codec:"free"`
	// QueueSpace is how many more containers the node's queue takes.
	QueueSpace int `codec:"queue_space"`
}

// LeastLoaded sorts nodes by queued opportunistic containers, then by free
// resources normalised to the cluster (most free first), leaves out nodes
// whose queue is full, and keeps the first nodesUsed (SPEC §10). A node
// with a full (or no) queue stays in while its queue is empty and it has
// free memory and vcores, which every container needs: work can start there.
func LeastLoaded(loads []NodeLoad, nodesUsed int) []LeastLoadedNode {
	return RankNodes(loads, nodesUsed, LoadQueueLength)
}

// RankNodes is LeastLoaded with a choice of ranking: LoadQueueLength
// (queued containers first) or LoadQueueWaitTime (the estimated wait of a
// container arriving now first, then queued containers). Either way ties
// go to the node with the most free resources, then the lower ID.
func RankNodes(loads []NodeLoad, limit int, comparator string) []LeastLoadedNode {
	var cluster Resources
	for i := range loads {
		cluster = cluster.Add(loads[i].Capacity)
	}
	type scored struct {
		l              *NodeLoad
		capacity, free Resources
		norm           float64
	}
	cands := make([]scored, 0, len(loads))
	for i := range loads {
		l := &loads[i]
		capacity, free := l.opportunisticRoom()
		if l.Queued >= l.QueueCapacity && !(l.Queued == 0 && free.MemoryMB > 0 && free.Vcores > 0) {
			continue // a full queue, and nothing can start at once
		}
		cands = append(cands, scored{l, capacity, free, normalisedTotal(free, cluster)})
	}
	byWait := comparator == LoadQueueWaitTime
	sort.Slice(cands, func(i, j int) bool {
		a, b := cands[i], cands[j]
		if byWait && a.l.Wait != b.l.Wait {
			return a.l.Wait < b.l.Wait
		}
		if a.l.Queued != b.l.Queued {
			return a.l.Queued < b.l.Queued
		}
		if a.norm != b.norm {
			return a.norm > b.norm
		}
		return a.l.NodeID < b.l.NodeID
	})
	if len(cands) > limit {
		cands = cands[:limit]
	}
	out := make([]LeastLoadedNode, len(cands))
	for i, c := range cands {
		out[i] = LeastLoadedNode{NodeID: c.l.NodeID, Address: c.l.Address, Rack: c.l.Rack,
			Capacity: c.capacity, Free: c.free, QueueSpace: max(0, c.l.QueueCapacity-c.l.Queued)}
	}
	return out
}

// normalisedTotal sums each resource of r as a fraction of the cluster's.
func normalisedTotal(r, cluster Resources) float64 {
	s := 0.0
	if cluster.MemoryMB > 0 {
		s += float64(r.MemoryMB) / float64(cluster.MemoryMB)
	}
	if cluster.Vcores > 0 {
		s += float64(r.Vcores) / float64(cluster.Vcores)
	}
	for k, total := range cluster.Extended {
		if total > 0 {
			s += float64(r.Extended[k]) / float64(total)
		}
	}
	return s
}

// QueueLimit is the queue length agents are asked to keep to:
// floor(mean + k·stdev) of the nodes' queue lengths (population stdev),
// clamped to [minLen, maxLen] (SPEC §10, seed 000).
func QueueLimit(queued []int, k float64, minLen, maxLen int) int {
	if len(queued) == 0 {
		return maxLen
	}
	var sum float64
	for _, q := range queued {
		sum += float64(q)
	}
	mean := sum / float64(len(queued))
	var sq float64
	for _, q := range queued {
		d := float64(q) - mean
		sq += d * d
	}
	limit := int(math.Floor(mean + k*math.Sqrt(sq/float64(len(queued)))))
	return min(max(limit, minLen), maxLen)
}

// Room is what an allocator may still hand out on each node of one
// least-loaded list: free resources first, then queue space. Allocation
// consumes it; the next list brings fresh room. Its positions are those of
// the list it was made from.
type Room struct {
	capacity []Resources
	free     []Resources
	queue    []int
}

// NewRoom returns the room of a freshly computed list.
func NewRoom(list []LeastLoadedNode) *Room {
	r := &Room{capacity: make([]Resources, len(list)), free: make([]Resources, len(list)), queue: make([]int, len(list))}
	for i, n := range list {
		r.capacity[i], r.free[i], r.queue[i] = n.Capacity, n.Free, n.QueueSpace
	}
	return r
}

// Reset makes r the room of a freshly computed list, as NewRoom does,
// reusing r's memory (r may be nil). The room r was is gone.
func (r *Room) Reset(list []LeastLoadedNode) *Room {
	if r == nil || cap(r.free) < len(list) {
		return NewRoom(list)
	}
	r.capacity, r.free, r.queue = r.capacity[:len(list)], r.free[:len(list)], r.queue[:len(list)]
	for i, n := range list {
		r.capacity[i], r.free[i], r.queue[i] = n.Capacity, n.Free, n.QueueSpace
	}
	return r
}

// Take consumes room for one container of res on the node at pos: it
// starts at once if it fits the node's free resources, else it queues. A
// container larger than the node's capacity is never placed there: it would
// wait at the head of the queue forever. Take reports whether there was
// room.
func (r *Room) Take(pos int, res Resources) bool { return r.take(pos, res, true) }

// take is Take, using a queue place only if queue says so.
func (r *Room) take(pos int, res Resources, queue bool) bool {
	switch {
	case !res.Fits(r.capacity[pos]):
		return false
	case res.Fits(r.free[pos]):
		r.free[pos] = r.free[pos].Sub(res)
	case queue && r.queue[pos] > 0:
		r.queue[pos]--
	default:
		return false
	}
	return true
}

// Exhaust takes all the room left on the node at pos: it turned a
// container away, so its queue is full whatever the list said.
func (r *Room) Exhaust(pos int) {
	r.free[pos], r.queue[pos] = Resources{}, 0
}

// Opportunistic locality tiers, tried in order.
const (
	tierNode = iota
	tierRack
	tierAny
)

// AllocateOpportunistic places up to ask.Count opportunistic containers
// on the nodes of list (SPEC §10): node-local first, then rack-local, then
// any node (only the named nodes and racks when the ask does not relax
// locality; any node when it names none); never on a node in avoid (the
// app's blacklist in force, see AvoidedNodes); within a tier round-robin,
// one container per node per round, beginning at list position cursor,
// first into free room on every node (containers that start at once) and
// only then into queue places: no container waits in a queue while a node
// of its tier could start it; never past a node's room, which it consumes. It appends to out the list
// position of each container's node and returns it, with the cursor for
// the next ask: one past the position of the last container placed (cursor
// itself when none was), so that consecutive asks spread over the nodes of
// a tier rather than land again on the one just used. It does not allocate
// beyond out's growth.
func AllocateOpportunistic(ask Ask, list []LeastLoadedNode, room *Room, avoid NodeSet, cursor int, out []int) (positions []int, next int) {
	if len(list) == 0 || ask.Count <= 0 {
		return out, cursor
	}
	loc := ask.Locality
	named := len(loc.Nodes)+len(loc.Racks) > 0
	tier := func(n *LeastLoadedNode) int {
		if avoid.Has(n.NodeID) {
			return -1 // blacklisted: never
		}
		if !named {
			return tierAny
		}
		for _, id := range loc.Nodes {
			if id == n.NodeID {
				return tierNode
			}
		}
		for _, r := range loc.Racks {
			if r == n.Rack {
				return tierRack
			}
		}
		if loc.Relax {
			for _, id := range loc.Nodes { // the racks of the named nodes
				for j := range list {
					if list[j].NodeID == id && list[j].Rack == n.Rack {
						return tierRack
					}
				}
			}
			return tierAny
		}
		return -1 // strict locality: never
	}
	placed := 0
	next = cursor
	start := ((cursor % len(list)) + len(list)) % len(list)
	for t := tierNode; t <= tierAny && placed < ask.Count; t++ {
		for _, queue := range [2]bool{false, true} { // free room on every node first
			for progress := true; progress && placed < ask.Count; {
				progress = false
				for i := 0; i < len(list) && placed < ask.Count; i++ {
					pos := (start + i) % len(list)
					if tier(&list[pos]) == t && room.take(pos, ask.Resources, queue) {
						out = append(out, pos)
						placed++
						progress = true
						next = pos + 1
					}
				}
			}
		}
	}
	return out, next
}

// EstimateQueueWait estimates how long a container arriving at a node now
// would wait in its opportunistic queue: the queued containers ahead of it
// run in waves as wide as the node's running containers, each wave taking
// the mean run time of recent containers.
func EstimateQueueWait(queued, running int, meanRun time.Duration) time.Duration {
	if queued == 0 || meanRun <= 0 {
		return 0
	}
	waves := (queued + max(1, running) - 1) / max(1, running)
	return time.Duration(waves) * meanRun
}

// Usable counts the nodes of list that are not in avoid: the list's length
// as OpportunisticFallback sees it for an app with that blacklist.
func Usable(list []LeastLoadedNode, avoid NodeSet) int {
	if len(avoid) == 0 {
		return len(list)
	}
	n := 0
	for i := range list {
		if !avoid.Has(list[i].NodeID) {
			n++
		}
	}
	return n
}

// OpportunisticFallback says how many of an opportunistic ask's unplaced
// containers may be asked for as guaranteed instead, by the ask's "twin":
// a guaranteed ask with the same ask ID (SPEC §10, YARN's
// enforce_execution_type). It is 0 when the ask enforces its execution type
// (it waits for opportunistic room); 0 while no least-loaded list is known
// yet (listKnown false), since having no list does not mean that no node
// can take the work; unplaced when a list is known and empty (every node's
// queue is full: no node can take opportunistic work; listLen counts only
// the nodes the app may use, see Usable); and 0 otherwise, as nodes in the
// list will have room again.
func OpportunisticFallback(ask Ask, listKnown bool, listLen int, unplaced int) int {
	if ask.EnforceExecutionType || !listKnown || listLen > 0 {
		return 0
	}
	return max(0, unplaced)
}
