package identity

import (
	"bytes"
	"errors"
	"reflect"
	"strings"
	"testing"

	"github.com/weft-sched/weft/scheduler"
)

func testKey(id uint32, fill byte) Key {
	return Key{ID: id, Secret: bytes.Repeat([]byte{fill}, KeySize)}
}

func mustKeyring(t testing.TB, active uint32, keys ...Key) *Keyring {
	t.Helper()
	r, err := NewKeyring(keys, active)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

var containerClaims = Claims{
	Kind: KindContainer, AppID: "app-7", Attempt: 2, ContainerID: "c-41-0", NodeID: "n1",
	Resources:     scheduler.Resources{MemoryMB: 512, Vcores: 1, Extended: map[string]int64{"gpu": 1, "fpga": 2}},
	ExecutionType: scheduler.Guaranteed, User: "alice", Expiry: 1_000_000,
}

func TestSignVerifyRoundTrip(t *testing.T) {
	r := mustKeyring(t, 3, testKey(2, 0xaa), testKey(3, 0xbb))
	tok, err := r.Sign(containerClaims)
	if err != nil {
		t.Fatal(err)
	}
	if strings.ContainsAny(tok, "+/=") || len(tok) > MaxTokenLength {
		t.Fatalf("token %q is not compact base64url", tok)
	}
	got, err := r.Verify(tok, 999_999)
	if err != nil {
		t.Fatal(err)
	}
	want := containerClaims
	want.KeyID = 3
	if !reflect.DeepEqual(*got, want) {
		t.Fatalf("claims %+v, want %+v", *got, want)
	}
	// Equal claims sign to the same token: the encoding is canonical.
	again, _ := r.Sign(containerClaims)
	if again != tok {
		t.Fatalf("the same claims signed twice differ")
	}
}

// Zero extended resources are not part of the claims: a vector with gpu=0
// is the vector without gpu.
func TestZeroExtendedResourcesAreCanonical(t *testing.T) {
	r := mustKeyring(t, 1, testKey(1, 1))
	a, b := containerClaims, containerClaims
	a.Resources = scheduler.Resources{MemoryMB: 1, Vcores: 1, Extended: map[string]int64{"gpu": 0}}
	b.Resources = scheduler.Resources{MemoryMB: 1, Vcores: 1}
	ta, _ := r.Sign(a)
	tb, _ := r.Sign(b)
	if ta != tb {
		t.Fatalf("gpu=0 and no gpu sign differently")
	}
	if !SameResources(a.Resources, b.Resources) || SameResources(a.Resources, containerClaims.Resources) {
		t.Fatalf("SameResources disagrees with the encoding")
	}
}

func TestVerifyRefuses(t *testing.T) {
	r := mustKeyring(t, 1, testKey(1, 0x11))
	other := mustKeyring(t, 1, testKey(1, 0x22)) // same ID, another secret
	unknown := mustKeyring(t, 9, testKey(9, 0x11))
	tok, _ := r.Sign(containerClaims)
	forged, _ := other.Sign(containerClaims)
	fromUnknown, _ := unknown.Sign(containerClaims)

	// Flip one bit of the body: the claims change, the signature no
	// longer fits.
	p, err := parseToken(tok)
	if err != nil {
		t.Fatal(err)
	}
	body := append([]byte(nil), p.body...)
	body[len(body)-2] ^= 1 // the last extended value
	tampered := tokenEncoding.EncodeToString(encodeToken(body, 0, 1, nil, p.sig))
	// Claim a batch of two for a token signed alone.
	widened := tokenEncoding.EncodeToString(encodeToken(p.body, 0, 2, []hash{{}}, p.sig))

	for _, tc := range []struct {
		name  string
		token string
		now   int64
		want  error
	}{
		{"empty", "", 0, ErrMalformed},
		{"not base64", "!!!!", 0, ErrMalformed},
		{"too long", strings.Repeat("A", MaxTokenLength+1), 0, ErrMalformed},
		{"truncated", tok[:len(tok)-4], 0, ErrMalformed},
		{"line break inside", tok[:10] + "\r\n" + tok[10:], 0, ErrMalformed}, // the base64 decoder would skip it
		{"padded", tok + "==", 0, ErrMalformed},
		{"forged with another key", forged, 0, ErrBadSignature},
		{"tampered body", tampered, 0, ErrBadSignature},
		{"batch it was not signed in", widened, 0, ErrBadSignature},
		{"unknown key", fromUnknown, 0, ErrUnknownKey},
		{"expired", tok, containerClaims.Expiry, ErrExpired},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, err := r.Verify(tc.token, tc.now)
			if !errors.Is(err, tc.want) || c != nil {
				t.Fatalf("Verify: %v, %+v; want %v", err, c, tc.want)
			}
		})
	}
	var nilRing *Keyring
	if _, err := nilRing.Verify(tok, 0); !errors.Is(err, ErrUnknownKey) {
		t.Fatalf("a nil keyring verified: %v", err)
	}
	if _, err := nilRing.Sign(containerClaims); !errors.Is(err, ErrNoSigningKey) {
		t.Fatalf("a nil keyring signed: %v", err)
	}
}

