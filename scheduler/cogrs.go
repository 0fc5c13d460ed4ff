package scheduler

import (
	"fmt"
	"slices"
)

// Center-of-gravity reduce placement (CoGRS; SPEC §19, seed 003). A reduce
// task fetches its partition from every node that ran a map: its feeders.
// A reduce ask may carry each feeder's share of its partition in bytes;
// the scheduler then prefers the node with the least weighted total
// network distance to its feeders,
//
//	WTND(n) = Σ ND(feeder_i, n) × bytes_i
//
// with Hadoop's network distances: 0 on the same node, 2 in the same rack,
// 4 across racks. Delay scheduling relaxes the preference as for any
// locality (SPEC §9): the center of gravity first, then its rack, then the
// node with the least WTND that has room.

// Feeder is a map output a reduce task will fetch: the node holding it and
// its size.
type Feeder struct {
	Node  string `codec:"node"`
	Bytes int64  `codec:"bytes"`
}

// MaxFeeders bounds the feeders of one ask.
const MaxFeeders = 4096

// Network distances between nodes (Hadoop's topology).
const (
	NDSameNode = 0
	NDSameRack = 2
	NDOffRack  = 4
)

// Distance is the network distance between nodes a and b; a node whose
// rack is unknown is in a rack of its own.
func Distance(a, b string, rackOf map[string]string) int64 {
	switch {
	case a == b:
		return NDSameNode
	case rackOf[a] != "" && rackOf[a] == rackOf[b]:
		return NDSameRack
	}
	return NDOffRack
}

// TND is the total network distance from node to the feeders; WTND weighs
// each distance by the feeder's bytes.
func TND(feeders []Feeder, node string, rackOf map[string]string) int64 {
	var d int64
	for _, f := range feeders {
		d += Distance(f.Node, node, rackOf)
	}
	return d
}

// WTND is Σ ND(feeder, node) × bytes over the feeders.
func WTND(feeders []Feeder, node string, rackOf map[string]string) int64 {
	var d int64
	for _, f := range feeders {
		d += Distance(f.Node, node, rackOf) * f.Bytes
	}
	return d
}

// CenterOfGravity returns, of nodes, those with the least WTND to the
// feeders (sorted by ID) and that WTND.
func CenterOfGravity(feeders []Feeder, nodes []string, rackOf map[string]string) ([]string, int64) {
	var best []string
	var least int64
	for _, n := range nodes {
		switch w := WTND(feeders, n, rackOf); {
		case best == nil || w < least:
			best, least = []string{n}, w
		case w == least:
			best = append(best, n)
		}
	}
	slices.Sort(best)
	return best, least
}

// validateFeeders checks an ask's feeders: bounded, real node IDs, sizes
// not negative, and no locality of its own beside them.
func (a *Ask) validateFeeders() error {
	if len(a.Feeders) == 0 {
		return nil
	}
	switch {
	case len(a.Feeders) > MaxFeeders:
		return fmt.Errorf("ask %d: feeders: %d; at most %d", a.AskID, len(a.Feeders), MaxFeeders)
	case len(a.Locality.Nodes) > 0 || len(a.Locality.Racks) > 0:
		return fmt.Errorf("ask %d: feeders: an ask places by its feeders or by its locality, not both", a.AskID)
	}
	for i, f := range a.Feeders {
		if err := ValidateNodeID(f.Node); err != nil {
			return fmt.Errorf("ask %d: feeders[%d]: %w", a.AskID, i, err)
		}
		if f.Bytes < 0 {
			return fmt.Errorf("ask %d: feeders[%d]: bytes must not be negative, not %d", a.AskID, i, f.Bytes)
		}
	}
	return nil
}

// gravityLocality is the locality delay scheduling applies to an ask with
// feeders: the centers of gravity among the cluster's nodes, and their
// racks, relaxed.
func gravityLocality(feeders []Feeder, nodes []*candidate, rackOf map[string]string) Locality {
	ids := make([]string, len(nodes))
	for i, c := range nodes {
		ids[i] = c.node.ID
	}
	best, _ := CenterOfGravity(feeders, ids, rackOf)
	loc := Locality{Nodes: best, Relax: true}
	for _, n := range best {
		if r := rackOf[n]; r != "" && !slices.Contains(loc.Racks, r) {
			loc.Racks = append(loc.Racks, r)
		}
	}
	return loc
}

// leastWTND is, of the nodes with room for r that f does not bar (reserved
// for another app, or blacklisted), the one with the least WTND to the
// feeders; ties by ID.
func leastWTND(nodes []*candidate, r Resources, feeders []Feeder, rackOf map[string]string, f fence) *candidate {
	var best *candidate
	var least int64
	for _, c := range nodes {
		if !r.Fits(c.free) || f.bars(c.node.ID) {
			continue
		}
		w := WTND(feeders, c.node.ID, rackOf)
		if best == nil || w < least || w == least && c.node.ID < best.node.ID {
			best, least = c, w
		}
	}
	return best
}
