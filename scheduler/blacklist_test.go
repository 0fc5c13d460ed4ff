package scheduler

import (
	"fmt"
	"slices"
	"strings"
	"testing"
)

// An app's blacklist keeps its guaranteed containers off the nodes it
// names, whatever leads the pass there (spread, a named node, a center of
// gravity), unless it names at least a third of the READY nodes: then it
// is ignored, so that it cannot starve the app. Other apps are not
// affected.
func TestBlacklistedPlacement(t *testing.T) {
	for _, tc := range []struct {
		name      string
		nodes     int      // n1..nN, 8 GB and 8 vcores each, in /r1
		down      []string // nodes that are not READY
		blacklist []string
		ask       func(*Ask)
		count     int
		// want is where the app's containers go, by node, "n1 n2 ..." in
		// placement order; never lists the nodes the app must not use.
		want string
	}{
		{name: "no blacklist: spread over every node", nodes: 4, count: 4, want: "n1 n2 n3 n4"},
		{name: "one of four nodes (25%): never there", nodes: 4, blacklist: []string{"n1"}, count: 6, want: "n2 n3 n4 n2 n3 n4"},
		{name: "one of three nodes (33%): ignored", nodes: 3, blacklist: []string{"n1"}, count: 3, want: "n1 n2 n3"},
		{name: "two of six nodes (33%): ignored", nodes: 6, blacklist: []string{"n1", "n2"}, count: 2, want: "n1 n2"},
		{name: "two of seven nodes (28%): in force", nodes: 7, blacklist: []string{"n1", "n2"}, count: 2, want: "n3 n4"},
		{name: "nodes that are not READY do not count", nodes: 4, down: []string{"n3"}, blacklist: []string{"n1", "n3", "gone"},
			count: 3, want: "n1 n2 n4"}, // 1 of 3 READY nodes listed: ignored
		{name: "unknown and DOWN nodes do not push a blacklist over", nodes: 5, down: []string{"n5"}, blacklist: []string{"n1", "n5", "gone"},
			count: 3, want: "n2 n3 n4"}, // 1 of 4 READY nodes listed: in force
		{name: "a relaxed ask naming a blacklisted node goes elsewhere", nodes: 4, blacklist: []string{"n1"}, count: 1, want: "n2",
			ask: func(a *Ask) { a.Locality = Locality{Nodes: []string{"n1"}, Relax: true} }},
		{name: "a strict ask held to a blacklisted node waits", nodes: 4, blacklist: []string{"n1"}, count: 1, want: "",
			ask: func(a *Ask) { a.Locality = Locality{Nodes: []string{"n1"}} }},
		{name: "a reduce whose center of gravity is blacklisted goes to the next best", nodes: 4, blacklist: []string{"n1"}, count: 1,
			want: "n2", ask: func(a *Ask) { a.Feeders = []Feeder{{Node: "n1", Bytes: 10}} }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var nodes []*Node
			for i := 1; i <= tc.nodes; i++ {
				n := node(fmt.Sprintf("n%d", i), 8*1024, 8)
				if slices.Contains(tc.down, n.ID) {
					n.Status = NodeDown
				}
				nodes = append(nodes, n)
			}
			a := runningApp("A", "root.q", 1, tc.count, oneGB)
			a.Blacklist = tc.blacklist
			if tc.ask != nil {
				tc.ask(&a.Asks[0])
			}
			f := &fakeState{nodes: nodes, cfg: leaves(PolicyFIFO, "q"), apps: []*App{a}}
			var got []string
			// One pass at a time, as the leader runs them: spread sees each
			// placement's node fill up.
			for range tc.count {
				ps := schedule(f)
				if len(ps) == 0 {
					break
				}
				f.apply(ps[:1])
				got = append(got, ps[0].NodeID)
			}
			if strings.Join(got, " ") != tc.want {
				t.Fatalf("placed on %q, want %q", strings.Join(got, " "), tc.want)
			}
		})
	}
}

// A blacklist is the app's own: another app in the same pass still uses
// the node.
func TestBlacklistIsPerApp(t *testing.T) {
	f := &fakeState{nodes: []*Node{node("n1", 8*1024, 8), node("n2", 8*1024, 8), node("n3", 8*1024, 8), node("n4", 8*1024, 8)},
		cfg: leaves(PolicyFIFO, "q")}
	a, b := runningApp("A", "root.q", 1, 8, oneGB), runningApp("B", "root.q", 2, 8, oneGB)
	a.Blacklist = []string{"n1"}
	f.apps = []*App{a, b}
	on := map[string]map[string]int{"A": {}, "B": {}}
	for _, p := range schedule(f) {
		on[p.AppID][p.NodeID]++
	}
	if on["A"]["n1"] != 0 || on["B"]["n1"] == 0 {
		t.Fatalf("placements by app and node %v: A must never be on n1, B must be", on)
	}
}

