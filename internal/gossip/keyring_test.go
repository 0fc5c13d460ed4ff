package gossip

import (
	"encoding/json"
	"os"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/serf/serf"
	"github.com/weft-sched/weft/internal/testutil"
)

// keyedMember starts a weft member with key and returns it with its
// keyring.
func keyedMember(t *testing.T, id, key string) (*serf.Serf, *Keyring, *testutil.LogSink) {
	t.Helper()
	logger, logs := testutil.Logger(t, hclog.Info)
	s, k, err := Create(Config{NodeID: id, BindAddr: "127.0.0.1", DataDir: t.TempDir(), Fast: true, Encrypt: key, Logger: logger.Named(id)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Shutdown() })
	return s, k, logs
}

func keysOf(t *testing.T, k *Keyring) []string {
	t.Helper()
	keys, err := k.Apply(KeyringList, "")
	if err != nil {
		t.Fatal(err)
	}
	return keys
}

func fileKeys(t *testing.T, k *Keyring) []string {
	t.Helper()
	raw, err := os.ReadFile(k.file)
	if err != nil {
		t.Fatal(err)
	}
	var keys []string
	if err := json.Unmarshal(raw, &keys); err != nil {
		t.Fatal(err)
	}
	return keys
}

func sameKeys(a, b []string) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// A holder of the gossip key, in the pool as a serf member of its own, has
// serf broadcast every key query there is: weft members refuse each one
// before serf sees it, so no keyring changes, and a list reaches nobody
// but the rogue. Keyring.Apply, what the servers call over mutual TLS,
// changes a member's keyring and its file.
func TestKeyQueriesOfAKeyHolderChangeNoKeyring(t *testing.T) {
	key, second, planted := newKey(t), newKey(t), newKey(t)
	a, ka, logs := keyedMember(t, "a", key)
	b, kb, _ := keyedMember(t, "b", key)
	if _, err := b.Join([]string{Addr(a)}, true); err != nil {
		t.Fatal(err)
	}
	// Mid-rotation: both hold a second key, not yet primary.
	for _, k := range []*Keyring{ka, kb} {
		if _, err := k.Apply(KeyringInstall, second); err != nil {
			t.Fatal(err)
		}
	}
	want := []string{key, second}
	rogue := testutil.RogueGossipMember(t, "rogue", key, nil, Addr(a))
	testutil.WaitFor(t, 10*time.Second, func() bool { return len(aliveNames(a)) == 3 && len(aliveNames(b)) == 3 })

	km := rogue.KeyManager()
	list, _ := km.ListKeys()
	if list == nil || list.NumResp != 1 || list.NumNodes != 3 {
		t.Fatalf("the rogue's key list was answered by %+v; want by itself alone", list)
	}
	if r, _ := km.InstallKey(planted); r == nil || r.NumResp != 1 {
		t.Fatalf("the rogue's install was answered by %+v; want by itself alone", r)
	}
	if r, _ := km.UseKey(second); r == nil || r.NumResp > 1 {
		t.Fatalf("the rogue's use of the second key was answered by %+v; want by itself at most", r)
	}
	if r, _ := km.RemoveKey(second); r == nil || r.NumResp > 1 {
		t.Fatalf("the rogue's removal of the second key was answered by %+v; want by itself at most", r)
	}
	for name, k := range map[string]*Keyring{"a": ka, "b": kb} {
		if got := keysOf(t, k); !sameKeys(got, want) {
			t.Fatalf("%s holds %v after the rogue's key queries; want %v", name, got, want)
		}
		if got := fileKeys(t, k); !sameKeys(got, want) {
			t.Fatalf("%s's keyring file holds %v; want %v", name, got, want)
		}
	}
	if !logs.Contains("serf key query") {
		t.Fatal("a did not log refusing the key queries")
	}

	// What the servers do on each member over mutual TLS.
	if _, err := ka.Apply(KeyringUse, second); err != nil {
		t.Fatal(err)
	}
	if _, err := ka.Apply(KeyringRemove, key); err != nil {
		t.Fatal(err)
	}
	if got := fileKeys(t, ka); !sameKeys(got, []string{second}) {
		t.Fatalf("a's keyring file after use and remove holds %v; want only the second key", got)
	}
	if _, err := ka.Apply(KeyringRemove, second); err == nil {
		t.Fatal("removing a's primary key passed")
	}
	if _, err := ka.Apply(KeyringUse, planted); err == nil {
		t.Fatal("using a key a does not hold passed")
	}
}