// Agents hold only the public keys: they verify what the servers signed,
// and nothing they hold signs.
func TestPublicKeysVerifyButCannotSign(t *testing.T) {
	r := mustKeyring(t, 2, testKey(1, 1), testKey(2, 2))
	v, err := NewVerifier(r.PublicKeys())
	if err != nil {
		t.Fatal(err)
	}
	tok, _ := r.Sign(containerClaims)
	if c, err := v.Verify(tok, 0); err != nil || c.KeyID != 2 {
		t.Fatalf("a verifier of the public keys: %v, %+v", err, c)
	}
	for _, k := range r.PublicKeys() {
		for _, s := range []Key{testKey(1, 1), testKey(2, 2)} {
			if bytes.Equal(k.Key, s.Secret) {
				t.Fatalf("public key %d is a secret", k.ID)
			}
		}
	}
	if v.NewestID() != 2 || v.Len() != 2 || !v.Has(1) || v.Has(3) {
		t.Fatalf("verifier: newest %d, %d keys", v.NewestID(), v.Len())
	}
}

// Two encodings of the same claims cannot both verify: a body that is not
// canonical is malformed even with a valid signature over it.
func TestNonCanonicalBodyIsMalformed(t *testing.T) {
	key := testKey(1, 7)
	r := mustKeyring(t, 1, key)
	c := containerClaims
	c.KeyID = 1
	body, err := encodeClaims(&c)
	if err != nil {
		t.Fatal(err)
	}
	sign := func(body []byte) string {
		toks, err := signBodies(r.private[1], [][]byte{body})
		if err != nil {
			t.Fatal(err)
		}
		return toks[0]
	}
	if _, err := r.Verify(sign(body), 0); err != nil {
		t.Fatalf("canonical body: %v", err)
	}
	// The same attempt (2) as a two-byte varint: 0x82 0x00.
	idx := bytes.Index(body, []byte{0x02, byte(len("app-7"))})
	if idx < 0 {
		t.Fatal("attempt not found in the body")
	}
	long := append(append(append([]byte{}, body[:idx]...), 0x82, 0x00), body[idx+1:]...)
	if _, err := r.Verify(sign(long), 0); !errors.Is(err, ErrMalformed) {
		t.Fatalf("non-minimal varint: %v", err)
	}
	// Extended resources out of name order.
	swapped := bytes.Replace(body, []byte("\x04fpga\x04\x03gpu\x02"), []byte("\x03gpu\x02\x04fpga\x04"), 1)
	if bytes.Equal(swapped, body) {
		t.Fatal("extended resources not found in the body")
	}
	if _, err := r.Verify(sign(swapped), 0); !errors.Is(err, ErrMalformed) {
		t.Fatalf("unsorted extended resources: %v", err)
	}
	// A proof whose index is not a minimal varint.
	p, _ := parseToken(sign(body))
	raw := appendBytes(nil, p.body)
	raw = append(raw, 0x80, 0x00, 0x01)
	raw = append(raw, p.sig...)
	if _, err := r.Verify(tokenEncoding.EncodeToString(raw), 0); !errors.Is(err, ErrMalformed) {
		t.Fatalf("non-minimal index: %v", err)
	}
}