// Opportunistic allocation (an AMRMProxy's or the leader's) skips the
// nodes in avoid, and Usable counts what is left of the list for the
// fallback to guaranteed.
func TestOpportunisticAllocationAvoidsBlacklistedNodes(t *testing.T) {
	l := list(4)
	avoid := NodeSet{"n1": {}, "n3": {}}
	pos, _ := AllocateOpportunistic(Ask{Count: 20, Resources: oneCore}, l, NewRoom(l), avoid, 0, nil)
	if len(pos) != 8 {
		t.Fatalf("placed %d containers, want 8: two free places and two queue places on each of n2 and n4", len(pos))
	}
	for _, p := range pos {
		if avoid.Has(l[p].NodeID) {
			t.Fatalf("placed on blacklisted %s", l[p].NodeID)
		}
	}
	strict := Ask{Count: 1, Resources: oneCore, Locality: Locality{Nodes: []string{"n1"}}}
	if pos, _ := AllocateOpportunistic(strict, l, NewRoom(l), avoid, 0, nil); len(pos) != 0 {
		t.Fatalf("an ask held to blacklisted n1 got %v", pos)
	}
	if got := Usable(l, avoid); got != 2 {
		t.Errorf("Usable = %d, want 2", got)
	}
	if got := Usable(l, nil); got != 4 {
		t.Errorf("Usable with no blacklist = %d, want 4", got)
	}
	if got := OpportunisticFallback(Ask{Count: 3}, true, Usable(l[:1], NodeSet{"n1": {}}), 3); got != 3 {
		t.Errorf("a list holding only blacklisted nodes: fallback %d, want all 3 as guaranteed", got)
	}
}

// UpdateBlacklist adds, removes (a removal wins), sorts and drops
// duplicates, and refuses a malformed node ID or a list past
// MaxBlacklistedNodes, naming the field.
func TestUpdateBlacklist(t *testing.T) {
	got, err := UpdateBlacklist([]string{"n3"}, []string{"n1", "n3", "n2", "n1"}, []string{"n2"})
	if err != nil || !slices.Equal(got, []string{"n1", "n3"}) {
		t.Fatalf("UpdateBlacklist = %v, %v; want [n1 n3]", got, err)
	}
	if got, err := UpdateBlacklist([]string{"n1"}, nil, []string{"n1"}); err != nil || got != nil {
		t.Fatalf("removing the last node: %v, %v; want nil", got, err)
	}
	if _, err := UpdateBlacklist(nil, []string{"ok", "../etc"}, nil); err == nil || !strings.Contains(err.Error(), "blacklist_additions[1]") {
		t.Fatalf("a malformed addition: %v", err)
	}
	if _, err := UpdateBlacklist(nil, nil, []string{""}); err == nil || !strings.Contains(err.Error(), "blacklist_removals[0]") {
		t.Fatalf("a malformed removal: %v", err)
	}
	var many []string
	for i := range MaxBlacklistedNodes {
		many = append(many, fmt.Sprintf("n%d", i))
	}
	full, err := UpdateBlacklist(nil, many, nil)
	if err != nil || len(full) != MaxBlacklistedNodes {
		t.Fatalf("a full blacklist: %d nodes, %v", len(full), err)
	}
	if _, err := UpdateBlacklist(full, []string{"one-more"}, nil); err == nil || !strings.Contains(err.Error(), "at most") {
		t.Fatalf("past the bound: %v", err)
	}
	if again, err := UpdateBlacklist(full, []string{"n7"}, nil); err != nil || len(again) != MaxBlacklistedNodes {
		t.Fatalf("adding a node already listed to a full list: %d, %v", len(again), err)
	}
}

// A spec's max_failures_per_node defaults to 3; 0 disables; it is bounded.
func TestMaxFailuresPerNode(t *testing.T) {
	spec := AppSpec{DShell: DShell{NumContainers: 1, Command: []string{"true"}}}
	spec.SetDefaults()
	if got := spec.FailuresPerNode(); got != 3 {
		t.Fatalf("default max_failures_per_node %d, want 3", got)
	}
	for _, n := range []int{0, 3, MaxFailuresPerNodeLimit} {
		s := spec
		s.MaxFailuresPerNode = &n
		if err := s.Validate(); err != nil || s.FailuresPerNode() != n {
			t.Errorf("max_failures_per_node %d: %v", n, err)
		}
	}
	for _, n := range []int{-1, MaxFailuresPerNodeLimit + 1} {
		s := spec
		s.MaxFailuresPerNode = &n
		if err := s.Validate(); err == nil || !strings.Contains(err.Error(), "max_failures_per_node") {
			t.Errorf("max_failures_per_node %d accepted: %v", n, err)
		}
	}
}
