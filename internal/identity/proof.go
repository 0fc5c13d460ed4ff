package identity

import (
	"bytes"
	"crypto/ed25519"
	"crypto/sha256"
	"encoding/binary"
	"sync"
)

// A token's text is base64url of
//
//	uvarint(len(body)) ‖ body ‖ uvarint(index) ‖ uvarint(count) ‖ path ‖ signature
//
// where the signature (Ed25519, 64 bytes) is over the root of a Merkle
// tree (RFC 6962's hashing) of count token bodies signed together, and
// path (32 bytes a level) proves that body is leaf index of that tree. A
// token signed alone is a tree of one: index 0, count 1, no path. Signing
// a batch costs one signature however many tokens it holds, which is what
// keeps a leader that hands out thousands of container tokens a second
// from spending a core on Ed25519.

// MaxBatch bounds the tokens one signature covers (its path is then at
// most 8 hashes long).
const MaxBatch = 256

// sigSize and hashSize are the lengths of a signature and a tree hash.
const (
	sigSize  = ed25519.SignatureSize
	hashSize = sha256.Size
)

// tokenSigContext separates token signatures from any other use of the keys.
const tokenSigContext = "weft workload token\x00"

type hash = [hashSize]byte

func leafHash(body []byte) hash {
	h := sha256.New()
	h.Write([]byte{0})
	h.Write(body)
	var out hash
	h.Sum(out[:0])
	return out
}

func nodeHash(l, r hash) hash {
	var buf [1 + 2*hashSize]byte
	buf[0] = 1
	copy(buf[1:], l[:])
	copy(buf[1+hashSize:], r[:])
	return sha256.Sum256(buf[:])
}

// largestPowerOfTwoBelow returns the largest power of two less than n (n > 1).
func largestPowerOfTwoBelow(n int) int {
	k := 1
	for k<<1 < n {
		k <<= 1
	}
	return k
}

// buildTree returns the root of the tree over leaves and appends each
// leaf's audit path, leaf level first, to paths.
func buildTree(leaves []hash, paths [][]hash) hash {
	n := len(leaves)
	if n == 1 {
		return leaves[0]
	}
	k := largestPowerOfTwoBelow(n)
	l := buildTree(leaves[:k], paths[:k])
	r := buildTree(leaves[k:], paths[k:])
	for i := range paths[:k] {
		paths[i] = append(paths[i], r)
	}
	for i := k; i < n; i++ {
		paths[i] = append(paths[i], l)
	}
	return nodeHash(l, r)
}

// rootFromPath folds a leaf's audit path into the root of a tree of count
// leaves (RFC 9162, 2.1.3.2). It fails when the path is not exactly the
// one such a tree has for index, so every (index, count) has one path.
func rootFromPath(leaf hash, index, count uint64, path []hash) (hash, bool) {
	if index >= count {
		return hash{}, false
	}
	fn, sn, r := index, count-1, leaf
	for _, p := range path {
		if sn == 0 {
			return hash{}, false
		}
		if fn&1 == 1 || fn == sn {
			r = nodeHash(p, r)
			for fn&1 == 0 && fn != 0 {
				fn >>= 1
				sn >>= 1
			}
		} else {
			r = nodeHash(r, p)
		}
		fn >>= 1
		sn >>= 1
	}
	return r, sn == 0
}

// sigMessage is what a key signs for a tree of count tokens with root.
func sigMessage(count uint64, root hash) []byte {
	b := make([]byte, 0, len(tokenSigContext)+binary.MaxVarintLen64+hashSize)
	b = append(b, tokenSigContext...)
	b = binary.AppendUvarint(b, count)
	return append(b, root[:]...)
}

// signBodies signs bodies together with key and returns their tokens.
func signBodies(key ed25519.PrivateKey, bodies [][]byte) ([]string, error) {
	leaves := make([]hash, len(bodies))
	for i, b := range bodies {
		leaves[i] = leafHash(b)
	}
	paths := make([][]hash, len(bodies))
	root := buildTree(leaves, paths)
	sig := ed25519.Sign(key, sigMessage(uint64(len(bodies)), root))
	out := make([]string, len(bodies))
	for i, body := range bodies {
		raw := encodeToken(body, uint64(i), uint64(len(bodies)), paths[i], sig)
		if tokenEncoding.EncodedLen(len(raw)) > MaxTokenLength {
			return nil, errTooLarge(tokenEncoding.EncodedLen(len(raw)))
		}
		out[i] = tokenEncoding.EncodeToString(raw)
	}
	return out, nil
}

