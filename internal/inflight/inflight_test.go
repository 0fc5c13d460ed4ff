package inflight

import (
	"sync"
	"testing"
)

func TestBoundsPerKeyAndInAll(t *testing.T) {
	c := New(Limits{Total: 5, PerKey: 2})
	for i := 0; i < 2; i++ {
		if !c.Acquire("a") {
			t.Fatalf("call %d of a refused under its bound", i+1)
		}
	}
	if c.Acquire("a") {
		t.Fatal("a third call of a was counted past the per-key bound of 2")
	}
	if !c.Acquire("b") || !c.Acquire("b") || !c.Acquire("") {
		t.Fatal("other keys were refused while the total had room")
	}
	if c.Acquire("c") {
		t.Fatal("a sixth call was counted past the total of 5")
	}
	if total, ofA := c.InFlight("a"); total != 5 || ofA != 2 {
		t.Fatalf("in flight %d, of a %d; want 5 and 2", total, ofA)
	}
	c.Release("a")
	if !c.Acquire("c") {
		t.Fatal("a call was refused after another ended")
	}
	for _, k := range []string{"a", "b", "b", "", "c"} {
		c.Release(k)
	}
	if total, _ := c.InFlight(""); total != 0 || c.Keys() != 0 {
		t.Fatalf("after every release: %d in flight, %d keys held", total, c.Keys())
	}
	if c.Peak() != 5 {
		t.Fatalf("peak %d, want 5", c.Peak())
	}
}

func TestZeroLimitsBoundNothing(t *testing.T) {
	c := New(Limits{})
	for i := 0; i < 1000; i++ {
		if !c.Acquire("k") {
			t.Fatalf("call %d refused with no bounds", i+1)
		}
	}
}

// Under concurrent callers the bound holds at every moment.
func TestConcurrentCallersNeverExceedTheBound(t *testing.T) {
	c := New(Limits{Total: 8, PerKey: 3})
	var wg sync.WaitGroup
	for g := 0; g < 16; g++ {
		key := string(rune('a' + g%4))
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < 2000; i++ {
				if c.Acquire(key) {
					if total, ofKey := c.InFlight(key); total > 8 || ofKey > 3 {
						t.Errorf("in flight %d (of %s: %d) past the bounds 8 and 3", total, key, ofKey)
					}
					c.Release(key)
				}
			}
		}()
	}
	wg.Wait()
	if c.Peak() > 8 {
		t.Fatalf("peak %d past the total of 8", c.Peak())
	}
}
