package inflight

import "sync"

// Limits are the bounds of a Counter. Zero (or negative) means no bound.
type Limits struct {
	// Total bounds the calls in flight over every key.
	Total int
	// PerKey bounds the calls in flight of one key.
	PerKey int
}

// Counter counts calls in flight. The zero Counter bounds nothing; use
// New. It is safe for concurrent use.
type Counter struct {
	limits Limits

	mu    sync.Mutex
	total int
	byKey map[string]int
	// peak is the most calls ever in flight at once (tests, metrics).
	peak int
}

// New returns a Counter with limits.
func New(limits Limits) *Counter {
	return &Counter{limits: limits, byKey: map[string]int{}}
}

// Limits returns the counter's bounds.
func (c *Counter) Limits() Limits { return c.limits }

// Acquire counts one more call of key and reports true, or reports false
// and counts nothing when the call would take the total or key's count
// past its bound. Every true must be matched by one Release of the same
// key. The empty key has no bound of its own, only the total's.
func (c *Counter) Acquire(key string) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.limits.Total > 0 && c.total >= c.limits.Total {
		return false
	}
	if key != "" && c.limits.PerKey > 0 && c.byKey[key] >= c.limits.PerKey {
		return false
	}
	c.total++
	c.peak = max(c.peak, c.total)
	if key != "" {
		if c.byKey == nil {
			c.byKey = map[string]int{}
		}
		c.byKey[key]++
	}
	return true
}

// Release ends a call of key that Acquire counted.
func (c *Counter) Release(key string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.total--
	if key == "" {
		return
	}
	if c.byKey[key]--; c.byKey[key] <= 0 {
		delete(c.byKey, key)
	}
}

// InFlight returns the calls in flight, in all and of key.
func (c *Counter) InFlight(key string) (total, ofKey int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.total, c.byKey[key]
}

// Peak returns the most calls that were ever in flight at once.
func (c *Counter) Peak() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.peak
}

// Keys returns how many keys have calls in flight.
func (c *Counter) Keys() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.byKey)
}
