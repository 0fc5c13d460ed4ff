package e2e

import (
	"encoding/json"
	"fmt"
	"net"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/weft-sched/weft/internal/testutil"
)

// keyringAnswer is `weft operator gossip keyring -json`'s output.
type keyringAnswer struct {
	Keys []struct {
		Key            string `json:"key"`
		Members        int    `json:"members"`
		PrimaryMembers int    `json:"primary_members"`
	} `json:"keys"`
	Members   int               `json:"members"`
	Responses int               `json:"responses"`
	Failed    int               `json:"failed"`
	Messages  map[string]string `json:"messages"`
}

// keyring runs `weft operator gossip keyring` with args against addr and
// returns its answer and exit code (1 when a member did not answer).
func keyring(t *testing.T, addr string, args ...string) (keyringAnswer, int, string) {
	t.Helper()
	out, errOut, code := cli(t, append([]string{"operator", "gossip", "keyring", "-json", "-address", addr}, args...)...)
	var a keyringAnswer
	if err := json.Unmarshal([]byte(out), &a); err != nil {
		t.Fatalf("keyring %v: exit %d, %s: bad JSON %q: %v", args, code, errOut, out, err)
	}
	return a, code, errOut
}

// held maps each key to how many members hold it and use it as primary.
func (a keyringAnswer) held() map[string][2]int {
	out := map[string][2]int{}
	for _, k := range a.Keys {
		out[k.Key] = [2]int{k.Members, k.PrimaryMembers}
	}
	return out
}

// TestGossipKeyringOnASecureCluster: on a secure cluster of three servers
// and an agent, the gossip keyring commands need operator:write; a holder
// of the gossip key with no certificate, in the pool as a serf member of
// its own, can neither list nor change any member's keys (serf's key
// queries are refused everywhere) and is told no new key; and rotating the
// key with `weft operator gossip keyring -install/-use/-remove` through one
// server reaches every weft member over mutual TLS and shuts the key's
// holder out.
func TestGossipKeyringOnASecureCluster(t *testing.T) {
	w := startWorldOn(t, startQuorum(t), 1, nil)
	addr := w.rpcAddr("s2")
	oldKey := w.sec.gossipKey
	reader := lowPrivilegeToken(t, w.any())
	if _, errOut, code := cli(t, "operator", "gossip", "keyring", "-list", "-address", addr, "-token", reader); code == 0 || !strings.Contains(errOut, "lacks operator:write") {
		t.Fatalf("listing keys with a token without operator:write: exit %d, %s", code, errOut)
	}
	// The keyring commands ask the members s2 knows of: wait until its
	// gossip has heard of every one (the agent joined through s1).
	waitForMembers(t, addr, "s1", "s2", "s3", "a1")
	if list, code, errOut := keyring(t, addr, "-list"); code != 0 || list.held()[oldKey] != [2]int{4, 4} {
		t.Fatalf("keys before: exit %d (%s), %+v; want the key on the three servers and the agent", code, errOut, list)
	}

	join := net.JoinHostPort(w.ips[0], strconv.Itoa(w.serfPort))
	rogue := testutil.RogueGossipMember(t, "rogue", oldKey, map[string]string{"role": "agent", "id": "rogue", "rpc_addr": "127.0.0.1:1"}, join)
	waitForMembers(t, addr, "s1", "s2", "s3", "a1", "rogue")
	planted, newKey := keygen(t), keygen(t)
	if r, _ := rogue.KeyManager().InstallKey(planted); r == nil || r.NumResp != 1 {
		t.Fatalf("the key holder's install was answered by %+v; want by itself alone", r)
	}
	if r, _ := rogue.KeyManager().ListKeys(); r == nil || r.NumResp != 1 {
		t.Fatalf("the key holder's list was answered by %+v; want by itself alone", r)
	}
	list, code, _ := keyring(t, addr, "-list")
	if code != 1 || list.Members != 5 || list.Responses != 4 || list.Messages["rogue"] == "" || len(list.held()) != 1 {
		t.Fatalf("keys with the key holder in the pool: exit %d, %+v; want the old key on the four weft members and the rogue named", code, list)
	}

	for _, step := range [][]string{{"-install", newKey}, {"-use", newKey}, {"-remove", oldKey}} {
		a, _, errOut := keyring(t, addr, step...)
		if a.Failed != 0 || a.Responses < 4 {
			t.Fatalf("keyring %v: %+v (%s); want every weft member to apply it", step, a, errOut)
		}
	}
	waitFor(t, 90*time.Second, "the pool to drop the key holder and every member to hold only the new key", func() error {
		list, code, errOut := keyring(t, addr, "-list")
		if code != 0 || list.Members != 4 || list.held()[newKey] != [2]int{4, 4} || len(list.held()) != 1 {
			return fmt.Errorf("exit %d (%s): %+v", code, errOut, list)
		}
		return nil
	})
	if r, _ := rogue.KeyManager().ListKeys(); r == nil || r.Keys[newKey] != 0 {
		t.Fatalf("the key holder's keyring after the rotation: %+v; it must never hold the new key", r)
	}
	// The cluster still gossips and works with the new key.
	waitFor(t, 30*time.Second, "every weft member alive", func() error {
		var ms []member
		if err := cliJSON(t, &ms, "members", "-address", addr); err != nil {
			return err
		}
		alive := 0
		for _, m := range ms {
			if m.Status == "alive" {
				alive++
			}
		}
		if alive != 4 {
			return fmt.Errorf("members %+v", ms)
		}
		return nil
	})
	for _, n := range w.nodes("s1") {
		if n.Status != "READY" {
			t.Fatalf("node %s is %s after the rotation", n.ID, n.Status)
		}
	}
}

// waitForMembers waits until `weft members` against addr lists each of
// names alive.
func waitForMembers(t *testing.T, addr string, names ...string) {
	t.Helper()
	waitFor(t, 30*time.Second, fmt.Sprintf("%s to know %v alive", addr, names), func() error {
		var ms []member
		if err := cliJSON(t, &ms, "members", "-address", addr); err != nil {
			return err
		}
		alive := map[string]bool{}
		for _, m := range ms {
			alive[m.Name] = m.Status == "alive"
		}
		for _, n := range names {
			if !alive[n] {
				return fmt.Errorf("%s is not alive among %+v", n, ms)
			}
		}
		return nil
	})
}

// keygen makes a gossip key with `weft operator keygen`.
func keygen(t *testing.T) string {
	t.Helper()
	out, errOut, code := cli(t, "operator", "keygen")
	if code != 0 {
		t.Fatalf("operator keygen: %s", errOut)
	}
	return strings.TrimSpace(out)
}
