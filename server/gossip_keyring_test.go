package server

import (
	"encoding/json"
	"errors"
	"os"
	"testing"
	"time"

	"github.com/hashicorp/serf/serf"
	"github.com/weft-sched/weft/internal/gossip"
	"github.com/weft-sched/weft/internal/testutil"
	wrpc "github.com/weft-sched/weft/rpc"
)

func gossipKey(t *testing.T) string {
	t.Helper()
	k, err := gossip.GenerateKey()
	if err != nil {
		t.Fatal(err)
	}
	return k
}

// aliveMembers is the set of members s's gossip sees alive.
func aliveMembers(s *Server) map[string]bool {
	out := map[string]bool{}
	for _, m := range s.serf.Members() {
		if m.Status == serf.StatusAlive {
			out[m.Name] = true
		}
	}
	return out
}

// keyringFile reads a server's keyring file.
func keyringFile(t *testing.T, s *Server) []string {
	t.Helper()
	raw, err := os.ReadFile(gossip.KeyringFile(s.config.DataDir))
	if err != nil {
		t.Fatal(err)
	}
	var keys []string
	if err := json.Unmarshal(raw, &keys); err != nil {
		t.Fatal(err)
	}
	return keys
}

// TestGossipKeyKeepsOutMembersWithoutIt is the attack with a gossip
// key set: a process that announces itself as a server cannot join the
// pool, so it never becomes a Raft voter, unless it holds the key.
func TestGossipKeyKeepsOutMembersWithoutIt(t *testing.T) {
	key := gossipKey(t)
	c := newTestCluster(t)
	c.encrypt = map[string]string{"s1": key, "wrong": gossipKey(t), "good": key}
	s1 := c.start("s1", 1)
	c.waitForLeader()

	c.start("nokey", 0, s1.SerfAddr())
	testutil.WaitFor(t, 10*time.Second, func() bool { return c.logs.Contains("unencrypted gossip stream refused") })
	c.start("wrong", 0, s1.SerfAddr())
	testutil.WaitFor(t, 10*time.Second, func() bool { return c.logs.Contains("no installed keys could decrypt the message") })
	if got := aliveMembers(s1); len(got) != 1 {
		t.Fatalf("s1 sees %v; want only itself", got)
	}
	c.waitForVoters("s1")

	// A server with the key joins and becomes a voter; the others still
	// do not, though they keep trying.
	c.start("good", 0, s1.SerfAddr())
	c.waitForVoters("s1", "good")
	if got := aliveMembers(s1); len(got) != 2 || !got["good"] {
		t.Fatalf("s1 sees %v; want s1 and good", got)
	}
	if got := aliveMembers(c.servers["nokey"]); len(got) != 1 {
		t.Fatalf("the keyless server sees %v", got)
	}
}

func keyring(t *testing.T, c *testCluster, s *Server, method, key string) wrpc.KeyringResponse {
	t.Helper()
	var resp wrpc.KeyringResponse
	if err := c.call(s, method, &wrpc.KeyringRequest{Key: key}, &resp); err != nil {
		t.Fatalf("%s: %v", method, err)
	}
	if !resp.Complete() {
		t.Fatalf("%s: not every member answered or some failed: %+v", method, resp)
	}
	return resp
}

// keysHeld maps each key a list answer names to how many members hold it
// and how many use it as primary.
func keysHeld(resp wrpc.KeyringResponse) map[string][2]int {
	out := map[string][2]int{}
	for _, k := range resp.Keys {
		out[k.Key] = [2]int{k.Members, k.PrimaryMembers}
	}
	return out
}

