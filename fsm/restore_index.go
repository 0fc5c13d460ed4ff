package fsm

import (
	"maps"
	"slices"
	"strings"
	"sync"

	"github.com/weft-sched/weft/scheduler"
)

// Restore builds each large container index from its keys in order
// (buildIndex), which makes every node once, full, instead of inserting a
// million keys. Containers arrive in ID order, so grouping them by app (or
// node) while keeping that order, then taking the groups in name order,
// gives the order of the "app \x00 container" keys without sorting a
// million keys.

// restoreContainers fills s's container tables from cs, the restored
// containers in ID order with no ID twice. The four large indexes (by ID,
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
	// build fills *ix with the containers at the positions order gives, in
	// the order of their keys.
	build := func(ix *index[*scheduler.Container], order func() []int, key func(restoreKeys) string) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			at := order()
			*ix = buildIndex(len(at), func(i int) (string, *scheduler.Container) {
				return key(keys[at[i]]), cs[at[i]]
			})
		}()
	}
	build(&s.containers, func() []int {
		all := make([]int, len(cs))
		for i := range all {
			all[i] = i
		}
		return all
	}, func(k restoreKeys) string { return k.id })
	byApp := func(c *scheduler.Container) (string, bool) { return c.AppID, true }
	build(&s.byApp, func() []int { return slices.Concat(grouped(cs, byApp)...) },
		func(k restoreKeys) string { return k.byApp })
	build(&s.byAppChange, func() []int {
		groups := grouped(cs, byApp)
		for _, group := range groups {
			// Within an app, the change key orders by modify index.
			slices.SortFunc(group, func(a, b int) int { return strings.Compare(keys[a].change, keys[b].change) })
		}
		return slices.Concat(groups...)
	}, func(k restoreKeys) string { return k.change })
	live := func(c *scheduler.Container) (string, bool) { return c.NodeID, c.State.Live() }
	build(&s.liveByNode, func() []int { return slices.Concat(grouped(cs, live)...) },
		func(k restoreKeys) string { return k.live })
	defer wg.Wait()
	// Few containers are marked or unstarted at once: these are inserted.
	marked, unstarted := s.marked.Txn(), s.unstarted.Txn()
	for _, c := range cs {
		if k := markedKey(c); k != "" {
			marked.Insert(k, c)
		}
		if k := unstartedKey(c); k != "" {
			unstarted.Insert(k, c)
		}
	}
	s.marked, s.unstarted = marked.Commit(), unstarted.Commit()
}

// restoreKeys are a container's keys in the four large container
// indexes, cut from one allocation (a restore would otherwise make four
// for each of a million containers; they live about as long as the
// container). live is "" for a completed container.
type restoreKeys struct{ id, byApp, change, live string }

func keysFor(c *scheduler.Container) restoreKeys {
	n := 3*len(c.ID) + 2*(len(c.AppID)+1) + 8
	live := c.State.Live()
	if live {
		n += len(c.NodeID) + 1 + len(c.ID)
	}
	// One string holds the four keys end to end; each key is a part of it.
	var b strings.Builder
	b.Grow(n)
	var ends [4]int
	b.WriteString(c.ID)
	ends[0] = b.Len()
	b.WriteString(c.AppID)
	b.WriteByte(0)
	b.WriteString(c.ID)
	ends[1] = b.Len()
	b.WriteString(c.AppID)
	b.WriteByte(0)
	b.Write(indexKey(c.ModifyIndex))
	b.WriteString(c.ID)
	ends[2] = b.Len()
	if live {
		b.WriteString(c.NodeID)
		b.WriteByte(0)
		b.WriteString(c.ID)
	}
	ends[3] = b.Len()
	all := b.String()
	return restoreKeys{id: all[:ends[0]], byApp: all[ends[0]:ends[1]], change: all[ends[1]:ends[2]], live: all[ends[2]:ends[3]]}
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
