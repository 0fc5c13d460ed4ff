package scheduler

import "time"

// DistributedRoom is what an AMRMProxy allocates opportunistic asks from
// (SPEC §10): the least-loaded list it holds, the room left on the list's
// nodes, and the containers it placed that a later list may not reflect.
// The agent's distributed scheduler and the simulator's AMRMProxy share
// it. It is not safe for concurrent use.
//
// A list computed at T reflects the containers its nodes had reported by
// then: when one is installed, the containers placed here since T, less a
// margin for their AMs to start them and their nodes to report them, are
// taken off its room, or their places would be handed out twice. T is
// placed on the proxy's clock from the list's age, so the servers' and the
// proxy's clocks need not agree.
type DistributedRoom struct {
	margin time.Duration
	list   []LeastLoadedNode
	at     int64 // the list's computation (0: none held)
	// candidates is how many nodes the whole list of the computation had,
	// of which list is this proxy's window: 0 means no node anywhere can
	// take opportunistic work, not only none of the window's.
	candidates int
	room       *Room
	rr         int
	recent     []recentPlacement
	pos        []int // scratch for Allocate
}

// recentPlacement is one container a DistributedRoom placed on a node.
type recentPlacement struct {
	at   time.Time
	node string
	res  Resources
}

// ListNews is what one heartbeat answer says of the least-loaded list.
type ListNews struct {
	// At is the computation the answer speaks of (0: none yet, as from a
	// leader still gathering loads).
	At int64
	// List is its list, nil when left out (the proxy holds it, or Same).
	List []LeastLoadedNode
	// Age is how long before the answer it was computed.
	Age time.Duration
	// Same says the list of At, left out, is entry for entry the list of
	// the computation the heartbeat said it held.
	Same bool
	// Candidates is how many nodes the whole list had, of which List is
	// this proxy's window (0 from a leader that deals no windows: List is
	// the whole list).
	Candidates int
}

// NewDistributedRoom returns a room with no list; margin is how long
// before a list's computation its loads may still miss a placement.
func NewDistributedRoom(margin time.Duration) *DistributedRoom {
	return &DistributedRoom{margin: margin, room: NewRoom(nil)}
}

// Margin returns the room's margin.
func (d *DistributedRoom) Margin() time.Duration { return d.margin }

// List returns the list held and its computation (0: none).
func (d *DistributedRoom) List() ([]LeastLoadedNode, int64) { return d.list, d.at }

// Reachable is how many nodes could take opportunistic work when the list
// held was computed, for OpportunisticFallback: those of the window held
// that avoid leaves, or, when the window is empty, how many the whole
// list had (an empty window says only that other proxies hold the room).
func (d *DistributedRoom) Reachable(avoid NodeSet) int {
	if len(d.list) == 0 {
		return max(0, d.candidates)
	}
	return Usable(d.list, avoid)
}

// Candidates is how many nodes the whole list of the computation held had.
func (d *DistributedRoom) Candidates() int { return d.candidates }

// TurnedAway records that the node turned a container placed from this
// room away: its queue is full whatever the list said, so nothing more
// goes there until the next list.
func (d *DistributedRoom) TurnedAway(nodeID string) {
	for i := range d.list {
		if d.list[i].NodeID == nodeID {
			d.room.Exhaust(i)
			return
		}
	}
}

// Update takes what a heartbeat answer says of the list; sent is the
// computation the heartbeat said was held, now when the answer came, and
// spin a random number that picks where round-robin starts on a new list.
// A list whose computation differs from the one held replaces it, its room
// afresh; one said to be the same as the one held is taken as the new
// computation, its room afresh too. It reports whether a list was
// installed.
func (d *DistributedRoom) Update(news ListNews, sent int64, now time.Time, spin uint64) bool {
	switch {
	case news.At == 0:
		return false // a new leader still gathering loads: keep what we have
	case news.At == sent && news.List == nil:
		return false // the list we said we held (left out of the answer)
	case news.Same:
		// Recomputed, entry for entry the list we said we held.
		if sent == d.at && news.At != d.at {
			d.Install(d.list, news.At, now.Add(-news.Age), spin)
			d.candidates = max(news.Candidates, len(d.list))
			return true
		}
		return false
	case news.At != d.at:
		d.Install(news.List, news.At, now.Add(-news.Age), spin)
		d.candidates = max(news.Candidates, len(news.List))
		return true
	}
	return false
}

// Install replaces the list and its room, less what was placed here that
// the list may not reflect; at identifies the list's computation and
// computed is when it was, on this proxy's clock. Round-robin starts at
// position spin modulo the list's length.
func (d *DistributedRoom) Install(list []LeastLoadedNode, at int64, computed time.Time, spin uint64) {
	d.list, d.at, d.candidates = list, at, len(list)
	d.room = d.room.Reset(list) // a proxy installs a list every sorting interval: reuse the last room's memory
	cutoff := computed.Add(-d.margin)
	keep := d.recent[:0]
	for _, r := range d.recent {
		if !r.at.After(cutoff) {
			continue // reflected in this list, and in every later one
		}
		keep = append(keep, r)
		for i := range list {
			if list[i].NodeID == r.node {
				d.room.Take(i, r.res)
				break
			}
		}
	}
	d.recent = keep
	d.rr = 0
	if len(list) > 0 {
		d.rr = int(spin % uint64(len(list)))
	}
}

// Allocate places what it can of an opportunistic ask with
// AllocateOpportunistic, on no node in avoid, and returns one list entry
// per container, placed at now.
func (d *DistributedRoom) Allocate(ask Ask, avoid NodeSet, now time.Time) []LeastLoadedNode {
	d.pos, d.rr = AllocateOpportunistic(ask, d.list, d.room, avoid, d.rr, d.pos[:0])
	if len(d.pos) == 0 {
		return nil
	}
	out := make([]LeastLoadedNode, len(d.pos))
	for i, p := range d.pos {
		out[i] = d.list[p]
		d.recent = append(d.recent, recentPlacement{at: now, node: out[i].NodeID, res: ask.Resources})
	}
	return out
}