func TestSignRefusesInvalidClaims(t *testing.T) {
	r := mustKeyring(t, 1, testKey(1, 1))
	for name, mutate := range map[string]func(*Claims){
		"kind":           func(c *Claims) { c.Kind = 9 },
		"execution type": func(c *Claims) { c.ExecutionType = "" },
		"attempt":        func(c *Claims) { c.Attempt = -1 },
		"expiry":         func(c *Claims) { c.Expiry = 0 },
		"too large":      func(c *Claims) { c.ContainerID = strings.Repeat("x", MaxTokenLength) },
	} {
		c := containerClaims
		mutate(&c)
		if tok, err := r.Sign(c); err == nil {
			t.Fatalf("%s: signed %q", name, tok)
		}
	}
	noActive := mustKeyring(t, 0, testKey(1, 1))
	if _, err := noActive.Sign(containerClaims); !errors.Is(err, ErrNoSigningKey) {
		t.Fatalf("signed without an active key: %v", err)
	}
}

// Rotation: a new active key signs; tokens of the retired one verify as
// long as it is kept, and not once it is dropped.
func TestKeyRotation(t *testing.T) {
	old := mustKeyring(t, 1, testKey(1, 1))
	rotated := mustKeyring(t, 2, testKey(1, 1), testKey(2, 2))
	pruned := mustKeyring(t, 2, testKey(2, 2))
	before, _ := old.Sign(containerClaims)
	after, _ := rotated.Sign(containerClaims)
	if c, err := rotated.Verify(before, 0); err != nil || c.KeyID != 1 {
		t.Fatalf("token of the retired key: %v, %+v", err, c)
	}
	if c, err := rotated.Verify(after, 0); err != nil || c.KeyID != 2 {
		t.Fatalf("token of the new key: %v, %+v", err, c)
	}
	if _, err := old.Verify(after, 0); !errors.Is(err, ErrUnknownKey) {
		t.Fatalf("a verifier that has not learned the new key: %v", err)
	}
	if _, err := pruned.Verify(before, 0); !errors.Is(err, ErrUnknownKey) {
		t.Fatalf("token of a dropped key: %v", err)
	}
}

func TestNewKeyringValidates(t *testing.T) {
	for name, tc := range map[string]struct {
		keys   []Key
		active uint32
	}{
		"short secret":  {[]Key{{ID: 1, Secret: []byte("short")}}, 1},
		"zero id":       {[]Key{testKey(0, 1)}, 0},
		"duplicate":     {[]Key{testKey(1, 1), testKey(1, 2)}, 1},
		"active absent": {[]Key{testKey(1, 1)}, 2},
	} {
		if _, err := NewKeyring(tc.keys, tc.active); err == nil {
			t.Fatalf("%s: accepted", name)
		}
	}
	// The keyring keeps its own copy of the keys.
	k := testKey(1, 1)
	r := mustKeyring(t, 1, k)
	tok, _ := r.Sign(containerClaims)
	k.Secret[0] ^= 0xff
	if _, err := r.Verify(tok, 0); err != nil {
		t.Fatalf("changing the caller's slice changed the keyring: %v", err)
	}
	pub := r.PublicKeys()
	v, _ := NewVerifier(pub)
	pub[0].Key[0] ^= 0xff
	if _, err := v.Verify(tok, 0); err != nil {
		t.Fatalf("changing the caller's slice changed the verifier: %v", err)
	}
	for name, keys := range map[string][]PublicKey{
		"short key": {{ID: 1, Key: []byte("short")}},
		"zero id":   {{ID: 0, Key: make([]byte, 32)}},
		"duplicate": {{ID: 1, Key: make([]byte, 32)}, {ID: 1, Key: make([]byte, 32)}},
	} {
		if _, err := NewVerifier(keys); err == nil {
			t.Fatalf("verifier with %s: accepted", name)
		}
	}
}

func TestNodeSecrets(t *testing.T) {
	s, err := NewNodeSecret()
	if err != nil {
		t.Fatal(err)
	}
	if err := ValidateNodeSecret(s); err != nil {
		t.Fatal(err)
	}
	other, _ := NewNodeSecret()
	if s == other {
		t.Fatal("two node secrets are equal")
	}
	h := HashNodeSecret(s)
	if !NodeSecretMatches(h, s) || NodeSecretMatches(h, other) || NodeSecretMatches(nil, s) {
		t.Fatal("NodeSecretMatches is wrong")
	}
	for _, bad := range []string{"", "abc", strings.ToUpper(s), s[:63] + "g", s + "0"} {
		if err := ValidateNodeSecret(bad); err == nil || strings.Contains(err.Error(), bad) && bad != "" {
			t.Fatalf("ValidateNodeSecret(%q) = %v", bad, err)
		}
	}
}
