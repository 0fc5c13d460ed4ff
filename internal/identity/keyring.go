package identity

import (
	"crypto/ed25519"
	"crypto/rand"
	"fmt"
	"time"

	"github.com/weft-sched/weft/scheduler"
)

// KeySize is the length of a signing key's secret: an Ed25519 seed.
const KeySize = ed25519.SeedSize

// Token lifetimes. A key retired by a rotation is kept for verification
// for MaxTokenLifetime, so every token it signed expires first.
const (
	// AMTokenLifetime is how long an AM token is valid. The servers renew
	// it in AM.Allocate answers once half of it has passed, or when the
	// key that signed it is no longer the active one.
	AMTokenLifetime = 24 * time.Hour
	// ContainerTokenLifetime is how long a container token is valid from
	// its container's allocation: the servers reclaim an allocation not
	// started within 10 minutes, and a minute more covers clock skew.
	ContainerTokenLifetime = 11 * time.Minute
	// RelayTokenLifetime is how long a token lives that a server mints to
	// relay a call to an agent (a log read, a promotion).
	RelayTokenLifetime = time.Minute
	// NodeCertLifetime is how long a node's minting certificate is valid;
	// the servers renew it in heartbeat answers once half has passed.
	NodeCertLifetime = time.Hour
	// MaxTokenLifetime is the longest any token lives (node-join tokens
	// included).
	MaxTokenLifetime = AMTokenLifetime
)

// Key is one of the servers' signing keys: its ID, carried by the tokens
// it signs, and its KeySize-byte secret (an Ed25519 seed).
type Key struct {
	ID     uint32
	Secret []byte
}

// PublicKey is the public half of a servers' key: what agents hold.
type PublicKey struct {
	ID  uint32
	Key []byte
}

// NewKeySecret returns a fresh key secret from crypto/rand.
func NewKeySecret() ([]byte, error) {
	b := make([]byte, KeySize)
	if _, err := rand.Read(b); err != nil {
		return nil, fmt.Errorf("generate a signing key: %w", err)
	}
	return b, nil
}

// Verifier checks tokens against the servers' public keys: what an agent
// holds. It is immutable and safe for concurrent use; a nil Verifier
// verifies nothing.
type Verifier struct {
	keys   map[uint32]ed25519.PublicKey
	newest uint32
}

// NewVerifier holds the servers' public keys. Every key must be an
// Ed25519 public key and every ID unique and not 0. The keys are copied.
func NewVerifier(keys []PublicKey) (*Verifier, error) {
	v := &Verifier{keys: make(map[uint32]ed25519.PublicKey, len(keys))}
	for _, k := range keys {
		if k.ID == 0 {
			return nil, fmt.Errorf("signing key id must not be 0")
		}
		if len(k.Key) != ed25519.PublicKeySize {
			return nil, fmt.Errorf("signing key %d: public key is %d bytes, want %d", k.ID, len(k.Key), ed25519.PublicKeySize)
		}
		if _, dup := v.keys[k.ID]; dup {
			return nil, fmt.Errorf("signing key %d given twice", k.ID)
		}
		v.keys[k.ID] = append(ed25519.PublicKey(nil), k.Key...)
		v.newest = max(v.newest, k.ID)
	}
	return v, nil
}

// NewestID returns the highest key ID the verifier holds (0: none).
func (v *Verifier) NewestID() uint32 {
	if v == nil {
		return 0
	}
	return v.newest
}

// Has reports whether the verifier holds the key id.
func (v *Verifier) Has(id uint32) bool {
	if v == nil {
		return false
	}
	_, ok := v.keys[id]
	return ok
}

// Len returns how many keys the verifier holds.
func (v *Verifier) Len() int {
	if v == nil {
		return 0
	}
	return len(v.keys)
}

// Verify checks a token's signature (the servers' key it names, or the
// minting node's key in a certificate that key signed) and its expiry
// against now (Unix ns), and returns its claims. Tokens a node minted are
// accepted only as opportunistic container tokens that expire within a
// container token's life of their certificate. The errors are
// ErrMalformed, ErrUnknownKey, ErrBadSignature, ErrExpired and
// ErrNotAllowed; none reveals anything of a key. What the claims must say
// is the caller's check.
func (v *Verifier) Verify(token string, now int64) (*Claims, error) {
	return v.VerifyCached(token, now, nil)
}

// VerifyCached is Verify, with the signatures that verified remembered in
// cache (nil: none), so that the tokens of one batch cost one signature
// check between them.
func (v *Verifier) VerifyCached(token string, now int64, cache *SigCache) (*Claims, error) {
	p, err := parseToken(token)
	if err != nil {
		return nil, err
	}
	c, err := decodeClaims(p.body)
	if err != nil {
		return nil, err
	}
	if v == nil {
		return nil, ErrUnknownKey
	}
	key, ok := v.keys[c.KeyID]
	if !ok {
		return nil, ErrUnknownKey
	}
	if c.cert != nil {
		cert, err := v.verifyNodeCert(c.cert)
		if err != nil {
			return nil, err
		}
		if c.Kind != KindContainer || c.ExecutionType != scheduler.Opportunistic || c.Expiry > cert.Expiry+int64(ContainerTokenLifetime) {
			return nil, ErrNotAllowed
		}
		key = cert.Key
	}
	if err := p.verifySig(key, cache); err != nil {
		return nil, err
	}
	if now >= c.Expiry {
		return nil, ErrExpired
	}
	return c, nil
}

