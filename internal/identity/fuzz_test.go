package identity

import (
	"errors"
	"reflect"
	"testing"
)

// FuzzParseToken feeds arbitrary text to Verify: it never panics, accepts
// only tokens whose signature verifies, and every token it accepts is
// made of a body that decodes to the claims it returned and a proof that
// re-encodes to the same text.
func FuzzParseToken(f *testing.F) {
	r := mustKeyring(f, 1, testKey(1, 0x5a))
	valid, _ := r.Sign(containerClaims)
	am := containerClaims
	am.Kind, am.Resources.Extended = KindAM, nil
	amTok, _ := r.Sign(am)
	batch, _ := r.SignBatch([]Claims{containerClaims, am, containerClaims})
	s, _ := nodeSigner(f, r, "n1", 1<<40)
	minted, _ := s.SignBatch([]Claims{oppClaims, oppClaims, oppClaims}, 0)
	for _, seed := range []string{valid, amTok, batch[2], minted[1], "", "AAAA", valid[:len(valid)/2], valid + "A"} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, token string) {
		c, err := r.Verify(token, 0)
		if err != nil {
			if c != nil {
				t.Fatalf("claims returned with error %v", err)
			}
			if !errors.Is(err, ErrMalformed) && !errors.Is(err, ErrUnknownKey) && !errors.Is(err, ErrBadSignature) &&
				!errors.Is(err, ErrExpired) && !errors.Is(err, ErrNotAllowed) {
				t.Fatalf("unexpected error %v", err)
			}
			return
		}
		p, err := parseToken(token)
		if err != nil {
			t.Fatal(err)
		}
		if tokenEncoding.EncodeToString(encodeToken(p.body, p.index, p.count, p.path, p.sig)) != token {
			t.Fatalf("accepted %q, which is not its canonical text", token)
		}
		d, err := decodeClaims(p.body)
		if err != nil || !reflect.DeepEqual(d, c) {
			t.Fatalf("body decodes to %+v (%v), Verify gave %+v", d, err, c)
		}
		if p.count == 1 && c.Minter == "" {
			// A token signed alone is the one text of its claims.
			again, err := r.Sign(*c)
			if err != nil || again != token {
				t.Fatalf("accepted %q, which re-signs to %q (%v)", token, again, err)
			}
		}
	})
}

// FuzzDecodeClaims feeds arbitrary bodies to the claims decoder (the part
// of parsing before any signature check): it never panics, and what it
// accepts encodes back to the same bytes.
func FuzzDecodeClaims(f *testing.F) {
	c := containerClaims
	c.KeyID = 4
	body, _ := encodeClaims(&c)
	f.Add(body)
	f.Add([]byte{tokenVersion})
	r := mustKeyring(f, 1, testKey(1, 0x5a))
	s, _ := nodeSigner(f, r, "n1", 1<<40)
	minted, _ := s.SignBatch([]Claims{oppClaims}, 0)
	if p, err := parseToken(minted[0]); err == nil {
		f.Add(p.body)
	}
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
