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

// indexContainers fills the secondary container indexes from cs, the
// restored containers in ID order.
// The three large indexes are built at once, each in its own goroutine (the
// transactions share nothing), so a server with cores to spare restores
// in about the time of the slower one.
func indexContainers(cs []*scheduler.Container, byApp, byAppChange, live, marked, unstarted *iradix.Txn[*scheduler.Container]) {
	var wg sync.WaitGroup
	wg.Add(3)
	go func() {
		defer wg.Done()
		insertGrouped(byApp, cs, func(c *scheduler.Container) (string, bool) { return c.AppID, true })
	}()
	go func() {
		defer wg.Done()
		insertByChange(byAppChange, cs)
	}()
	go func() {
		defer wg.Done()
		insertGrouped(live, cs, func(c *scheduler.Container) (string, bool) { return c.NodeID, c.State.Live() })
	}()
	defer wg.Wait()
	// Few containers are marked or unstarted at once: these stay in
	// arrival order.
	for _, c := range cs {
		if k := markedKey(c); k != nil {
			marked.Insert(k, c)
		}
		if k := unstartedKey(c); k != nil {
			unstarted.Insert(k, c)
		}
	}
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

// lastOfEach keeps, of a damaged snapshot's repeated containers, the one
// the primary index holds (the last read), in ID order.
func lastOfEach(containers *iradix.Txn[*scheduler.Container], cs []*scheduler.Container) []*scheduler.Container {
	out := cs[:0:0]
	for _, c := range cs {
		if kept, _ := containers.Get([]byte(c.ID)); kept == c {
			out = append(out, c)
		}
	}
	return out
}
