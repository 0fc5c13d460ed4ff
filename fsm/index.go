package fsm

import "strings"

// index is an immutable ordered map from string keys to values: a
// copy-on-write B+ tree. An index is never changed once built; an
// indexTxn makes a new one that shares every node it did not change.
// Readers of an index need no locks, whatever transactions run.
//
// Why not a radix tree: a go-immutable-radix transaction allocates a
// channel for every node it writes and keeps an LRU of the nodes it has
// written, and copies a path of small nodes per key; a B+ tree copies a
// path of a few wide nodes once per transaction and changes them in place
// after, and a node is one allocation (two for an inner node). Why not
// github.com/google/btree: its Clone writes to the tree it clones (a
// published one, here), a node copy costs three allocations and a locked
// free list, every comparison is an indirect call, and it cannot be built
// from sorted keys in one pass.
type index[V any] struct {
	root *inode[V]
	len  int
}

// fanout is the most entries a leaf holds and the most children an inner
// node has; every node but the root holds at least half as many.
const (
	fanout    = 32
	minFanout = fanout / 2
)

// inode is a node of an index. A leaf holds n keys and their values in
// order; an inner node has n children and n-1 separators, keys[i] being
// no greater than any key under kids[i+1] and greater than every key
// under kids[i] (it need not be a key still in the index).
type inode[V any] struct {
	// owner is the transaction that made the node and may still change
	// it in place; no transaction owns a node once it is published.
	owner *writer
	n     int
	kids  *[fanout]*inode[V] // nil in a leaf
	keys  [fanout]string
	vals  [fanout]V // leaves only
}

// writer identifies a transaction's ownership of the nodes it made: a
// fresh one on every commit leaves everything made before read-only.
type writer struct{ _ byte }

func (n *inode[V]) leaf() bool { return n.kids == nil }

// Len returns the number of keys.
func (ix index[V]) Len() int { return ix.len }

// Get returns the value at key.
func (ix index[V]) Get(key string) (V, bool) {
	n := ix.root
	if n == nil {
		var zero V
		return zero, false
	}
	for !n.leaf() {
		n = n.kids[childFor(n, key)]
	}
	i, found := search(n.keys[:n.n], key)
	if !found {
		var zero V
		return zero, false
	}
	return n.vals[i], true
}

// Ascend calls f with each key at or after from and its value, in key
// order, until f returns false. It returns false if f did.
func (ix index[V]) Ascend(from string, f func(key string, v V) bool) bool {
	if ix.root == nil {
		return true
	}
	return ascend(ix.root, from, f)
}

// AscendPrefix calls f with each key that starts with prefix and its
// value, in key order, until f returns false.
func (ix index[V]) AscendPrefix(prefix string, f func(key string, v V) bool) {
	ix.Ascend(prefix, func(k string, v V) bool { return strings.HasPrefix(k, prefix) && f(k, v) })
}

// Values returns the values whose keys start with prefix, in key order.
func (ix index[V]) Values(prefix string) []V {
	var out []V
	ix.AscendPrefix(prefix, func(_ string, v V) bool {
		out = append(out, v)
		return true
	})
	return out
}

func ascend[V any](n *inode[V], from string, f func(string, V) bool) bool {
	if n.leaf() {
		i, _ := search(n.keys[:n.n], from)
		for ; i < n.n; i++ {
			if !f(n.keys[i], n.vals[i]) {
				return false
			}
		}
		return true
	}
	for i := childFor(n, from); i < n.n; i++ {
		if !ascend(n.kids[i], from, f) {
			return false
		}
		from = "" // every later child is past it
	}
	return true
}

// search returns the position of the first key at or after key in keys,
// and whether it is key.
func search(keys []string, key string) (int, bool) {
	lo, hi := 0, len(keys)
	for lo < hi {
		m := int(uint(lo+hi) >> 1)
		if keys[m] < key {
			lo = m + 1
		} else {
			hi = m
		}
	}
	return lo, lo < len(keys) && keys[lo] == key
}

