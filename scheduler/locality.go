package scheduler

import "time"

// Locality levels of delay scheduling. levelStrict admits only the named
// nodes and the named racks (an ask with relax=false).
const (
	levelStrict = iota - 1
	levelNode
	levelRack
	levelAny
)

// LocalityWaits is the delay-scheduling memory the leader keeps between
// scheduling passes: for each ask with relaxable locality, how many
// scheduling opportunities it has missed and since when it has waited.
// Schedule reads and updates it; WhyPending reads it through Wait. It is
// not safe for concurrent use: a caller that answers WhyPending while its
// scheduling loop runs must serialize Wait with Schedule.
type LocalityWaits struct {
	waits map[askKey]*localityWait
	// givenBackUntil holds, for each node an app gave back at its
	// reservation's timeout, until when it may not reserve it again
	// (reservation.go).
	givenBackUntil map[reserveKey]time.Time
}

type askKey struct {
	app string
	ask uint64
}

type localityWait struct {
	missed int
	since  time.Time
	seen   bool // considered in the current pass
}

// NewLocalityWaits returns empty delay-scheduling memory.
func NewLocalityWaits() *LocalityWaits { return &LocalityWaits{waits: map[askKey]*localityWait{}} }

func (l *LocalityWaits) get(k askKey, now time.Time) *localityWait {
	w, ok := l.waits[k]
	if !ok {
		w = &localityWait{since: now}
		l.waits[k] = w
	}
	w.seen = true
	return w
}

// placed forgets an ask's wait once it got a container.
func (l *LocalityWaits) placed(k askKey) { delete(l.waits, k) }

// sweep forgets asks not considered in this pass (placed, withdrawn, or
// their app ended) and readies the rest for the next pass.
func (l *LocalityWaits) sweep() {
	for k, w := range l.waits {
		if !w.seen {
			delete(l.waits, k)
		}
		w.seen = false
	}
}

func delayPassed(d Delay, missed int, waited time.Duration) bool {
	switch {
	case d.Duration > 0:
		return waited >= d.Duration
	case d.Opportunities > 0:
		return missed >= d.Opportunities
	}
	return true
}

// allowedLevel is how far an ask's locality may be relaxed now.
func allowedLevel(loc Locality, w *localityWait, cfg LocalityConfig, now time.Time) int {
	if len(loc.Nodes) == 0 && len(loc.Racks) == 0 {
		return levelAny
	}
	if !loc.Relax {
		return levelStrict
	}
	waited := now.Sub(w.since)
	if !delayPassed(cfg.NodeDelay, w.missed, waited) {
		return levelNode
	}
	rack := cfg.RackDelay
	rack.Opportunities += cfg.NodeDelay.Opportunities
	rack.Duration += cfg.NodeDelay.Duration
	if !delayPassed(rack, w.missed, waited) {
		return levelRack
	}
	return levelAny
}

// nodeAt reports whether node n is acceptable for loc at level: named
// nodes at node level; also their racks and the named racks at rack level.
func nodeAt(loc Locality, n *Node, level int, rackOf map[string]string) bool {
	if level >= levelAny || len(loc.Nodes) == 0 && len(loc.Racks) == 0 {
		return true
	}
	for _, id := range loc.Nodes {
		if id == n.ID {
			return true
		}
	}
	if level == levelStrict {
		for _, r := range loc.Racks {
			if r == n.Rack {
				return true
			}
		}
		return false
	}
	if level == levelNode && len(loc.Nodes) > 0 {
		return false
	}
	for _, r := range loc.Racks {
		if r == n.Rack {
			return true
		}
	}
	for _, id := range loc.Nodes {
		if rackOf[id] == n.Rack {
			return true
		}
	}
	return false
}