// TestGossipKeyRotation rotates the key of a three-server pool end to end:
// install the new key, make it primary, remove the old one; every member
// follows, keeps talking, and a member restarted afterwards rejoins with the
// new key from its keyring file although it was first started with the old.
func TestGossipKeyRotation(t *testing.T) {
	oldKey, newKey := gossipKey(t), gossipKey(t)
	c := newTestCluster(t)
	c.encrypt = map[string]string{"s1": oldKey, "s2": oldKey, "s3": oldKey, "late": newKey, "stale": oldKey}
	s1 := c.start("s1", 3)
	c.start("s2", 3, s1.SerfAddr())
	c.start("s3", 3, s1.SerfAddr())
	c.waitForLeader()
	c.waitForVoters("s1", "s2", "s3")
	f := c.follower() // any server answers; no leader is needed

	if got := keysHeld(keyring(t, c, f, "Operator.KeyringList", "")); len(got) != 1 || got[oldKey] != [2]int{3, 3} {
		t.Fatalf("keys before rotation: %v", got)
	}
	keyring(t, c, f, "Operator.KeyringInstall", newKey)
	if got := keysHeld(keyring(t, c, f, "Operator.KeyringList", "")); len(got) != 2 || got[oldKey] != [2]int{3, 3} || got[newKey] != [2]int{3, 0} {
		t.Fatalf("keys after install: %v", got)
	}

	var resp wrpc.KeyringResponse
	err := c.call(f, "Operator.KeyringRemove", &wrpc.KeyringRequest{Key: oldKey}, &resp)
	if !errors.Is(err, wrpc.ErrConflict) {
		t.Fatalf("removing the primary key: %v, want a conflict", err)
	}

	keyring(t, c, f, "Operator.KeyringUse", newKey)
	keyring(t, c, f, "Operator.KeyringRemove", oldKey)
	if got := keysHeld(keyring(t, c, f, "Operator.KeyringList", "")); len(got) != 1 || got[newKey] != [2]int{3, 3} {
		t.Fatalf("keys after rotation: %v", got)
	}
	for id, s := range c.servers {
		if keys := keyringFile(t, s); len(keys) != 1 || keys[0] != newKey {
			t.Fatalf("%s's keyring file holds %d keys after rotation; want only the new one", id, len(keys))
		}
	}

	// The members still talk: a server with only the new key joins, one
	// with only the old key no longer can.
	c.start("late", 0, s1.SerfAddr())
	c.waitForVoters("s1", "s2", "s3", "late")
	c.start("stale", 0, s1.SerfAddr())
	testutil.WaitFor(t, 10*time.Second, func() bool { return c.logs.Contains("no installed keys could decrypt the message") })
	if aliveMembers(s1)["stale"] {
		t.Fatal("a server with only the removed key joined")
	}
	c.stop("stale")

	// s3 restarts with -encrypt still the old key: its keyring file wins.
	c.stop("s3")
	s3 := c.start("s3", 3, s1.SerfAddr())
	testutil.WaitFor(t, 15*time.Second, func() bool {
		return aliveMembers(s1)["s3"] && aliveMembers(s3)["s1"] && len(aliveMembers(s3)) == 4
	})
	if !c.logs.Contains("wins over -encrypt") {
		t.Fatal("s3 did not say its keyring file won over -encrypt")
	}
	c.waitForVoters("s1", "s2", "s3", "late")
}

func TestKeyringRequests(t *testing.T) {
	c := newTestCluster(t)
	c.encrypt = map[string]string{"enc": gossipKey(t)}
	plain := c.start("plain", 1)
	enc := c.start("enc", 1)

	var resp wrpc.KeyringResponse
	if err := c.call(plain, "Operator.KeyringList", &wrpc.KeyringRequest{}, &resp); !errors.Is(err, wrpc.ErrConflict) {
		t.Fatalf("listing keys without gossip encryption: %v, want a conflict", err)
	}
	for _, method := range []string{"Operator.KeyringInstall", "Operator.KeyringUse", "Operator.KeyringRemove"} {
		for _, bad := range []string{"", "c2hvcnQ=", "!!"} {
			err := c.call(enc, method, &wrpc.KeyringRequest{Key: bad}, &resp)
			if !errors.Is(err, wrpc.ErrBadRequest) {
				t.Fatalf("%s with key %q: %v, want a bad request", method, bad, err)
			}
		}
	}
	// Using a key no member holds fails on every member; the answer says so.
	if err := c.call(enc, "Operator.KeyringUse", &wrpc.KeyringRequest{Key: gossipKey(t)}, &resp); err != nil {
		t.Fatal(err)
	}
	if resp.Complete() || resp.Failed != 1 || resp.Messages["enc"] == "" {
		t.Fatalf("using an unknown key: %+v; want enc's failure", resp)
	}
}