// Keyring is the servers' signing keys: it signs tokens and node
// certificates with its active key and verifies what any of its keys
// signed. It is immutable and safe for concurrent use; a nil Keyring
// verifies nothing and cannot sign. Making one derives every key (tens of
// microseconds each): keep it while the key set does not change.
type Keyring struct {
	private map[uint32]ed25519.PrivateKey
	active  uint32
	*Verifier
}

// NewKeyring holds keys; active (0: none) is the one Sign uses and must be
// among them. Every secret must be KeySize bytes and every ID unique and
// not 0.
func NewKeyring(keys []Key, active uint32) (*Keyring, error) {
	r := &Keyring{private: make(map[uint32]ed25519.PrivateKey, len(keys)), active: active}
	pub := make([]PublicKey, 0, len(keys))
	for _, k := range keys {
		if len(k.Secret) != KeySize {
			return nil, fmt.Errorf("signing key %d: secret is %d bytes, want %d", k.ID, len(k.Secret), KeySize)
		}
		priv := ed25519.NewKeyFromSeed(k.Secret)
		r.private[k.ID] = priv
		pub = append(pub, PublicKey{ID: k.ID, Key: priv.Public().(ed25519.PublicKey)})
	}
	v, err := NewVerifier(pub)
	if err != nil {
		return nil, err
	}
	r.Verifier = v
	if _, ok := r.private[active]; active != 0 && !ok {
		return nil, fmt.Errorf("active signing key %d is not in the keyring", active)
	}
	return r, nil
}

// ActiveID returns the ID of the key Sign uses (0: none).
func (r *Keyring) ActiveID() uint32 {
	if r == nil {
		return 0
	}
	return r.active
}

// PublicKeys returns the public halves of every key, oldest ID first:
// what agents are given.
func (r *Keyring) PublicKeys() []PublicKey {
	if r == nil {
		return nil
	}
	out := make([]PublicKey, 0, len(r.keys))
	for id := uint32(1); len(out) < len(r.keys); id++ {
		if k, ok := r.keys[id]; ok {
			out = append(out, PublicKey{ID: id, Key: k})
		}
	}
	return out
}

// Verify is the Verifier's, for a nil Keyring too.
func (r *Keyring) Verify(token string, now int64) (*Claims, error) {
	return r.VerifyCached(token, now, nil)
}

// VerifyCached is the Verifier's, for a nil Keyring too.
func (r *Keyring) VerifyCached(token string, now int64, cache *SigCache) (*Claims, error) {
	if r == nil {
		return (*Verifier)(nil).VerifyCached(token, now, cache)
	}
	return r.Verifier.VerifyCached(token, now, cache)
}

// Sign returns the token of c signed by the active key (c.KeyID is set to
// it). It fails with ErrNoSigningKey when there is no active key, and when
// the claims are invalid or too large for MaxTokenLength.
func (r *Keyring) Sign(c Claims) (string, error) {
	toks, err := r.SignBatch([]Claims{c})
	if err != nil {
		return "", err
	}
	return toks[0], nil
}

// SignBatch signs many claims at the cost of one signature per MaxBatch
// of them; the tokens are in the order of cs.
func (r *Keyring) SignBatch(cs []Claims) ([]string, error) {
	if r == nil || r.active == 0 {
		return nil, ErrNoSigningKey
	}
	return signClaims(r.private[r.active], cs, func(c *Claims) {
		c.KeyID, c.Minter, c.cert = r.active, "", nil
	})
}

// signClaims encodes each of cs (after set) and signs them in batches of
// at most MaxBatch.
func signClaims(key ed25519.PrivateKey, cs []Claims, set func(*Claims)) ([]string, error) {
	out := make([]string, 0, len(cs))
	bodies := make([][]byte, 0, min(len(cs), MaxBatch))
	for start := 0; start < len(cs); start += MaxBatch {
		bodies = bodies[:0]
		for i := start; i < min(start+MaxBatch, len(cs)); i++ {
			c := cs[i]
			set(&c)
			body, err := encodeClaims(&c)
			if err != nil {
				return nil, err
			}
			bodies = append(bodies, body)
		}
		toks, err := signBodies(key, bodies)
		if err != nil {
			return nil, err
		}
		out = append(out, toks...)
	}
	return out, nil
}

func errTooLarge(n int) error {
	return fmt.Errorf("token claims are too large (%d bytes encoded, at most %d)", n, MaxTokenLength)
}