// childFor returns which child of inner node n holds key if anything
// does: the number of n's separators at or before key.
func childFor[V any](n *inode[V], key string) int {
	lo, hi := 0, n.n-1
	for lo < hi {
		m := int(uint(lo+hi) >> 1)
		if n.keys[m] <= key {
			lo = m + 1
		} else {
			hi = m
		}
	}
	return lo
}

// indexTxn changes an index: it copies a node the first time it changes
// it and changes its own copies in place after, so a transaction of many
// changes copies each node of the paths it takes once. It is not safe for
// concurrent use, and nothing may read what it has not committed from
// another goroutine.
type indexTxn[V any] struct {
	root *inode[V]
	len  int
	w    *writer
}

// Txn starts a transaction on ix; ix itself never changes.
func (ix index[V]) Txn() *indexTxn[V] {
	return &indexTxn[V]{root: ix.root, len: ix.len, w: new(writer)}
}

// Commit returns the index as the transaction has made it. The
// transaction may go on: it copies again whatever it changes next.
func (t *indexTxn[V]) Commit() index[V] {
	t.w = new(writer)
	return index[V]{root: t.root, len: t.len}
}

// Index returns the index as the transaction has made it so far, for
// reading while the transaction is not changing it.
func (t *indexTxn[V]) Index() index[V] { return index[V]{root: t.root, len: t.len} }

// Get returns the value at key as of the transaction.
func (t *indexTxn[V]) Get(key string) (V, bool) { return t.Index().Get(key) }

// Len returns the number of keys as of the transaction.
func (t *indexTxn[V]) Len() int { return t.len }

// own returns n, or a copy of it that t may change.
func (t *indexTxn[V]) own(n *inode[V]) *inode[V] {
	if n.owner == t.w {
		return n
	}
	c := new(inode[V])
	*c = *n
	c.owner = t.w
	if n.kids != nil {
		kids := *n.kids
		c.kids = &kids
	}
	return c
}

func (t *indexTxn[V]) newNode(inner bool) *inode[V] {
	n := &inode[V]{owner: t.w}
	if inner {
		n.kids = new([fanout]*inode[V])
	}
	return n
}

// Insert sets key's value, returning the value it replaced if any.
func (t *indexTxn[V]) Insert(key string, v V) (old V, replaced bool) {
	if t.root == nil {
		t.root = t.newNode(false)
	}
	t.root = t.own(t.root)
	old, replaced, right, sep := t.insert(t.root, key, v)
	if right != nil {
		root := t.newNode(true)
		root.n = 2
		root.kids[0], root.kids[1], root.keys[0] = t.root, right, sep
		t.root = root
	}
	if !replaced {
		t.len++
	}
	return old, replaced
}

// insert sets key's value under n, which t owns. If n had to split, it
// returns its new right half and the separator that goes before it.
func (t *indexTxn[V]) insert(n *inode[V], key string, v V) (old V, replaced bool, right *inode[V], sep string) {
	if n.leaf() {
		i, found := search(n.keys[:n.n], key)
		if found {
			old, n.vals[i] = n.vals[i], v
			return old, true, nil, ""
		}
		if n.n == fanout {
			right = t.splitLeaf(n)
			if i > n.n {
				t.leafInsert(right, i-n.n, key, v)
			} else {
				t.leafInsert(n, i, key, v)
			}
			return old, false, right, right.keys[0]
		}
		t.leafInsert(n, i, key, v)
		return old, false, nil, ""
	}
	i := childFor(n, key)
	c := t.own(n.kids[i])
	n.kids[i] = c
	old, replaced, r, s := t.insert(c, key, v)
	if r == nil {
		return old, replaced, nil, ""
	}
	if n.n < fanout {
		innerInsert(n, i, s, r)
		return old, replaced, nil, ""
	}
	right, sep = t.splitInner(n)
	if i >= n.n {
		innerInsert(right, i-n.n, s, r)
	} else {
		innerInsert(n, i, s, r)
	}
	return old, replaced, right, sep
}