// TestAGossipKeyHolderIsShutOutByARotation: a holder of the pool's gossip
// key joins as a serf member of its own (no certificate, no weft). Its key
// queries change no member's keyring, and the servers' keyring methods
// never give it a key: they reach members over RPC, where it is not one.
// So rotating the key (install, use, remove through any server) shuts it
// out: the members find it failed, and it never learns the new key.
func TestAGossipKeyHolderIsShutOutByARotation(t *testing.T) {
	oldKey, newKey, planted := gossipKey(t), gossipKey(t), gossipKey(t)
	c := newTestCluster(t)
	c.encrypt = map[string]string{"s1": oldKey, "s2": oldKey, "s3": oldKey}
	s1 := c.start("s1", 3)
	c.start("s2", 3, s1.SerfAddr())
	c.start("s3", 3, s1.SerfAddr())
	c.waitForLeader()
	c.waitForVoters("s1", "s2", "s3")
	rogue := testutil.RogueGossipMember(t, "rogue", oldKey, map[string]string{TagRole: RoleAgent, TagID: "rogue", TagRPCAddr: "127.0.0.1:1"}, s1.SerfAddr())
	testutil.WaitFor(t, 10*time.Second, func() bool { return aliveMembers(s1)["rogue"] })

	if r, _ := rogue.KeyManager().InstallKey(planted); r == nil || r.NumResp != 1 {
		t.Fatalf("the rogue's install was answered by %+v; want by itself alone", r)
	}
	f := c.follower()
	var list wrpc.KeyringResponse
	if err := c.call(f, "Operator.KeyringList", &wrpc.KeyringRequest{}, &list); err != nil {
		t.Fatal(err)
	}
	if got := keysHeld(list); len(got) != 1 || got[oldKey] != [2]int{3, 3} || list.Members != 4 || list.Responses != 3 || list.Messages["rogue"] == "" {
		t.Fatalf("keys the servers list: %v, %d of %d members answered, messages %v; want the old key on the three servers and the rogue named unreachable",
			got, list.Responses, list.Members, list.Messages)
	}

	for _, step := range []struct{ method, key string }{
		{"Operator.KeyringInstall", newKey}, {"Operator.KeyringUse", newKey}, {"Operator.KeyringRemove", oldKey},
	} {
		var resp wrpc.KeyringResponse
		if err := c.call(f, step.method, &wrpc.KeyringRequest{Key: step.key}, &resp); err != nil {
			t.Fatalf("%s: %v", step.method, err)
		}
		if resp.Failed != 0 || resp.Responses != 3 {
			t.Fatalf("%s: %+v; want the three servers to apply it", step.method, resp)
		}
	}
	for id, s := range c.servers {
		if keys := keyringFile(t, s); len(keys) != 1 || keys[0] != newKey {
			t.Fatalf("%s's keyring file after the rotation holds %d keys; want only the new one", id, len(keys))
		}
	}
	testutil.WaitFor(t, 60*time.Second, func() bool { return !aliveMembers(s1)["rogue"] })
	if r, _ := rogue.KeyManager().ListKeys(); r == nil || r.Keys[newKey] != 0 {
		t.Fatalf("the rogue's keyring after the rotation: %+v; it must never hold the new key", r)
	}
	if err := c.call(f, "Operator.KeyringList", &wrpc.KeyringRequest{}, &list); err != nil || !list.Complete() || list.Members != 3 {
		t.Fatalf("keys listed once the rogue is out: %+v, %v; want the three servers, complete", list, err)
	}
}
