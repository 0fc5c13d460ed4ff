package fsm

import (
	"fmt"
	"maps"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
)

// model is what an index must behave as: a map, read in key order.
type model map[string]int

func (m model) sorted(from, prefix string) (keys []string, vals []int) {
	return m.filter(slices.Sorted(maps.Keys(m)), from, prefix)
}

// filter keeps the keys of all (m's, sorted) at or after from that start
// with prefix.
func (m model) filter(all []string, from, prefix string) (keys []string, vals []int) {
	for _, k := range all {
		if k >= from && strings.HasPrefix(k, prefix) {
			keys, vals = append(keys, k), append(vals, m[k])
		}
	}
	return keys, vals
}

// contents reads ix from from, keeping the keys that start with prefix.
func contents(ix index[int], from, prefix string) (keys []string, vals []int) {
	ix.Ascend(from, func(k string, v int) bool {
		if !strings.HasPrefix(k, prefix) {
			return true
		}
		keys, vals = append(keys, k), append(vals, v)
		return true
	})
	return keys, vals
}

// checkIndex compares ix with m through every read: Len, Get of each key
// and of absent ones, full, lower-bound and prefix iteration, and the
// tree's own invariants.
func checkIndex(t *testing.T, what string, ix index[int], m model, rng *rand.Rand) {
	t.Helper()
	if ix.Len() != len(m) {
		t.Fatalf("%s: Len %d, want %d", what, ix.Len(), len(m))
	}
	for k, v := range m {
		if got, ok := ix.Get(k); !ok || got != v {
			t.Fatalf("%s: Get(%q) = %d, %v; want %d", what, k, got, ok, v)
		}
	}
	for range 20 {
		k := randomKey(rng)
		want, in := m[k]
		if got, ok := ix.Get(k); ok != in || got != want {
			t.Fatalf("%s: Get(%q) = %d, %v; want %d, %v", what, k, got, ok, want, in)
		}
	}
	all := slices.Sorted(maps.Keys(m))
	wk, wv := m.filter(all, "", "")
	if gk, gv := contents(ix, "", ""); !slices.Equal(gk, wk) || !slices.Equal(gv, wv) {
		t.Fatalf("%s: iteration\n got %q %v\nwant %q %v", what, gk, gv, wk, wv)
	}
	for range 10 {
		from := randomKey(rng)
		wk, wv := m.filter(all, from, "")
		if gk, gv := contents(ix, from, ""); !slices.Equal(gk, wk) || !slices.Equal(gv, wv) {
			t.Fatalf("%s: from %q\n got %q\nwant %q", what, from, gk, wk)
		}
		prefix := from[:1+rng.IntN(len(from))]
		wk, _ = m.filter(all, "", prefix)
		var gk []string
		ix.AscendPrefix(prefix, func(k string, _ int) bool { gk = append(gk, k); return true })
		if !slices.Equal(gk, wk) {
			t.Fatalf("%s: prefix %q\n got %q\nwant %q", what, prefix, gk, wk)
		}
		if got := ix.Values(prefix); len(got) != len(wk) {
			t.Fatalf("%s: Values(%q) has %d, want %d", what, prefix, len(got), len(wk))
		}
	}
	if err := ix.check(); err != nil {
		t.Fatalf("%s: %v", what, err)
	}
}

// check verifies the tree's shape: every leaf at one depth, no node but
// the root below half full or past full, separators between their
// children's keys, and Len the number of keys.
func (ix index[V]) check() error {
	if ix.root == nil {
		if ix.len != 0 {
			return fmt.Errorf("empty tree of Len %d", ix.len)
		}
		return nil
	}
	depth := -1
	count := 0
	var walk func(n *inode[V], d int, lo, hi *string) error
	walk = func(n *inode[V], d int, lo, hi *string) error {
		if n.n > fanout || (n != ix.root && n.n < minFanout) || n.n == 0 {
			return fmt.Errorf("node of %d entries at depth %d", n.n, d)
		}
		if n.leaf() {
			if depth >= 0 && depth != d {
				return fmt.Errorf("leaves at depths %d and %d", depth, d)
			}
			depth = d
			count += n.n
			for i := range n.n {
				k := n.keys[i]
				if (i > 0 && n.keys[i-1] >= k) || (lo != nil && k < *lo) || (hi != nil && k >= *hi) {
					return fmt.Errorf("key %q out of order", k)
				}
			}
			return nil
		}
		if n.n < 2 {
			return fmt.Errorf("inner node of one child")
		}
		for i := range n.n {
			cl, ch := lo, hi
			if i > 0 {
				cl = &n.keys[i-1]
			}
			if i < n.n-1 {
				ch = &n.keys[i]
			}
			if err := walk(n.kids[i], d+1, cl, ch); err != nil {
				return err
			}
		}
		return nil
	}
	if err := walk(ix.root, 0, nil, nil); err != nil {
		return err
	}
	if count != ix.len {
		return fmt.Errorf("%d keys, Len %d", count, ix.len)
	}
	return nil
}

