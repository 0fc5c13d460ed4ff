package scheduler

import "slices"

// The herd bound (SPEC §10, seed 000, docs/scale.md). The leader pushes one
// least-loaded list to every agent, and every AMRMProxy allocates from it
// without coordinating with the others: the seed warns that distributed
// schedulers "may place containers on the same NM" and leaves the
// imbalance to queue shedding afterwards. With S proxies allocating, each
// place on the list was handed out up to S times, and the node turned away
// all but the first (49,795 of 53,096 placements in the 2,000-node short
// task run). YARN's own bound, a cap on allocations per AM heartbeat, does
// not divide the list between proxies; Sparrow's batch sampling spreads
// each scheduler's probes at random and accepts d = 2 probes per task.
//
// weft divides the list instead. The leader knows which nodes run an AM
// (every proxy that can allocate) and says, with each list, how many share
// it and which of them the agent is (ListShare). Proxy k of S owns the
// slice of the list from position ⌊k·n/S⌋ up to the next proxy's: the
// slices are disjoint and cover the list, so proxies that stay in their own
// slice never hand out the same place twice. A proxy that has used up its
// slice may borrow onwards, up to a window of ⌊HerdFactor·n/S⌋ positions
// from where its slice starts (at least one), because not every AM holding
// a slice is asking for opportunistic work when the list arrives (in the
// half-opportunistic scenario half of them never do) and an unused slice
// would otherwise lie idle for a whole sorting interval. A window of w
// positions starting at ⌊k·n/S⌋ covers a given position for at most
// ⌈w·S/n⌉ values of k, so every node lies in at most
// max(HerdFactor, ⌈S/n⌉) windows: across all proxies at most that many
// times the listed room is handed out, where it was S times. The leader
// lengthens the list to keep S ≤ HerdFactor·n where it can (SharedListLen),
// so the bound is HerdFactor.

// HerdFactor is how many times over, at most, the proxies sharing a list
// together hand out its room (when the list has at least 1/HerdFactor of an
// entry per proxy; see SharedListLen). 2, as Sparrow's probe ratio: enough
// that the slices of AMs asking for nothing are taken up by those asking,
// while a node is offered to at most two proxies.
const HerdFactor = 2

// maxListGrowth bounds how far SharedListLen lengthens a list beyond
// nodes_used: every list goes to every agent each sorting interval.
const maxListGrowth = 4

// ListShare says how many AMRMProxies allocate from one least-loaded list
// and which of them the receiver is. The zero value (or Of 1) is a list
// this proxy has to itself: its whole room.
type ListShare struct {
	// Of is how many proxies allocate from the list (0 or 1: one).
	Of int
	// Slot is the receiver's place among them, 1 to Of; 0 when the
	// leader gave it none (its AM started after the list was computed):
	// it then takes a window where its spin falls, owning nothing.
	Slot int
}

// Window is the part of a least-loaded list a proxy allocates from, as
// positions counted round the list from Start: the first Own it owns, the
// first Len (Own ≤ Len ≤ the list's length) it may use.
type Window struct {
	Start, Own, Len int
}

// whole is the window of a list of n entries a proxy has to itself.
func whole(start, n int) Window { return Window{Start: start, Own: n, Len: n} }

// Window returns the window of a list of n entries that the share gives
// (see HerdFactor): proxy Slot of Of owns positions ⌊(Slot−1)·n/Of⌋ up to
// ⌊Slot·n/Of⌋ and may use max(1, ⌊HerdFactor·n/Of⌋) from where its slice
// starts. A proxy with the list to itself (Of ≤ 1) has it all, from
// position spin mod n; so does one with no slot, but only as much as a
// slotted one may use, and owning none. It is deterministic in its
// arguments; callers pass a random spin.
func (s ListShare) Window(n int, spin uint64) Window {
	if n <= 0 {
		return Window{}
	}
	start := int(spin % uint64(n))
	if s.Of <= 1 {
		return whole(start, n)
	}
	width := min(n, max(1, HerdFactor*n/s.Of))
	if s.Slot < 1 || s.Slot > s.Of {
		return Window{Start: start, Len: width}
	}
	k := s.Slot - 1
	from, to := k*n/s.Of, (k+1)*n/s.Of
	return Window{Start: from, Own: to - from, Len: max(width, to-from)}
}

// SharedListLen is how many entries the leader's list holds when sharers
// proxies allocate from it: nodes_used, lengthened up to maxListGrowth
// times so that each entry is in at most HerdFactor proxies' windows
// (sharers ≤ HerdFactor·length). Fewer nodes may have room than that.
func SharedListLen(nodesUsed, sharers int) int {
	need := (sharers + HerdFactor - 1) / HerdFactor
	return min(max(nodesUsed, need), maxListGrowth*nodesUsed)
}

// ProxySlots returns the slot of each node whose AMRMProxy may allocate
// from the least-loaded list: the nodes that run the current AM attempt of
// an active app, each once, numbered 1 up in node ID order. Its length is
// ListShare.Of for every one of them.
func ProxySlots(apps []*App) map[string]int {
	var nodes []string
	for _, a := range apps {
		if a.State.Terminal() || a.AMPending || len(a.Attempts) == 0 {
			continue
		}
		if at := a.Attempts[len(a.Attempts)-1]; at.NodeID != "" && at.FinishedAt == 0 {
			nodes = append(nodes, at.NodeID)
		}
	}
	slices.Sort(nodes)
	nodes = slices.Compact(nodes)
	slots := make(map[string]int, len(nodes))
	for i, id := range nodes {
		slots[id] = i + 1
	}
	return slots
}