func (t *indexTxn[V]) leafInsert(n *inode[V], i int, key string, v V) {
	copy(n.keys[i+1:n.n+1], n.keys[i:n.n])
	copy(n.vals[i+1:n.n+1], n.vals[i:n.n])
	n.keys[i], n.vals[i] = key, v
	n.n++
}

// innerInsert puts child r and the separator s before it after n's
// child i.
func innerInsert[V any](n *inode[V], i int, s string, r *inode[V]) {
	copy(n.kids[i+2:n.n+1], n.kids[i+1:n.n])
	copy(n.keys[i+1:n.n], n.keys[i:n.n-1])
	n.kids[i+1], n.keys[i] = r, s
	n.n++
}

// splitLeaf moves the upper half of full leaf n to a new leaf.
func (t *indexTxn[V]) splitLeaf(n *inode[V]) *inode[V] {
	r := t.newNode(false)
	h := fanout / 2
	r.n = copy(r.keys[:], n.keys[h:n.n])
	copy(r.vals[:], n.vals[h:n.n])
	clear(n.keys[h:n.n])
	clear(n.vals[h:n.n])
	n.n = h
	return r
}

// splitInner moves the upper half of full inner node n's children to a
// new node, returning it and the separator that goes before it.
func (t *indexTxn[V]) splitInner(n *inode[V]) (*inode[V], string) {
	r := t.newNode(true)
	h := fanout / 2
	r.n = copy(r.kids[:], n.kids[h:n.n])
	copy(r.keys[:], n.keys[h:n.n-1])
	sep := n.keys[h-1]
	clear(n.kids[h:n.n])
	clear(n.keys[h-1 : n.n-1])
	n.n = h
	return r, sep
}

// Delete removes key, returning its value if it was there.
func (t *indexTxn[V]) Delete(key string) (old V, ok bool) {
	if t.root == nil {
		return old, false
	}
	root, old, ok := t.delete(t.root, key)
	if !ok {
		return old, false
	}
	t.len--
	switch {
	case root.leaf() && root.n == 0:
		root = nil
	case !root.leaf() && root.n == 1:
		root = root.kids[0]
	}
	t.root = root
	return old, true
}

// delete removes key from under n. If it was there, it returns what
// replaces n: n itself if t owns it, else t's copy. A key that is not
// there copies nothing.
func (t *indexTxn[V]) delete(n *inode[V], key string) (*inode[V], V, bool) {
	var old V
	if n.leaf() {
		i, found := search(n.keys[:n.n], key)
		if !found {
			return n, old, false
		}
		n = t.own(n)
		old = n.vals[i]
		copy(n.keys[i:n.n-1], n.keys[i+1:n.n])
		copy(n.vals[i:n.n-1], n.vals[i+1:n.n])
		n.n--
		var zero V
		n.keys[n.n], n.vals[n.n] = "", zero
		return n, old, true
	}
	i := childFor(n, key)
	c, old, found := t.delete(n.kids[i], key)
	if !found {
		return n, old, false
	}
	n = t.own(n)
	n.kids[i] = c
	if c.n < minFanout && n.n > 1 {
		t.rebalance(n, i)
	}
	return n, old, true
}