func encodeToken(body []byte, index, count uint64, path []hash, sig []byte) []byte {
	raw := make([]byte, 0, 3*binary.MaxVarintLen64+len(body)+len(path)*hashSize+sigSize)
	raw = appendBytes(raw, body)
	raw = binary.AppendUvarint(raw, index)
	raw = binary.AppendUvarint(raw, count)
	for _, p := range path {
		raw = append(raw, p[:]...)
	}
	return append(raw, sig...)
}

// parsedToken is a token's text taken apart, nothing verified yet.
type parsedToken struct {
	body         []byte
	index, count uint64
	path         []hash
	sig          []byte
}

// parseToken takes a token's text apart, bounded by MaxTokenLength; only
// the base64url alphabet and the canonical layout are accepted.
func parseToken(token string) (*parsedToken, error) {
	if len(token) == 0 || len(token) > MaxTokenLength {
		return nil, ErrMalformed
	}
	// The decoder skips '\r' and '\n': only the alphabet makes one text
	// per token.
	for i := 0; i < len(token); i++ {
		if c := token[i]; !(c >= 'A' && c <= 'Z' || c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '-' || c == '_') {
			return nil, ErrMalformed
		}
	}
	raw, err := tokenEncoding.DecodeString(token)
	if err != nil {
		return nil, ErrMalformed
	}
	r := &reader{b: raw}
	p := &parsedToken{body: r.bytes()}
	p.index, p.count = r.uvarint(), r.uvarint()
	if r.err != nil || p.count == 0 || p.count > MaxBatch || p.index >= p.count ||
		len(r.b) < sigSize || (len(r.b)-sigSize)%hashSize != 0 {
		return nil, ErrMalformed
	}
	p.path = make([]hash, (len(r.b)-sigSize)/hashSize)
	for i := range p.path {
		copy(p.path[i][:], r.fixed(hashSize))
	}
	p.sig = r.fixed(sigSize)
	if !bytes.Equal(encodeToken(p.body, p.index, p.count, p.path, p.sig), raw) {
		return nil, ErrMalformed // a varint that is not minimal
	}
	return p, nil
}

// verifySig checks that the token's body is in a tree whose root key
// signed; cache, if not nil, remembers signatures that verified.
func (p *parsedToken) verifySig(key ed25519.PublicKey, cache *SigCache) error {
	root, ok := rootFromPath(leafHash(p.body), p.index, p.count, p.path)
	if !ok {
		return ErrMalformed
	}
	msg := sigMessage(p.count, root)
	var id hash
	if cache != nil {
		h := sha256.New()
		h.Write(key)
		h.Write(msg)
		h.Write(p.sig)
		h.Sum(id[:0])
		if cache.has(id) {
			return nil
		}
	}
	if !ed25519.Verify(key, msg, p.sig) {
		return ErrBadSignature
	}
	if cache != nil {
		cache.add(id)
	}
	return nil
}

// SigCache remembers signatures that verified, so that the tokens of one
// batch (signed together) cost one Ed25519 verification between them. It
// holds at most its size of them, and is safe for concurrent use. Only a
// signature that verified is remembered, under the hash of the key, the
// signed message and the signature: a forgery never hits.
type SigCache struct {
	mu   sync.Mutex
	size int
	seen map[hash]struct{}
}

// NewSigCache returns a cache of at most size signatures.
func NewSigCache(size int) *SigCache {
	return &SigCache{size: size, seen: make(map[hash]struct{}, size)}
}

func (c *SigCache) has(id hash) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	_, ok := c.seen[id]
	return ok
}

func (c *SigCache) add(id hash) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.seen) >= c.size {
		clear(c.seen) // a burst of new batches starts it over: bounded, and simple
	}
	c.seen[id] = struct{}{}
}

// KeyIDOf returns the key ID a token's claims name, without verifying
// anything: a verifier that does not hold that key can tell a key newer
// than its own (one it may not have learned yet) from an old or made-up
// one. It reports false for text that is not a token.
func KeyIDOf(token string) (uint32, bool) {
	p, err := parseToken(token)
	if err != nil {
		return 0, false
	}
	c, err := decodeClaims(p.body)
	if err != nil {
		return 0, false
	}
	return c.KeyID, true
}
