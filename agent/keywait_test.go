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
// is newer than every key it holds (a rotation its next heartbeat brings);
// at most maxKeyWaiters calls wait for one, and the rest fail at once: a
// flood of made-up tokens cannot hold the agent's calls (before, each
// such call was held a heartbeat timeout, 3 s). A waiting call verifies
// as soon as the keys arrive.
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
	servers := ring(1, 2)
	a := &Agent{config: &Config{HeartbeatInterval: time.Hour}, clock: clock.Real{}, keys: newWorkloadKeys("n1", make([]byte, identity.NodeKeySize))}
	wire := func(r *identity.Keyring) []wrpc.WorkloadKey {
		var out []wrpc.WorkloadKey
		for _, k := range r.PublicKeys() {
			out = append(out, wrpc.WorkloadKey{ID: k.ID, PublicKey: k.Key})
		}
		return out
	}
	if err := a.keys.set(wire(ring(2))); err != nil {
		t.Fatal(err)
	}
	claims := identity.Claims{Kind: identity.KindContainer, AppID: "app-1", Attempt: 1, ContainerID: "c-1-0", NodeID: "n1",
		Resources: scheduler.Resources{MemoryMB: 1, Vcores: 1}, ExecutionType: scheduler.Guaranteed, Expiry: time.Now().Add(time.Hour).UnixNano()}
	newer, _ := servers.Sign(claims)        // key 2: the agent may not have learned it yet
	madeUp, _ := ring(1, 2, 9).Sign(claims) // key 9: newer too, and never coming

	// 32 calls wait for key 9.
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	results := make(chan error, maxKeyWaiters)
	for i := 0; i < maxKeyWaiters; i++ {
		go func() {
			_, err := a.verifyToken(ctx, madeUp)
			results <- err
		}()
	}
	testutil.WaitFor(t, 10*time.Second, func() bool {
		a.keys.mu.Lock()
		defer a.keys.mu.Unlock()
		return a.keys.waiting == maxKeyWaiters
	})
	// One more fails at once, and so does a token of an old key the agent
	// does not hold: the 32 are still waiting when they return.
	if _, err := a.verifyToken(ctx, madeUp); !errors.Is(err, identity.ErrUnknownKey) {
		t.Fatalf("a call past the waiters' cap: %v", err)
	}
	oldKey, _ := ring(1).Sign(claims) // the agent holds key 2 only
	if _, err := a.verifyToken(ctx, oldKey); !errors.Is(err, identity.ErrUnknownKey) {
		t.Fatalf("a token of an old key the agent does not hold: %v", err)
	}
	a.keys.mu.Lock()
	still := a.keys.waiting
	a.keys.mu.Unlock()
	if still != maxKeyWaiters {
		t.Fatalf("%d calls still wait after the others returned, want %d: those returned only when the waits ended", still, maxKeyWaiters)
	}
	// New keys wake the waiting calls; key 9 is still unknown, so each
	// fails now — none waits its timeout.
	if err := a.keys.set(wire(servers)); err != nil {
		t.Fatal(err)
	}
	for i := 0; i < maxKeyWaiters; i++ {
		if err := <-results; !errors.Is(err, identity.ErrUnknownKey) {
			t.Fatalf("a waiting call: %v", err)
		}
	}
	// A token of a key the agent learns while it waits verifies.
	if err := a.keys.set(wire(ring(1))); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() {
		_, err := a.verifyToken(ctx, newer)
		done <- err
	}()
	testutil.WaitFor(t, 10*time.Second, func() bool {
		a.keys.mu.Lock()
		defer a.keys.mu.Unlock()
		return a.keys.waiting == 1
	})
	if err := a.keys.set(wire(servers)); err != nil {
		t.Fatal(err)
	}
	if err := <-done; err != nil {
		t.Fatalf("a token of a key learned while waiting: %v", err)
	}
}
