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
}

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
}

// LeastLoadedNode is one entry of the list the leader pushes to agents.
type LeastLoadedNode struct {
	NodeID  string `codec:"node_id"`
	Address string `codec:"address"`
	Rack    string `codec:"rack"`
	// Slots is how many more opportunistic containers the node may take
	// (queued or started) before its queue is full.
	Slots int `codec:"slots"`
}

// LeastLoaded sorts nodes by queued opportunistic containers, then by free
// resources normalised to the cluster (most free first), leaves out nodes
// whose queue is full, and keeps the first nodesUsed (SPEC §10).
func LeastLoaded(loads []NodeLoad, nodesUsed int) []LeastLoadedNode {
	var cluster Resources
	for _, l := range loads {
		cluster = cluster.Add(l.Capacity)
	}
	type scored struct {
		l    NodeLoad
		free float64
	}
	var cands []scored
	for _, l := range loads {
		if l.Queued >= l.QueueCapacity && !(l.Queued == 0 && positive(clampPositive(l.Capacity.Sub(l.Used)))) {
			continue // a full queue (or no queue and no room)
		}
		free := clampPositive(l.Capacity.Sub(l.Used))
		score := 0.0
		if cluster.MemoryMB > 0 {
			score += float64(free.MemoryMB) / float64(cluster.MemoryMB)
		}
		if cluster.Vcores > 0 {
			score += float64(free.Vcores) / float64(cluster.Vcores)
		}
		cands = append(cands, scored{l, score})
	}
	sort.Slice(cands, func(i, j int) bool {
		a, b := cands[i], cands[j]
		if a.l.Queued != b.l.Queued {
			return a.l.Queued < b.l.Queued
		}
		if a.free != b.free {
			return a.free > b.free
		}
		return a.l.NodeID < b.l.NodeID
	})
	if len(cands) > nodesUsed {
		cands = cands[:nodesUsed]
	}
	out := make([]LeastLoadedNode, len(cands))
	for i, c := range cands {
		out[i] = LeastLoadedNode{NodeID: c.l.NodeID, Address: c.l.Address, Rack: c.l.Rack,
			Slots: max(1, c.l.QueueCapacity-c.l.Queued)}
	}
	return out
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

// AllocateOpportunistic chooses nodes from the least-loaded list for up to
// ask.Count opportunistic containers: node-local first, then rack-local,
// then any node (only local ones when the ask does not relax locality);
// round-robin from start through each tier; never past a node's slots,
// which it consumes. It returns one node per container it could place.
func AllocateOpportunistic(ask Ask, list []LeastLoadedNode, slots map[string]int, start int) []LeastLoadedNode {
	if len(list) == 0 || ask.Count <= 0 {
		return nil
	}
	var nodeLocal, rackLocal, rest []LeastLoadedNode
	wantNode, wantRack := map[string]bool{}, map[string]bool{}
	for _, n := range ask.Locality.Nodes {
		wantNode[n] = true
	}
	for _, r := range ask.Locality.Racks {
		wantRack[r] = true
	}
	local := len(wantNode)+len(wantRack) > 0
	if ask.Locality.Relax {
		// Relaxed asks also take the racks of the nodes they name.
		for _, n := range list {
			if wantNode[n.NodeID] {
				wantRack[n.Rack] = true
			}
		}
	}
	for i := range list {
		n := list[(start+i)%len(list)]
		switch {
		case wantNode[n.NodeID]:
			nodeLocal = append(nodeLocal, n)
		case wantRack[n.Rack]:
			rackLocal = append(rackLocal, n)
		default:
			rest = append(rest, n)
		}
	}
	tiers := [][]LeastLoadedNode{nodeLocal, rackLocal, rest}
	switch {
	case !local:
		tiers = [][]LeastLoadedNode{rest}
	case !ask.Locality.Relax:
		tiers = tiers[:2] // the named nodes and racks only
	}
	var out []LeastLoadedNode
	for _, tier := range tiers {
		for len(out) < ask.Count {
			placed := false
			for _, n := range tier { // one round over the tier, round-robin
				if len(out) == ask.Count {
					break
				}
				if slots[n.NodeID] > 0 {
					slots[n.NodeID]--
					out = append(out, n)
					placed = true
				}
			}
			if !placed {
				break
			}
		}
	}
	return out
}