// rebalance refills n's child i, which has fewer than minFanout entries,
// from a neighbour: merging the two if they fit in one node, else sharing
// their entries evenly.
func (t *indexTxn[V]) rebalance(n *inode[V], i int) {
	if i == n.n-1 {
		i--
	}
	l, r := t.own(n.kids[i]), t.own(n.kids[i+1])
	n.kids[i], n.kids[i+1] = l, r
	// Gather both nodes' entries (with the separator between them, for
	// inner nodes, where it becomes an entry).
	var keys [2 * fanout]string
	var vals [2 * fanout]V
	var kids [2 * fanout]*inode[V]
	var total int // entries (leaves) or children (inner)
	if l.leaf() {
		copy(keys[:], l.keys[:l.n])
		copy(keys[l.n:], r.keys[:r.n])
		copy(vals[:], l.vals[:l.n])
		copy(vals[l.n:], r.vals[:r.n])
	} else {
		copy(kids[:], l.kids[:l.n])
		copy(kids[l.n:], r.kids[:r.n])
		copy(keys[:], l.keys[:l.n-1])
		keys[l.n-1] = n.keys[i]
		copy(keys[l.n:], r.keys[:r.n-1])
	}
	total = l.n + r.n
	if total <= fanout {
		t.fill(l, keys[:], vals[:], kids[:], 0, total)
		// Drop r and the separator before it.
		copy(n.kids[i+1:n.n-1], n.kids[i+2:n.n])
		copy(n.keys[i:n.n-2], n.keys[i+1:n.n-1])
		n.kids[n.n-1], n.keys[n.n-2] = nil, ""
		n.n--
		return
	}
	h := total / 2
	t.fill(l, keys[:], vals[:], kids[:], 0, h)
	t.fill(r, keys[:], vals[:], kids[:], h, total)
	if l.leaf() {
		n.keys[i] = r.keys[0]
	} else {
		n.keys[i] = keys[h-1]
	}
}

// fill makes n, which t owns, hold entries [from, to) of what rebalance
// gathered: keys and values for a leaf, children and the separators
// between them for an inner node.
func (t *indexTxn[V]) fill(n *inode[V], keys []string, vals []V, kids []*inode[V], from, to int) {
	var zero V
	if n.leaf() {
		copy(n.keys[:], keys[from:to])
		copy(n.vals[:], vals[from:to])
		for j := to - from; j < fanout; j++ {
			n.keys[j], n.vals[j] = "", zero
		}
	} else {
		copy(n.kids[:], kids[from:to])
		copy(n.keys[:], keys[from:to-1])
		for j := to - from; j < fanout; j++ {
			n.kids[j] = nil
		}
		for j := to - from - 1; j < fanout; j++ {
			n.keys[j] = ""
		}
	}
	n.n = to - from
}

// buildIndex builds an index of n entries given in strictly increasing
// key order by at, filling every node but none past fanout: what restore
// uses instead of n inserts.
func buildIndex[V any](n int, at func(i int) (string, V)) index[V] {
	if n == 0 {
		return index[V]{}
	}
	level := make([]*inode[V], 0, (n+fanout-1)/fanout)
	mins := make([]string, 0, cap(level)) // the least key under each node
	i := 0
	for _, size := range shares(n) {
		leaf := &inode[V]{n: size}
		for j := range size {
			leaf.keys[j], leaf.vals[j] = at(i)
			i++
		}
		level = append(level, leaf)
		mins = append(mins, leaf.keys[0])
	}
	for len(level) > 1 {
		var up []*inode[V]
		var upMins []string
		k := 0
		for _, size := range shares(len(level)) {
			p := &inode[V]{n: size, kids: new([fanout]*inode[V])}
			copy(p.kids[:], level[k:k+size])
			copy(p.keys[:], mins[k+1:k+size])
			up, upMins = append(up, p), append(upMins, mins[k])
			k += size
		}
		level, mins = up, upMins
	}
	return index[V]{root: level[0], len: n}
}

// shares splits n entries into the fewest nodes of at most fanout, as
// evenly as they go: each gets at least minFanout when there are two or
// more.
func shares(n int) []int {
	nodes := (n + fanout - 1) / fanout
	out := make([]int, nodes)
	for j := range out {
		out[j] = n / nodes
		if j < n%nodes {
			out[j]++
		}
	}
	return out
}
