package main

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"os"
	"strings"
	"testing"

	"github.com/weft-sched/weft/internal/gossip"
	"github.com/weft-sched/weft/rpc"
)

func TestKeygenPrintsA32ByteKey(t *testing.T) {
	var out bytes.Buffer
	old := stdout
	stdout = &out
	defer func() { stdout = old }()
	if code := run([]string{"operator", "keygen"}); code != 0 {
		t.Fatalf("keygen exited %d", code)
	}
	key := strings.TrimSpace(out.String())
	raw, err := base64.StdEncoding.DecodeString(key)
	if err != nil || len(raw) != 32 {
		t.Fatalf("keygen printed %q: %d bytes (%v), want the base64 of 32", key, len(raw), err)
	}
}

func TestKeyringUsage(t *testing.T) {
	var errOut bytes.Buffer
	old := stderr
	stderr = &errOut
	defer func() { stderr = old }()
	key := base64.StdEncoding.EncodeToString(make([]byte, 32))
	for _, args := range [][]string{
		{},                            // no operation
		{"-list", "-install", key},    // two operations
		{"-install", "c2hvcnQ="},      // a 5-byte key, refused before any server is asked
		{"-use", "not base64"},        // not a key
		{"-list", "extra-positional"}, // no positionals
	} {
		errOut.Reset()
		if code := run(append([]string{"operator", "gossip", "keyring"}, args...)); code != 2 {
			t.Errorf("keyring %v exited %d, want 2 (usage): %s", args, code, errOut.String())
		}
		if strings.Contains(errOut.String(), "c2hvcnQ=") {
			t.Errorf("the usage error repeats the key: %s", errOut.String())
		}
	}
}

func TestKeyringIncompleteSaysWhy(t *testing.T) {
	for _, tc := range []struct {
		resp rpc.KeyringResponse
		want string
	}{
		{rpc.KeyringResponse{Members: 3, Responses: 3}, ""},
		{rpc.KeyringResponse{Members: 3, Responses: 3, Failed: 1}, "1 of 3 members failed (see above)"},
		{rpc.KeyringResponse{Members: 3, Responses: 2, Failed: 1}, "1 of 3 members failed (see above) and 1 did not answer"},
		{rpc.KeyringResponse{Members: 3, Responses: 1}, "2 of 3 members did not answer"},
	} {
		err := keyringIncomplete(&tc.resp)
		if tc.want == "" && err != nil || tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)) {
			t.Errorf("%+v: %v, want %q", tc.resp, err, tc.want)
		}
	}
}

func TestKeygenSeedsDataDirsOnce(t *testing.T) {
	a, b := t.TempDir(), t.TempDir()
	code, _, errOut := runCaptured(t, "operator", "keygen", "-data-dir", a, "-data-dir", b)
	if code != 0 {
		t.Fatalf("keygen -data-dir: exit %d: %s", code, errOut)
	}
	ka, errA := os.ReadFile(gossip.KeyringFile(a))
	kb, errB := os.ReadFile(gossip.KeyringFile(b))
	var keys []string
	if errA != nil || errB != nil || string(ka) != string(kb) || json.Unmarshal(ka, &keys) != nil || len(keys) != 1 {
		t.Fatalf("keyrings %q (%v) and %q (%v): want the same one key in both", ka, errA, kb, errB)
	}
	if code, _, errOut := runCaptured(t, "operator", "keygen", "-data-dir", a); code != 1 || !strings.Contains(errOut, "holds a keyring already") {
		t.Fatalf("a second keygen into %s: exit %d, %q; want a refusal", a, code, errOut)
	}
	if again, _ := os.ReadFile(gossip.KeyringFile(a)); string(again) != string(ka) {
		t.Fatal("the refused keygen changed the keyring")
	}
}
