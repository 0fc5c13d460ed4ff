package identity

import (
	"errors"
	"fmt"
	"testing"
)

// Every token of a batch verifies, whatever the batch's size (a full
// tree, and the lopsided ones RFC 6962 builds for other sizes), with one
// signature among them; a token moved to another leaf does not.
func TestBatchTokensVerify(t *testing.T) {
	r := mustKeyring(t, 1, testKey(1, 3))
	for _, n := range []int{1, 2, 3, 5, 8, 13, 64, 100, MaxBatch, MaxBatch + 1, 3*MaxBatch - 7} {
		t.Run(fmt.Sprint(n), func(t *testing.T) {
			cs := make([]Claims, n)
			for i := range cs {
				cs[i] = containerClaims
				cs[i].ContainerID = fmt.Sprintf("c-%d-0", i)
			}
			toks, err := r.SignBatch(cs)
			if err != nil {
				t.Fatal(err)
			}
			sigs := map[string]bool{}
			for i, tok := range toks {
				c, err := r.Verify(tok, 0)
				if err != nil {
					t.Fatalf("token %d of %d: %v", i, n, err)
				}
				if c.ContainerID != cs[i].ContainerID {
					t.Fatalf("token %d is %s's", i, c.ContainerID)
				}
				if len(tok) > MaxTokenLength {
					t.Fatalf("token %d is %d characters", i, len(tok))
				}
				p, _ := parseToken(tok)
				sigs[string(p.sig)] = true
			}
			if want := (n + MaxBatch - 1) / MaxBatch; len(sigs) != want {
				t.Fatalf("%d tokens carry %d signatures, want %d", n, len(sigs), want)
			}
			if n < 2 {
				return
			}
			// Token 0's body with token 1's place in the tree.
			p0, _ := parseToken(toks[0])
			p1, _ := parseToken(toks[1])
			moved := tokenEncoding.EncodeToString(encodeToken(p0.body, p1.index, p1.count, p1.path, p1.sig))
			if _, err := r.Verify(moved, 0); !errors.Is(err, ErrBadSignature) {
				t.Fatalf("a body at another leaf: %v", err)
			}
			// A path one hash short, or one too long, is malformed.
			short := tokenEncoding.EncodeToString(encodeToken(p0.body, p0.index, p0.count, p0.path[:len(p0.path)-1], p0.sig))
			long := tokenEncoding.EncodeToString(encodeToken(p0.body, p0.index, p0.count, append(p0.path, hash{}), p0.sig))
			for name, tok := range map[string]string{"short path": short, "long path": long} {
				if _, err := r.Verify(tok, 0); !errors.Is(err, ErrMalformed) {
					t.Fatalf("%s: %v", name, err)
				}
			}
		})
	}
}

// rootFromPath agrees with buildTree for every leaf of every size.
func TestAuditPathsFoldToTheRoot(t *testing.T) {
	for n := 1; n <= 70; n++ {
		leaves := make([]hash, n)
		for i := range leaves {
			leaves[i] = leafHash([]byte{byte(i), byte(n)})
		}
		paths := make([][]hash, n)
		root := buildTree(leaves, paths)
		for i := range leaves {
			got, ok := rootFromPath(leaves[i], uint64(i), uint64(n), paths[i])
			if !ok || got != root {
				t.Fatalf("n=%d leaf %d: path of %d folds to %x (%v), root %x", n, i, len(paths[i]), got, ok, root)
			}
			if _, ok := rootFromPath(leaves[i], uint64(n), uint64(n), paths[i]); ok {
				t.Fatalf("n=%d: an index past the tree folded", n)
			}
		}
	}
}

func TestSignBatchRefusesInvalidClaims(t *testing.T) {
	r := mustKeyring(t, 1, testKey(1, 1))
	bad := containerClaims
	bad.Expiry = 0
	if _, err := r.SignBatch([]Claims{containerClaims, bad}); err == nil {
		t.Fatal("a batch with an invalid claim was signed")
	}
	if toks, err := r.SignBatch(nil); err != nil || len(toks) != 0 {
		t.Fatalf("empty batch: %v, %v", toks, err)
	}
}

// A cache makes the tokens of one batch cost one signature check, and
// never accepts what does not verify.
func TestSigCacheRemembersOnlyWhatVerified(t *testing.T) {
	r := mustKeyring(t, 1, testKey(1, 3))
	other := mustKeyring(t, 1, testKey(1, 4))
	cs := []Claims{containerClaims, containerClaims, containerClaims}
	toks, _ := r.SignBatch(cs)
	forged, _ := other.SignBatch(cs)
	cache := NewSigCache(2)
	for i, tok := range toks {
		if _, err := r.VerifyCached(tok, 0, cache); err != nil {
			t.Fatalf("token %d: %v", i, err)
		}
	}
	if len(cache.seen) != 1 {
		t.Fatalf("a batch left %d signatures in the cache, want 1", len(cache.seen))
	}
	for i, tok := range forged {
		if _, err := r.VerifyCached(tok, 0, cache); !errors.Is(err, ErrBadSignature) {
			t.Fatalf("forged token %d: %v", i, err)
		}
	}
	// A tampered body under a cached signature: its root differs.
	p, _ := parseToken(toks[0])
	body := append([]byte(nil), p.body...)
	body[len(body)-2] ^= 1
	tampered := tokenEncoding.EncodeToString(encodeToken(body, p.index, p.count, p.path, p.sig))
	if _, err := r.VerifyCached(tampered, 0, cache); !errors.Is(err, ErrBadSignature) {
		t.Fatalf("tampered body with a cached signature: %v", err)
	}
	more, _ := r.SignBatch([]Claims{containerClaims})
	more2, _ := r.SignBatch([]Claims{am()})
	for _, tok := range []string{more[0], more2[0]} {
		if _, err := r.VerifyCached(tok, 0, cache); err != nil {
			t.Fatal(err)
		}
	}
	if len(cache.seen) > 2 {
		t.Fatalf("the cache holds %d signatures, more than its size", len(cache.seen))
	}
}

func am() Claims {
	c := containerClaims
	c.Kind = KindAM
	return c
}
