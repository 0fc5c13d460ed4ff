package scheduler

import (
	"fmt"
	"slices"
)

// An app's node blacklist (YARN's AM node blacklisting): nodes its AM saw
// its containers fail on, for the node's sake, max_failures_per_node
// times. None of the app's containers is placed there — guaranteed by the
// leader's pass, opportunistic by the leader or an AMRMProxy — unless the
// blacklist covers so much of the cluster that honouring it could starve
// the app (BlacklistIgnorePercent). The AM adds and removes nodes with its
// Allocate calls; the list belongs to the current AM attempt.

// Defaults and limits of node blacklisting.
const (
	// DefaultMaxFailuresPerNode is how many of an app's containers may
	// fail on one node before its AM blacklists the node
	// (max_failures_per_node; YARN's mapreduce.job.maxtaskfailures.per.tracker).
	DefaultMaxFailuresPerNode = 3
	// MaxFailuresPerNodeLimit bounds max_failures_per_node.
	MaxFailuresPerNodeLimit = 100
	// MaxBlacklistedNodes bounds an app's blacklist: it is replicated with
	// the app, and past a third of the cluster it is ignored anyway.
	MaxBlacklistedNodes = 100
	// BlacklistIgnorePercent: a blacklist naming at least this percent of
	// the READY nodes is ignored, so that it never starves its app (YARN's
	// yarn.app.mapreduce.am.job.node-blacklisting.ignore-threshold-node-percent).
	BlacklistIgnorePercent = 33
)

// NodeSet is a set of node IDs; the nil set holds none.
type NodeSet map[string]struct{}

// Has reports whether id is in s.
func (s NodeSet) Has(id string) bool {
	_, ok := s[id]
	return ok
}

// UpdateBlacklist returns blacklist with additions added and removals
// taken out, sorted and without duplicates; blacklist itself is not
// changed. A node both added and removed is removed. It names the first
// bad field: a malformed node ID, or a result longer than
// MaxBlacklistedNodes.
func UpdateBlacklist(blacklist, additions, removals []string) ([]string, error) {
	for i, id := range additions {
		if err := ValidateNodeID(id); err != nil {
			return nil, fmt.Errorf("blacklist_additions[%d]: %w", i, err)
		}
	}
	for i, id := range removals {
		if err := ValidateNodeID(id); err != nil {
			return nil, fmt.Errorf("blacklist_removals[%d]: %w", i, err)
		}
	}
	out := slices.Concat(blacklist, additions)
	out = slices.DeleteFunc(out, func(id string) bool { return slices.Contains(removals, id) })
	slices.Sort(out)
	out = slices.Compact(out)
	if len(out) > MaxBlacklistedNodes {
		return nil, fmt.Errorf("blacklist_additions: the app's blacklist would name %d nodes; at most %d", len(out), MaxBlacklistedNodes)
	}
	if len(out) == 0 {
		return nil, nil
	}
	return out, nil
}

// BlacklistIgnored reports whether a blacklist is ignored: the READY nodes
// it names (isReady) are at least BlacklistIgnorePercent of the ready
// nodes, as YARN computes it (whole percent, rounded down).
func BlacklistIgnored(blacklist []string, isReady func(id string) bool, ready int) bool {
	if len(blacklist) == 0 || ready == 0 {
		return false
	}
	listed := 0
	for _, id := range blacklist {
		if isReady(id) {
			listed++
		}
	}
	return listed*100/ready >= BlacklistIgnorePercent
}

// AvoidedNodes returns the nodes placements for an app with this
// blacklist must avoid: none when the blacklist is empty or ignored (see
// BlacklistIgnored), else the blacklist as a set.
func AvoidedNodes(blacklist []string, isReady func(id string) bool, ready int) NodeSet {
	if len(blacklist) == 0 || BlacklistIgnored(blacklist, isReady, ready) {
		return nil
	}
	s := make(NodeSet, len(blacklist))
	for _, id := range blacklist {
		s[id] = struct{}{}
	}
	return s
}

// ReadyIn returns isReady and the READY count of nodes, for
// BlacklistIgnored and AvoidedNodes.
func ReadyIn(nodes []*Node) (isReady func(id string) bool, ready int) {
	set := make(map[string]bool, len(nodes))
	for _, n := range nodes {
		if n.Status == NodeReady {
			set[n.ID] = true
		}
	}
	return func(id string) bool { return set[id] }, len(set)
}
