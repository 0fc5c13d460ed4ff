package agent

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/weft-sched/weft/internal/clock"
	"github.com/weft-sched/weft/internal/identity"
	"github.com/weft-sched/weft/internal/testutil"
	wrpc "github.com/weft-sched/weft/rpc"
	"github.com/weft-sched/weft/scheduler"
)

// A token of a key the agent does not hold fails at once unless the key
// is the one after the newest it holds (a rotation its next heartbeat
// brings); at most maxKeyWaiters calls wait for that one, up to two
// heartbeat intervals, and once a wait ended without it, its calls fail at
// once for a heartbeat interval. A waiting call verifies as soon as the
// keys arrive. Before, every token of an unknown key held its call a
// heartbeat timeout (3 s): 12,500 made-up tokens took an agent to 333 MB.
// The agent's clock is a fake one: a call that waited would block this
// test, so every call that returns here without the clock moving did not.
func TestUnknownKeyTokensFailFast(t *testing.T) {
	ring := func(ids ...uint32) *identity.Keyring {
		keys := make([]identity.Key, len(ids))
		for i, id := range ids {
			keys[i] = identity.Key{ID: id, Secret: make([]byte, identity.KeySize)}
			keys[i].Secret[0] = byte(id)
		}
		r, err := identity.NewKeyring(keys, ids[len(ids)-1])
		if err != nil {
			t.Fatal(err)
		}
		return r
	}
	wire := func(r *identity.Keyring) []wrpc.WorkloadKey {
		var out []wrpc.WorkloadKey
		for _, k := range r.PublicKeys() {
			out = append(out, wrpc.WorkloadKey{ID: k.ID, PublicKey: k.Key})
		}
		return out
	}
	fake := clock.NewFake(time.Unix(1_000_000, 0))
	const interval = time.Second
	a := &Agent{config: &Config{HeartbeatInterval: interval}, clock: fake, keys: newWorkloadKeys("n1", make([]byte, identity.NodeKeySize))}
	if err := a.keys.set(wire(ring(2))); err != nil {
		t.Fatal(err)
	}
	claims := identity.Claims{Kind: identity.KindContainer, AppID: "app-1", Attempt: 1, ContainerID: "c-1-0", NodeID: "n1",
		Resources: scheduler.Resources{MemoryMB: 1, Vcores: 1}, ExecutionType: scheduler.Guaranteed, Expiry: fake.Now().Add(time.Hour).UnixNano()}
	sign := func(r *identity.Keyring) string {
		tok, err := r.Sign(claims)
		if err != nil {
			t.Fatal(err)
		}
		return tok
	}
	next := sign(ring(2, 3))      // key 3: the agent may not have learned it yet
	madeUp := sign(ring(2, 3, 9)) // key 9: no rotation brings it next
	old := sign(ring(1))          // key 1: older than any the agent holds
	ctx := context.Background()
	waiting := func() int {
		a.keys.mu.Lock()
		defer a.keys.mu.Unlock()
		return a.keys.waiting
	}
	mustFail := func(what, tok string) {
		t.Helper()
		if _, err := a.verifyToken(ctx, tok); !errors.Is(err, identity.ErrUnknownKey) {
			t.Fatalf("%s: %v", what, err)
		}
	}
	mustFail("a made-up key", madeUp)
	mustFail("an old key", old)

	// maxKeyWaiters calls wait for key 3; one more fails at once.
	results := make(chan error, maxKeyWaiters)
	for i := 0; i < maxKeyWaiters; i++ {
		go func() {
			_, err := a.verifyToken(ctx, next)
			results <- err
		}()
	}
	testutil.WaitFor(t, 10*time.Second, func() bool { return waiting() == maxKeyWaiters && fake.Waiters() == maxKeyWaiters })
	mustFail("a call past the waiters' cap", next)
	// Their wait ends without key 3: each fails, and calls of key 3 fail
	// at once for a heartbeat interval.
	fake.Advance(2 * interval)
	for i := 0; i < maxKeyWaiters; i++ {
		if err := <-results; !errors.Is(err, identity.ErrUnknownKey) {
			t.Fatalf("a waiting call: %v", err)
		}
	}
	mustFail("key 3 right after a wait for it ended", next)

	// A heartbeat interval on, a call waits again, and verifies as soon as
	// the key arrives.
	fake.Advance(interval)
	done := make(chan error, 1)
	go func() {
		_, err := a.verifyToken(ctx, next)
		done <- err
	}()
	testutil.WaitFor(t, 10*time.Second, func() bool { return waiting() == 1 })
	if err := a.keys.set(wire(ring(2, 3))); err != nil {
		t.Fatal(err)
	}
	if err := <-done; err != nil {
		t.Fatalf("a token of a key learned while waiting: %v", err)
	}
}
