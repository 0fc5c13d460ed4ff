package gossip

import (
	"bufio"
	"bytes"
	"fmt"
	"testing"
)

// BenchmarkInspectBigPushPull reads and inspects the push/pull of a pool of
// 30,000 members (200 bytes of tags each, 1 MiB of serf state) as the guard
// does before memberlist reads it.
func BenchmarkInspectBigPushPull(b *testing.B) {
	var nodes []pushNodeState
	for i := 0; i < 30000; i++ {
		n := node(fmt.Sprintf("agent-%05d", i), goodVsn)
		n.Meta = bytes.Repeat([]byte("m"), 200)
		nodes = append(nodes, n)
	}
	m := pushPull(b, false, make([]byte, 1<<20), nodes...)
	b.SetBytes(int64(len(m)))
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		g := &guard{budget: &budget{limit: 1 << 30, perIP: 1 << 30, held: map[string]int64{}}}
		seen := &meteredBuffer{take: func(n int64) bool { return g.budget.take("x", n) }}
		if _, err := inspectStream(&teeScanner{br: bufio.NewReader(bytes.NewReader(m)), seen: seen}, false); err != nil {
			b.Fatal(err)
		}
	}
}
