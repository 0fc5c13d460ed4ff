package rpc

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"time"
)

// Client calls weft servers. It sticks to one server while calls succeed
// and rotates to the next on a connection error or a no-leader answer,
// retrying for up to its retry budget. It is safe for concurrent use.
type Client struct {
	pool *Pool
	// RetryBudget bounds how long Call keeps retrying retryable failures
	// once every server has been tried.
	RetryBudget time.Duration

	mu      sync.Mutex
	servers []string
	next    int
}

// NewClient returns a client for the given server addresses (host:port).
// If pool is nil the client makes its own.
func NewClient(servers []string, pool *Pool) *Client {
	if pool == nil {
		pool = NewPool(nil)
	}
	c := &Client{pool: pool, RetryBudget: 15 * time.Second}
	c.SetServers(servers)
	return c
}

// SetServers replaces the server list, keeping the current server first if
// it is still in it.
func (c *Client) SetServers(servers []string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	cur := ""
	if len(c.servers) > 0 {
		cur = c.servers[c.next%len(c.servers)]
	}
	c.servers = append([]string(nil), servers...)
	c.next = 0
	for i, s := range c.servers {
		if s == cur {
			c.next = i
		}
	}
}

// Servers returns the current server list.
func (c *Client) Servers() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]string(nil), c.servers...)
}

func (c *Client) current() (string, int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.servers) == 0 {
		return "", 0
	}
	return c.servers[c.next%len(c.servers)], len(c.servers)
}

func (c *Client) rotate(failed string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.servers) > 0 && c.servers[c.next%len(c.servers)] == failed {
		c.next = (c.next + 1) % len(c.servers)
	}
}

// ErrNoServers is returned by a client that has no server addresses.
var ErrNoServers = errors.New("no weft servers known")

// Call invokes method on a server. Server answers are returned as they are,
// except retryable ones (no leader) which, like connection errors, make the
// client try the next server, with jittered backoff once all were tried.
func (c *Client) Call(method string, args, reply any) error {
	return c.CallWithin(method, args, reply, c.RetryBudget)
}

// CallWithin is Call with its own retry budget instead of the client's.
func (c *Client) CallWithin(method string, args, reply any, budget time.Duration) error {
	start := time.Now()
	backoff := 50 * time.Millisecond
	for attempt := 1; ; attempt++ {
		addr, n := c.current()
		if addr == "" {
			return ErrNoServers
		}
		err := c.pool.Call(addr, method, args, reply)
		if err == nil || !IsRetryable(err) {
			return err
		}
		c.rotate(addr)
		if attempt < n {
			continue // try every server once before waiting
		}
		// Connection failures are final after two rounds over every server,
		// so a client whose servers are all down fails fast; a no-leader
		// answer is retried for the whole budget, since an election is on.
		if time.Since(start) > budget || !IsServerError(err) && attempt >= 2*n {
			return err
		}
		time.Sleep(backoff + rand.N(backoff))
		if backoff < time.Second {
			backoff *= 2
		}
	}
}

// Pool returns the client's connection pool.
func (c *Client) Pool() *Pool { return c.pool }

// Close releases the client's connections.
func (c *Client) Close() { c.pool.Shutdown() }

// String describes the client's servers for error messages.
func (c *Client) String() string { return fmt.Sprint(c.Servers()) }
