package fsm

import (
	"fmt"
	"testing"
)

// BenchmarkIndexGet measures a lookup in an index of 160,000 composite
// keys of the byApp shape ("app \x00 container"), in an order that
// defeats the cache: most of its cost is reaching the keys' bytes, one
// cache miss per comparison.
func BenchmarkIndexGet(b *testing.B) {
	const n = 160000
	keys := make([]string, n)
	tx := index[int]{}.Txn()
	for i := range keys {
		keys[i] = fmt.Sprintf("app-%03d\x00c-%d-%d", i%100, 1000+i/4096, i%4096)
		tx.Insert(keys[i], i)
	}
	ix := tx.Commit()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if _, ok := ix.Get(keys[(i*7919)%n]); !ok {
			b.Fatal("missing")
		}
	}
}
