package scheduler

import (
	"cmp"
	"slices"
)

// ListHolder is an agent whose AMRMProxy allocates opportunistic asks:
// one that runs AMs. Demand is how many opportunistic containers its AMs
// asked for that it could not place, as its last heartbeat said. New says
// it runs an AM the computation before did not see: that AM asks at once,
// before its demand is reported.
type ListHolder struct {
	NodeID string
	Demand int
	New    bool
}

// MaxWindowFactor bounds a window: at most this many times nodes_used
// entries, however great its holder's demand, so that one heartbeat answer
// stays small.
const MaxWindowFactor = 10

// DealWindows deals a ranked least-loaded list out to the agents that
// allocate from it, so that no node's room is handed out by two proxies
// (the herd: every proxy handing out the room of the same few nodes, the
// nodes turning most of it away). It returns, for each holder, the
// positions in list of its window, best ranked first; Leftover gives the
// entries no holder was dealt.
//
// Each entry goes to one holder at most, in three passes over the holders:
//
//   - to each holder, first the entries it held before (prev maps a node
//     to the holder whose window had it) that are still on the list, up
//     to its fair share of the list or what its demand wants, whichever is
//     more: what it placed there since its loads were reported, its own
//     room accounting already takes off, and another proxy's would not
//     (a node changing hands is what turns containers away);
//   - then round-robin, best entries first, to new holders (up to
//     nodesUsed: an AM that has just started asks before its demand is
//     reported; entries no holder held before first) and holders with
//     demand, each up to the entries its demand
//     needs at the list's mean places per entry (at least one, at most
//     MaxWindowFactor × nodesUsed);
//   - then round-robin to every holder until each holds nodesUsed, for
//     demand that arrives before the next list.
//
// Holders are served new ones first, then in order of demand, greatest
// first, then by node ID.
func DealWindows(list []LeastLoadedNode, holders []ListHolder, prev map[string]string, nodesUsed int) [][]int {
	windows := make([][]int, len(holders))
	if len(list) == 0 || len(holders) == 0 {
		return windows
	}
	dealt := 0
	order := make([]int, len(holders))
	for i := range order {
		order[i] = i
	}
	slices.SortFunc(order, func(a, b int) int {
		if holders[a].New != holders[b].New {
			if holders[a].New {
				return -1
			}
			return 1
		}
		if c := cmp.Compare(holders[b].Demand, holders[a].Demand); c != 0 {
			return c
		}
		return cmp.Compare(holders[a].NodeID, holders[b].NodeID)
	})
	perEntry := placesPerEntry(list)
	maxWindow := MaxWindowFactor * max(1, nodesUsed)
	want := make([]int, len(holders))
	for i, h := range holders {
		if h.Demand > 0 {
			want[i] = min(max(1, (h.Demand+perEntry-1)/perEntry), maxWindow)
		}
		if h.New {
			want[i] = max(want[i], max(1, nodesUsed))
		}
	}
	taken := make([]bool, len(list))
	if len(prev) > 0 {
		index := make(map[string]int, len(holders))
		for i, h := range holders {
			index[h.NodeID] = i
		}
		// A holder keeps what it held up to its fair share of the list
		// (or its want, if greater): it may have placed containers there
		// that the loads do not show yet.
		kept := make([]int, len(holders))
		for pos := range list {
			if h, ok := index[prev[list[pos].NodeID]]; ok {
				kept[h]++
			}
		}
		fair := len(list) / len(holders)
		for h := range kept {
			kept[h] = max(want[h], min(kept[h], fair))
		}
		for pos := range list {
			h, ok := index[prev[list[pos].NodeID]]
			if ok && len(windows[h]) < kept[h] {
				windows[h] = append(windows[h], pos)
				taken[pos] = true
				dealt++
			}
		}
	}
	// A new holder takes entries no one held before first: a node another
	// proxy held may have containers on their way there that its load
	// does not show yet, which only that proxy's room accounts for.
	byRank := make([]int, len(list))
	for i := range byRank {
		byRank[i] = i
	}
	freshFirst := byRank
	if len(prev) > 0 {
		freshFirst = make([]int, 0, len(list))
		for _, held := range []bool{false, true} {
			for pos := range list {
				if _, ok := prev[list[pos].NodeID]; ok == held {
					freshFirst = append(freshFirst, pos)
				}
			}
		}
	}
	cursor := [2]int{} // into byRank and freshFirst
	pick := func(h int) int {
		ord, c := byRank, &cursor[0]
		if holders[h].New {
			ord, c = freshFirst, &cursor[1]
		}
		for *c < len(ord) && taken[ord[*c]] {
			*c++
		}
		if *c == len(ord) {
			return -1
		}
		return ord[*c]
	}
	deal := func(limit func(h int) int) {
		for progress := true; progress && dealt < len(list); {
			progress = false
			for _, h := range order {
				if len(windows[h]) >= limit(h) {
					continue
				}
				pos := pick(h)
				if pos < 0 {
					return
				}
				windows[h] = append(windows[h], pos)
				taken[pos] = true
				dealt++
				progress = true
			}
		}
	}
	deal(func(h int) int { return want[h] })
	deal(func(int) int { return max(1, nodesUsed) })
	for _, w := range windows {
		slices.Sort(w) // best ranked first, as the list
	}
	return windows
}

// placesPerEntry is the mean number of containers a list's entry takes
// (a start in its free room, and its queue places), at least one.
func placesPerEntry(list []LeastLoadedNode) int {
	if len(list) == 0 {
		return 1
	}
	places := 0
	for i := range list {
		places += list[i].QueueSpace
		if !list[i].Free.IsZero() {
			places++
		}
	}
	return max(1, places/len(list))
}

// Leftover returns the entries no holder was dealt, in list order.
func Leftover(list []LeastLoadedNode, windows [][]int) []int {
	taken := make([]bool, len(list))
	for _, w := range windows {
		for _, p := range w {
			taken[p] = true
		}
	}
	var out []int
	for p := range list {
		if !taken[p] {
			out = append(out, p)
		}
	}
	return out
}
