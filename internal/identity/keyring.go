package identity

import (
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"fmt"
	"time"
)

// KeySize is the length of a signing key's secret.
const KeySize = 32

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
	// MaxTokenLifetime is the longest any token lives.
	MaxTokenLifetime = AMTokenLifetime
)

// hmacContext separates weft token MACs from any other use of the keys.
const hmacContext = "weft workload token\x00"

// Key is one signing key: its ID, carried by the tokens it signs, and its
// KeySize-byte secret.
type Key struct {
	ID     uint32
	Secret []byte
}

// NewKeySecret returns a fresh key secret from crypto/rand.
func NewKeySecret() ([]byte, error) {
	b := make([]byte, KeySize)
	if _, err := rand.Read(b); err != nil {
		return nil, fmt.Errorf("generate a signing key: %w", err)
	}
	return b, nil
}

// Keyring signs tokens with its active key and verifies tokens signed by
// any of its keys. It is immutable and safe for concurrent use; a nil
// Keyring verifies nothing and cannot sign.
type Keyring struct {
	keys   map[uint32][]byte
	active uint32
}

// NewKeyring holds keys; active (0: none) is the one Sign uses and must be
// among them. Every secret must be KeySize bytes and every ID unique and
// not 0. The secrets are copied.
func NewKeyring(keys []Key, active uint32) (*Keyring, error) {
	r := &Keyring{keys: make(map[uint32][]byte, len(keys)), active: active}
	for _, k := range keys {
		if k.ID == 0 {
			return nil, fmt.Errorf("signing key id must not be 0")
		}
		if len(k.Secret) != KeySize {
			return nil, fmt.Errorf("signing key %d: secret is %d bytes, want %d", k.ID, len(k.Secret), KeySize)
		}
		if _, dup := r.keys[k.ID]; dup {
			return nil, fmt.Errorf("signing key %d given twice", k.ID)
		}
		r.keys[k.ID] = append([]byte(nil), k.Secret...)
	}
	if _, ok := r.keys[active]; active != 0 && !ok {
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

// Has reports whether the keyring holds the key id.
func (r *Keyring) Has(id uint32) bool {
	if r == nil {
		return false
	}
	_, ok := r.keys[id]
	return ok
}

// Len returns how many keys the keyring holds.
func (r *Keyring) Len() int {
	if r == nil {
		return 0
	}
	return len(r.keys)
}

// Sign returns the token of c signed by the active key (c.KeyID is set to
// it). It fails with ErrNoSigningKey when there is no active key, and when
// the claims are invalid or too large for MaxTokenLength.
func (r *Keyring) Sign(c Claims) (string, error) {
	if r == nil || r.active == 0 {
		return "", ErrNoSigningKey
	}
	c.KeyID = r.active
	body, err := encodeClaims(&c)
	if err != nil {
		return "", err
	}
	raw := append(body, mac(r.keys[r.active], body)...)
	if tokenEncoding.EncodedLen(len(raw)) > MaxTokenLength {
		return "", fmt.Errorf("token claims are too large (%d bytes encoded, at most %d)", tokenEncoding.EncodedLen(len(raw)), MaxTokenLength)
	}
	return tokenEncoding.EncodeToString(raw), nil
}

// Verify checks token's MAC against the key it names and its expiry
// against now (Unix ns), and returns its claims. The errors are
// ErrMalformed, ErrUnknownKey, ErrBadSignature and ErrExpired; none
// reveals anything of a key. What the claims must say is the caller's
// check.
func (r *Keyring) Verify(token string, now int64) (*Claims, error) {
	body, sum, err := split(token)
	if err != nil {
		return nil, err
	}
	c, err := decodeClaims(body)
	if err != nil {
		return nil, err
	}
	if r == nil {
		return nil, ErrUnknownKey
	}
	key, ok := r.keys[c.KeyID]
	if !ok {
		return nil, ErrUnknownKey
	}
	if !hmac.Equal(sum, mac(key, body)) {
		return nil, ErrBadSignature
	}
	if now >= c.Expiry {
		return nil, ErrExpired
	}
	return c, nil
}

func mac(key, body []byte) []byte {
	h := hmac.New(sha256.New, key)
	h.Write([]byte(hmacContext))
	h.Write(body)
	return h.Sum(nil)
}
