package fsm

import (
	"bytes"
	"maps"
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
// its own goroutine (they share nothing but the read-only keys), so a
// server restores in about the time of the slowest one when it has a
// core for each.
func restoreContainers(s *State, cs []*scheduler.Container) {
	keys := make([]restoreKeys, len(cs))
	for i, c := range cs {
		keys[i] = keysFor(c)
	}
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
		for i, c := range cs {
			tx.Insert(keys[i].id, c)
		}
	})
	byApp := func(c *scheduler.Container) (string, bool) { return c.AppID, true }
	build(&s.byApp, func(tx *iradix.Txn[*scheduler.Container]) {
		for _, group := range grouped(cs, byApp) {
			for _, i := range group {
				tx.Insert(keys[i].byApp, cs[i])
			}
		}
	})
	build(&s.byAppChange, func(tx *iradix.Txn[*scheduler.Container]) {
		for _, group := range grouped(cs, byApp) {
			// Within an app, the change key orders by modify index.
			slices.SortFunc(group, func(a, b int) int { return bytes.Compare(keys[a].change, keys[b].change) })
			for _, i := range group {
				tx.Insert(keys[i].change, cs[i])
			}
		}
	})
	build(&s.liveByNode, func(tx *iradix.Txn[*scheduler.Container]) {
		live := func(c *scheduler.Container) (string, bool) { return c.NodeID, c.State.Live() }
		for _, group := range grouped(cs, live) {
			for _, i := range group {
				tx.Insert(keys[i].live, cs[i])
			}
		}
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

// restoreKeys are a container's keys in the four large container trees,
// cut from one allocation (a restore would otherwise make four for each
// of a million containers; they live about as long as the container).
// live is nil for a completed container.
type restoreKeys struct{ id, byApp, change, live []byte }

func keysFor(c *scheduler.Container) restoreKeys {
	n := 3*len(c.ID) + 2*(len(c.AppID)+1) + 8
	live := c.State.Live()
	if live {
		n += len(c.NodeID) + 1 + len(c.ID)
	}
	b := make([]byte, 0, n)
	// cut returns what was appended since start, capped so that nothing
	// appended to it could reach the next key.
	cut := func(start int) []byte { return b[start:len(b):len(b)] }
	var k restoreKeys
	b = append(b, c.ID...)
	k.id = cut(0)
	start := len(b)
	b = append(append(append(b, c.AppID...), 0), c.ID...)
	k.byApp = cut(start)
	start = len(b)
	b = append(append(append(append(b, c.AppID...), 0), indexKey(c.ModifyIndex)...), c.ID...)
	k.change = cut(start)
	if live {
		start = len(b)
		b = append(append(append(b, c.NodeID...), 0), c.ID...)
		k.live = cut(start)
	}
	return k
}

// grouped returns the positions in cs of the containers group selects,
// group by group in name order, each group in the order of cs.
func grouped(cs []*scheduler.Container, group func(*scheduler.Container) (string, bool)) [][]int {
	groups := make(map[string][]int)
	for i, c := range cs {
		if g, ok := group(c); ok {
			groups[g] = append(groups[g], i)
		}
	}
	out := make([][]int, 0, len(groups))
	for _, g := range slices.Sorted(maps.Keys(groups)) {
		out = append(out, groups[g])
	}
	return out
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
