package identity

import (
	"errors"
	"reflect"
	"testing"
)

// FuzzParseToken feeds arbitrary text to Verify: it never panics, accepts
// only tokens whose MAC verifies, and every token it accepts re-signs to
// exactly the same text (one token per set of claims).
func FuzzParseToken(f *testing.F) {
	r := mustKeyring(f, 1, testKey(1, 0x5a))
	valid, _ := r.Sign(containerClaims)
	am := containerClaims
	am.Kind, am.Resources.Extended = KindAM, nil
	amTok, _ := r.Sign(am)
	for _, seed := range []string{valid, amTok, "", "AAAA", valid[:len(valid)/2], valid + "A"} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, token string) {
		c, err := r.Verify(token, 0)
		if err != nil {
			if c != nil {
				t.Fatalf("claims returned with error %v", err)
			}
			if !errors.Is(err, ErrMalformed) && !errors.Is(err, ErrUnknownKey) && !errors.Is(err, ErrBadSignature) && !errors.Is(err, ErrExpired) {
				t.Fatalf("unexpected error %v", err)
			}
			return
		}
		again, err := r.Sign(*c)
		if err != nil || again != token {
			t.Fatalf("accepted %q, which re-signs to %q (%v)", token, again, err)
		}
		// And the body alone decodes to the same claims.
		body, _, err := split(token)
		if err != nil {
			t.Fatal(err)
		}
		d, err := decodeClaims(body)
		if err != nil || !reflect.DeepEqual(d, c) {
			t.Fatalf("body decodes to %+v (%v), Verify gave %+v", d, err, c)
		}
	})
}

// FuzzDecodeClaims feeds arbitrary bodies to the claims decoder (the part
// of parsing before any MAC check): it never panics, and what it accepts
// encodes back to the same bytes.
func FuzzDecodeClaims(f *testing.F) {
	c := containerClaims
	c.KeyID = 4
	body, _ := encodeClaims(&c)
	f.Add(body)
	f.Add([]byte{tokenVersion})
	f.Fuzz(func(t *testing.T, body []byte) {
		c, err := decodeClaims(body)
		if err != nil {
			return
		}
		again, err := encodeClaims(c)
		if err != nil || string(again) != string(body) {
			t.Fatalf("decoded %+v from %x, which encodes to %x (%v)", c, body, again, err)
		}
	})
}
