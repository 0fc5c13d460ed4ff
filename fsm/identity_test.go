package fsm

import (
	"bytes"
	"crypto/sha256"
	"io"
	"reflect"
	"testing"
	"time"

	"github.com/weft-sched/weft/scheduler"
)

// checkIdentityInvariants: workload keys are in strictly increasing ID
// order, each of the right size, and only the last (the highest ID) is
// active; node secret hashes are SHA-256 sums or absent.
func checkIdentityInvariants(t testing.TB, st *State) {
	t.Helper()
	keys := st.WorkloadKeys()
	for i, k := range keys {
		if len(k.Secret) != WorkloadKeySize {
			t.Fatalf("workload key %d has a %d-byte secret", k.ID, len(k.Secret))
		}
		if i > 0 && keys[i-1].ID >= k.ID {
			t.Fatalf("workload key %d follows key %d", k.ID, keys[i-1].ID)
		}
		if last := i == len(keys)-1; last != (k.RetiredAt == 0) {
			t.Fatalf("workload key %d of %d: retired_at %d; only the last key is active", i+1, len(keys), k.RetiredAt)
		}
	}
	for _, n := range st.Nodes() {
		if l := len(n.SecretHash); l != 0 && l != sha256.Size {
			t.Fatalf("node %s has a %d-byte secret hash", n.ID, l)
		}
	}
}

func secret(b byte) []byte { return bytes.Repeat([]byte{b}, WorkloadKeySize) }

func hashOf(s string) []byte { h := sha256.Sum256([]byte(s)); return h[:] }

const day = int64(24 * time.Hour)

func TestWorkloadKeyCreationAndRotation(t *testing.T) {
	h := newHarness(t)
	if id := h.ok(WorkloadKeyType, &WorkloadKeyRequest{Secret: secret(1), IfNone: true, RetainRetired: day, Now: 10}).(uint64); id != 1 {
		t.Fatalf("first key got id %d", id)
	}
	// A second leader racing to create the first key changes nothing.
	before := h.f.State().WorkloadKeys()
	if id := h.ok(WorkloadKeyType, &WorkloadKeyRequest{Secret: secret(2), IfNone: true, RetainRetired: day, Now: 11}).(uint64); id != 1 {
		t.Fatalf("IfNone with a key present answered %d", id)
	}
	if after := h.f.State().WorkloadKeys(); !reflect.DeepEqual(after, before) {
		t.Fatalf("IfNone with a key present changed the keys: %+v", after)
	}
	// A rotation retires the active key and keeps it for verification.
	if id := h.ok(WorkloadKeyType, &WorkloadKeyRequest{Secret: secret(3), RetainRetired: day, Now: 100}).(uint64); id != 2 {
		t.Fatalf("rotation got id %d", id)
	}
	keys := h.f.State().WorkloadKeys()
	if len(keys) != 2 || keys[0].RetiredAt != 100 || keys[1].RetiredAt != 0 || !bytes.Equal(keys[1].Secret, secret(3)) {
		t.Fatalf("after rotation: %+v", keys)
	}
	// The next rotation within the retention keeps it; one after drops it.
	h.ok(WorkloadKeyType, &WorkloadKeyRequest{Secret: secret(4), RetainRetired: day, Now: 100 + day - 1})
	if keys := h.f.State().WorkloadKeys(); len(keys) != 3 || keys[0].ID != 1 {
		t.Fatalf("key 1 dropped before its tokens expired: %+v", keys)
	}
	h.ok(WorkloadKeyType, &WorkloadKeyRequest{Secret: secret(5), RetainRetired: day, Now: 100 + day})
	keys = h.f.State().WorkloadKeys()
	if len(keys) != 3 || keys[0].ID != 2 || keys[2].ID != 4 {
		t.Fatalf("after the retention passed: %+v", keys)
	}

	// Invalid keys are refused and change nothing.
	before = h.f.State().WorkloadKeys()
	for _, bad := range []*WorkloadKeyRequest{
		{Secret: []byte("short"), RetainRetired: day, Now: 1},
		{Secret: secret(6), RetainRetired: 0, Now: 1},
	} {
		if _, isErr := h.apply(WorkloadKeyType, bad).(error); !isErr {
			t.Fatalf("workload key %+v accepted", bad)
		}
	}
	if after := h.f.State().WorkloadKeys(); !reflect.DeepEqual(after, before) {
		t.Fatalf("refused key commands changed the keys")
	}
}

func registerWithSecret(h *harness, id string, hash []byte) any {
	return h.apply(NodeRegisterType, &NodeRegisterRequest{ID: id, Address: id + ":8049",
		Capacity: scheduler.Resources{MemoryMB: 4096, Vcores: 8}, SecretHash: hash})
}

