package fsm

import (
	"slices"
	"strings"
	"sync"

	iradix "github.com/hashicorp/go-immutable-radix/v2"
	"github.com/weft-sched/weft/scheduler"
)

// A radix tree transaction copies every node an insert passes through
// unless it copied that node recently (it remembers the last 8,192), so
// inserting a million keys in random order copies the upper nodes again
// and again. Restore therefore inserts each container index in key order:
// containers arrive in ID order, so grouping them by app (or node) while
// keeping that order, then taking the groups in name order, gives the
// order of the "app \x00 container" keys without sorting a million keys.

// restoreContainers fills s's container tables from cs, the restored
// containers in ID order with no ID twice. The four large trees (by ID,
// by app, by app and change, live by node) are built at once, each in
// its own goroutine (they share nothing), so a server restores in about
// the time of the slowest one when it has a core for each.
func restoreContainers(s *State, cs []*scheduler.Container) {
	var wg sync.WaitGroup
	build := func(tree **iradix.Tree[*scheduler.Container], fill func(*iradix.Txn[*scheduler.Container])) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			tx := (*tree).Txn()
			fill(tx)
			*tree = tx.CommitOnly()
		}()
	}
	build(&s.containers, func(tx *iradix.Txn[*scheduler.Container]) {
		for _, c := range cs {
			tx.Insert([]byte(c.ID), c)
		}
	})
	build(&s.byApp, func(tx *iradix.Txn[*scheduler.Container]) {
		insertGrouped(tx, cs, func(c *scheduler.Container) (string, bool) { return c.AppID, true })
	})
	build(&s.byAppChange, func(tx *iradix.Txn[*scheduler.Container]) { insertByChange(tx, cs) })
	build(&s.liveByNode, func(tx *iradix.Txn[*scheduler.Container]) {
		insertGrouped(tx, cs, func(c *scheduler.Container) (string, bool) { return c.NodeID, c.State.Live() })
	})
	defer wg.Wait()
	// Few containers are marked or unstarted at once: these stay in
	// ID order.
	marked, unstarted := s.marked.Txn(), s.unstarted.Txn()
	for _, c := range cs {
		if k := markedKey(c); k != nil {
			marked.Insert(k, c)
		}
		if k := unstartedKey(c); k != nil {
			unstarted.Insert(k, c)
		}
	}
	s.marked, s.unstarted = marked.CommitOnly(), unstarted.CommitOnly()
}

// byIDLastWins returns cs, the containers in the order a snapshot holds
// them, in ID order with each ID once: of a damaged snapshot's repeated
// containers, the last read wins (as it would have inserted last). A
// snapshot this package wrote is already in that order, and is checked
// in one pass.
func byIDLastWins(cs []*scheduler.Container) []*scheduler.Container {
	if strictlyByID(cs) {
		return cs
	}
	slices.SortStableFunc(cs, func(a, b *scheduler.Container) int { return strings.Compare(a.ID, b.ID) })
	out := cs[:0]
	for i, c := range cs {
		if i+1 < len(cs) && cs[i+1].ID == c.ID {
			continue
		}
		out = append(out, c)
	}
	return out
}

func strictlyByID(cs []*scheduler.Container) bool {
	for i := 1; i < len(cs); i++ {
		if cs[i-1].ID >= cs[i].ID {
			return false
		}
	}
	return true
}

// insertGrouped inserts, under the key "group \x00 ID", every container of
// cs that group selects, group by group in name order, each group in the
// order of cs.
func insertGrouped(tx *iradix.Txn[*scheduler.Container], cs []*scheduler.Container, group func(*scheduler.Container) (string, bool)) {
	groups := make(map[string][]*scheduler.Container)
	for _, c := range cs {
		if g, ok := group(c); ok {
			groups[g] = append(groups[g], c)
		}
	}
	names := make([]string, 0, len(groups))
	for g := range groups {
		names = append(names, g)
	}
	slices.SortFunc(names, strings.Compare)
	for _, g := range names {
		for _, c := range groups[g] {
			tx.Insert(pairKeyBytes(g, c.ID), c)
		}
	}
}

// insertByChange fills the per-app change index ("app \x00 modify index
// ID", changeKey) in key order: app by app in name order, each app's
// containers by modify index, then ID.
func insertByChange(tx *iradix.Txn[*scheduler.Container], cs []*scheduler.Container) {
	groups := make(map[string][]*scheduler.Container)
	for _, c := range cs {
		groups[c.AppID] = append(groups[c.AppID], c)
	}
	names := make([]string, 0, len(groups))
	for g := range groups {
		names = append(names, g)
	}
	slices.SortFunc(names, strings.Compare)
	for _, g := range names {
		group := groups[g]
		slices.SortFunc(group, func(a, b *scheduler.Container) int {
			if a.ModifyIndex != b.ModifyIndex {
				if a.ModifyIndex < b.ModifyIndex {
					return -1
				}
				return 1
			}
			return strings.Compare(a.ID, b.ID)
		})
		for _, c := range group {
			tx.Insert(changeKey(c), c)
		}
	}
}

// pairKeyBytes is pairKey in one allocation.
func pairKeyBytes(a, b string) []byte {
	k := make([]byte, 0, len(a)+1+len(b))
	k = append(k, a...)
	k = append(k, 0)
	return append(k, b...)
}