// randomKey draws from a small alphabet so that keys share prefixes and
// collide, as composite keys do.
func randomKey(rng *rand.Rand) string {
	b := make([]byte, 1+rng.IntN(6))
	for i := range b {
		b[i] = "ab\x00cz"[rng.IntN(5)]
	}
	return string(b)
}

// TestIndexAgainstModel applies random inserts and deletes over several
// transactions and checks every version against a map, including the
// versions earlier transactions committed, which must not change.
func TestIndexAgainstModel(t *testing.T) {
	for seed := range uint64(20) {
		rng := rand.New(rand.NewPCG(seed, 1))
		var ix index[int]
		m := model{}
		type version struct {
			ix index[int]
			m  model
		}
		var versions []version
		txns := 1 + rng.IntN(12)
		for tn := range txns {
			tx := ix.Txn()
			ops := rng.IntN(2000)
			deleteBias := rng.IntN(3) // some transactions shrink the tree
			for range ops {
				k := randomKey(rng)
				if rng.IntN(4) < 1+deleteBias {
					old, ok := tx.Delete(k)
					if want, in := m[k]; ok != in || old != want {
						t.Fatalf("seed %d: Delete(%q) = %d, %v; want %d, %v", seed, k, old, ok, want, in)
					}
					delete(m, k)
				} else {
					v := rng.Int()
					old, replaced := tx.Insert(k, v)
					if want, in := m[k]; replaced != in || old != want {
						t.Fatalf("seed %d: Insert(%q) = %d, %v; want %d, %v", seed, k, old, replaced, want, in)
					}
					m[k] = v
				}
				if rng.IntN(500) == 0 {
					checkIndex(t, fmt.Sprintf("seed %d txn %d uncommitted", seed, tn), tx.Index(), m, rng)
				}
			}
			ix = tx.Commit()
			versions = append(versions, version{ix, maps.Clone(m)})
			checkIndex(t, fmt.Sprintf("seed %d: txn %d", seed, tn), ix, m, rng)
		}
		for j, v := range versions {
			checkIndex(t, fmt.Sprintf("seed %d: version %d after %d txns", seed, j, txns), v.ix, v.m, rng)
		}
	}
}

// TestIndexTxnGoesOnAfterCommit checks that a transaction that has
// committed copies again what it changes next: the committed index keeps
// its contents.
func TestIndexTxnGoesOnAfterCommit(t *testing.T) {
	tx := index[int]{}.Txn()
	for i := range 1000 {
		tx.Insert(fmt.Sprintf("k%04d", i), i)
	}
	first := tx.Commit()
	for i := range 1000 {
		if i%2 == 0 {
			tx.Delete(fmt.Sprintf("k%04d", i))
		} else {
			tx.Insert(fmt.Sprintf("k%04d", i), -i)
		}
	}
	second := tx.Commit()
	for i := range 1000 {
		k := fmt.Sprintf("k%04d", i)
		if v, ok := first.Get(k); !ok || v != i {
			t.Fatalf("first: Get(%s) = %d, %v", k, v, ok)
		}
		v, ok := second.Get(k)
		if i%2 == 0 && ok || i%2 == 1 && v != -i {
			t.Fatalf("second: Get(%s) = %d, %v", k, v, ok)
		}
	}
	if first.Len() != 1000 || second.Len() != 500 {
		t.Fatalf("Len %d and %d, want 1000 and 500", first.Len(), second.Len())
	}
}

// TestBuildIndexEqualsInserts builds indexes of every size up to a few
// levels from sorted keys and compares each with the same keys inserted,
// then changes the built one to check that it takes changes like any.
func TestBuildIndexEqualsInserts(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 7))
	for _, n := range []int{0, 1, 2, fanout - 1, fanout, fanout + 1, 2*fanout + 3, fanout * fanout, fanout*fanout + 1, 40000} {
		m := model{}
		for len(m) < n {
			m[fmt.Sprintf("%08x", rng.Uint32())] = rng.Int()
		}
		keys, vals := m.sorted("", "")
		built := buildIndex(n, func(i int) (string, int) { return keys[i], vals[i] })
		checkIndex(t, fmt.Sprintf("built %d", n), built, m, rng)
		tx := index[int]{}.Txn()
		for _, i := range rng.Perm(n) {
			tx.Insert(keys[i], vals[i])
		}
		inserted := tx.Commit()
		gk, gv := contents(built, "", "")
		ik, iv := contents(inserted, "", "")
		if !slices.Equal(gk, ik) || !slices.Equal(gv, iv) {
			t.Fatalf("%d keys: built and inserted indexes differ", n)
		}
		after := maps.Clone(m)
		btx := built.Txn()
		for _, k := range keys {
			if rng.IntN(2) == 0 {
				btx.Delete(k)
				delete(after, k)
			}
		}
		for range n / 4 {
			k := fmt.Sprintf("%08x", rng.Uint32())
			btx.Insert(k, 1)
			after[k] = 1
		}
		checkIndex(t, fmt.Sprintf("built %d, changed", n), btx.Commit(), after, rng)
		checkIndex(t, fmt.Sprintf("built %d, after a change", n), built, m, rng)
	}
}