// A node registered with a secret is re-registered only with it: a
// registration with another secret (or none) is refused, and the node and
// its containers are untouched.
func TestNodeSecretGuardsReRegistration(t *testing.T) {
	h := newHarness(t)
	if epoch := registerWithSecret(h, "n1", hashOf("right")); epoch != uint64(1) {
		t.Fatalf("first registration: %v", epoch)
	}
	app := h.submit(1)
	am := h.placeAM(app, "n1", 1)
	before := h.f.State()
	for _, wrong := range [][]byte{hashOf("wrong"), nil} {
		h.refused(NodeRegisterType, &NodeRegisterRequest{ID: "n1", Address: "evil:8049",
			Capacity: scheduler.Resources{MemoryMB: 1 << 40, Vcores: 1 << 20}, SecretHash: wrong}, "another node secret")
	}
	after := h.f.State()
	n0, _ := before.Node("n1")
	n1, _ := after.Node("n1")
	if !reflect.DeepEqual(n0, n1) || !reflect.DeepEqual(before.NodeLiveContainers("n1"), after.NodeLiveContainers("n1")) {
		t.Fatalf("a refused registration changed node n1: %+v, now %+v", n0, n1)
	}
	if c := h.container(am); !c.State.Live() {
		t.Fatalf("the AM container of n1 was lost: %+v", c)
	}
	h.refused(NodeRegisterType, &NodeRegisterRequest{ID: "n2", Capacity: scheduler.Resources{MemoryMB: 1, Vcores: 1}, SecretHash: []byte("short")}, "secret_hash")

	// The right secret registers it again, at a new epoch.
	if epoch := registerWithSecret(h, "n1", hashOf("right")); epoch != uint64(2) {
		t.Fatalf("re-registration with the right secret: %v", epoch)
	}
	// A node without a secret (registered before secrets existed) takes
	// the first one it is registered with.
	registerWithSecret(h, "old", nil)
	if epoch := registerWithSecret(h, "old", hashOf("new")); epoch != uint64(2) {
		t.Fatalf("a node without a secret: %v", epoch)
	}
	if n, _ := h.f.State().Node("old"); !bytes.Equal(n.SecretHash, hashOf("new")) {
		t.Fatalf("node old's secret hash %x", n.SecretHash)
	}
}

// Only a DOWN node's secret may be reset; the next registration sets a
// new one.
func TestNodeSecretReset(t *testing.T) {
	h := newHarness(t)
	registerWithSecret(h, "n1", hashOf("lost"))
	h.refused(NodeSecretResetType, &NodeSecretResetRequest{ID: "n1"}, "only a DOWN node")
	h.refused(NodeSecretResetType, &NodeSecretResetRequest{ID: "nobody"}, "not registered")
	h.ok(NodeStatusType, &NodeStatusRequest{ID: "n1", Epoch: 1, Status: scheduler.NodeDown, Reason: "gone"})
	h.ok(NodeSecretResetType, &NodeSecretResetRequest{ID: "n1"})
	if n, _ := h.f.State().Node("n1"); len(n.SecretHash) != 0 {
		t.Fatalf("secret hash kept: %x", n.SecretHash)
	}
	if epoch := registerWithSecret(h, "n1", hashOf("fresh")); epoch != uint64(2) {
		t.Fatalf("registration after the reset: %v", epoch)
	}
	if n, _ := h.f.State().Node("n1"); !bytes.Equal(n.SecretHash, hashOf("fresh")) || n.Status != scheduler.NodeReady {
		t.Fatalf("after the reset and a new registration: %+v", n)
	}
}

func TestSnapshotKeepsWorkloadKeysAndNodeSecrets(t *testing.T) {
	h := newHarness(t)
	h.ok(WorkloadKeyType, &WorkloadKeyRequest{Secret: secret(1), IfNone: true, RetainRetired: day, Now: 1})
	h.ok(WorkloadKeyType, &WorkloadKeyRequest{Secret: secret(2), RetainRetired: day, Now: 2})
	registerWithSecret(h, "n1", hashOf("s"))
	data := persist(t, h.f)
	g := New(nil)
	if err := g.Restore(io.NopCloser(bytes.NewReader(data))); err != nil {
		t.Fatal(err)
	}
	checkInvariants(t, g.State())
	if !reflect.DeepEqual(h.f.State().WorkloadKeys(), g.State().WorkloadKeys()) || !reflect.DeepEqual(h.f.State().Nodes(), g.State().Nodes()) {
		t.Fatalf("restored keys %+v and nodes differ", g.State().WorkloadKeys())
	}
	if !bytes.Equal(persist(t, g), data) {
		t.Fatalf("snapshot of the restored state differs")
	}
}
