package identity

import (
	"bytes"
	"encoding/base64"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"sort"

	"github.com/weft-sched/weft/scheduler"
)

// Kind says what a token authorises.
type Kind uint8

// Token kinds. Values are part of the token format: never renumber one.
const (
	// KindAM identifies an AM attempt: AM.* calls for its app, and
	// Container.Stop, Status and Logs for its app's containers.
	KindAM Kind = 1
	// KindContainer authorises starting exactly one container, as
	// allocated, on its node (and reading that container's logs).
	KindContainer Kind = 2
)

// String names the kind.
func (k Kind) String() string {
	switch k {
	case KindAM:
		return "am"
	case KindContainer:
		return "container"
	}
	return fmt.Sprintf("kind(%d)", uint8(k))
}

// Claims is what a token asserts. Every field is covered by the MAC.
type Claims struct {
	Kind        Kind
	AppID       string
	Attempt     int
	ContainerID string
	// NodeID is where the container runs (for an AM token: where the AM
	// runs, the node whose AMRMProxy serves it).
	NodeID        string
	Resources     scheduler.Resources
	ExecutionType scheduler.ExecutionType
	// User is the app's user: the account a root agent with run_as_user
	// runs the container as (SPEC §15), so the caller cannot pick it.
	User string
	// Expiry is when the token stops being valid (Unix ns): it is refused
	// at or after it.
	Expiry int64
	// KeyID names the key that signed the token; Sign fills it in.
	KeyID uint32
}

// MaxTokenLength bounds a token's text: longer ones are refused before any
// decoding, and Sign refuses claims that would need more.
const MaxTokenLength = 2048

// macSize is the length of an HMAC-SHA256.
const macSize = 32

// tokenVersion opens every encoded body.
const tokenVersion = 1

// tokenEncoding is base64url without padding, strict: one text per token.
var tokenEncoding = base64.RawURLEncoding.Strict()

// Errors of token verification. They never carry a key or the token.
var (
	// ErrMalformed: the text is not a token (too long, not base64url, or
	// a body that does not decode canonically).
	ErrMalformed = errors.New("malformed token")
	// ErrUnknownKey: the token names a key the verifier does not hold
	// (never created, retired long ago, or not learned yet).
	ErrUnknownKey = errors.New("token signed by an unknown key")
	// ErrBadSignature: the MAC does not match the claims.
	ErrBadSignature = errors.New("token signature does not verify")
	// ErrExpired: the token's expiry has passed.
	ErrExpired = errors.New("token has expired")
	// ErrNoSigningKey: the keyring holds no active key to sign with.
	ErrNoSigningKey = errors.New("no active signing key")
)

func executionTypeCode(t scheduler.ExecutionType) (byte, bool) {
	switch t {
	case scheduler.Guaranteed:
		return 1, true
	case scheduler.Opportunistic:
		return 2, true
	}
	return 0, false
}

func executionTypeOf(b byte) (scheduler.ExecutionType, bool) {
	switch b {
	case 1:
		return scheduler.Guaranteed, true
	case 2:
		return scheduler.Opportunistic, true
	}
	return "", false
}

// encodeClaims is the canonical body of c: the version, the kind, the key
// ID, the expiry, the attempt, the app, container and node IDs, the
// execution type, then the resources with extended ones in name order and
// zero ones left out. Equal claims always encode to the same bytes.
func encodeClaims(c *Claims) ([]byte, error) {
	if c.Kind != KindAM && c.Kind != KindContainer {
		return nil, fmt.Errorf("token kind %d is not am or container", c.Kind)
	}
	et, ok := executionTypeCode(c.ExecutionType)
	if !ok {
		return nil, fmt.Errorf("token execution_type %q is not GUARANTEED or OPPORTUNISTIC", c.ExecutionType)
	}
	if c.Attempt < 0 || c.Attempt > math.MaxInt32 {
		return nil, fmt.Errorf("token attempt %d is out of range", c.Attempt)
	}
	if c.Expiry <= 0 {
		return nil, errors.New("token expiry must be set")
	}
	b := make([]byte, 0, 128)
	b = append(b, tokenVersion, byte(c.Kind))
	b = binary.AppendUvarint(b, uint64(c.KeyID))
	b = binary.AppendVarint(b, c.Expiry)
	b = binary.AppendUvarint(b, uint64(c.Attempt))
	for _, s := range []string{c.AppID, c.ContainerID, c.NodeID, c.User} {
		b = appendString(b, s)
	}
	b = append(b, et)
	b = binary.AppendVarint(b, c.Resources.MemoryMB)
	b = binary.AppendVarint(b, c.Resources.Vcores)
	names := make([]string, 0, len(c.Resources.Extended))
	for name, v := range c.Resources.Extended {
		if v != 0 {
			names = append(names, name)
		}
	}
	sort.Strings(names)
	b = binary.AppendUvarint(b, uint64(len(names)))
	for _, name := range names {
		if name == "" {
			return nil, errors.New("token resources: an extended resource has an empty name")
		}
		b = appendString(b, name)
		b = binary.AppendVarint(b, c.Resources.Extended[name])
	}
	return b, nil
}

func appendString(b []byte, s string) []byte {
	b = binary.AppendUvarint(b, uint64(len(s)))
	return append(b, s...)
}

// reader decodes a body; every read is bounded by what is left.
type reader struct {
	b   []byte
	err error
}

func (r *reader) byte() byte {
	if r.err != nil || len(r.b) == 0 {
		r.fail()
		return 0
	}
	v := r.b[0]
	r.b = r.b[1:]
	return v
}

func (r *reader) uvarint() uint64 {
	if r.err != nil {
		return 0
	}
	v, n := binary.Uvarint(r.b)
	if n <= 0 {
		r.fail()
		return 0
	}
	r.b = r.b[n:]
	return v
}

func (r *reader) varint() int64 {
	if r.err != nil {
		return 0
	}
	v, n := binary.Varint(r.b)
	if n <= 0 {
		r.fail()
		return 0
	}
	r.b = r.b[n:]
	return v
}

func (r *reader) string() string {
	n := r.uvarint()
	if r.err != nil || n > uint64(len(r.b)) {
		r.fail()
		return ""
	}
	s := string(r.b[:n])
	r.b = r.b[n:]
	return s
}

func (r *reader) fail() {
	if r.err == nil {
		r.err = ErrMalformed
	}
	r.b = nil
}

// decodeClaims parses a body. It accepts only the canonical encoding:
// the claims it returns encode back to exactly body.
func decodeClaims(body []byte) (*Claims, error) {
	r := &reader{b: body}
	if r.byte() != tokenVersion {
		return nil, ErrMalformed
	}
	c := &Claims{Kind: Kind(r.byte())}
	keyID := r.uvarint()
	c.Expiry = r.varint()
	attempt := r.uvarint()
	c.AppID, c.ContainerID, c.NodeID, c.User = r.string(), r.string(), r.string(), r.string()
	et, etOK := executionTypeOf(r.byte())
	c.ExecutionType = et
	c.Resources.MemoryMB, c.Resources.Vcores = r.varint(), r.varint()
	n := r.uvarint()
	// Each extended resource takes at least two bytes.
	if r.err != nil || n > uint64(len(r.b))/2 {
		return nil, ErrMalformed
	}
	if n > 0 {
		c.Resources.Extended = make(map[string]int64, n)
		for i := uint64(0); i < n; i++ {
			name := r.string()
			c.Resources.Extended[name] = r.varint()
		}
	}
	if r.err != nil || len(r.b) != 0 || !etOK || keyID > math.MaxUint32 || attempt > math.MaxInt32 {
		return nil, ErrMalformed
	}
	c.KeyID, c.Attempt = uint32(keyID), int(attempt)
	again, err := encodeClaims(c)
	if err != nil || !bytes.Equal(again, body) {
		return nil, ErrMalformed
	}
	return c, nil
}

// split decodes a token's text into its body and MAC, bounded by
// MaxTokenLength. Only the base64url alphabet is accepted.
func split(token string) (body, mac []byte, err error) {
	if len(token) == 0 || len(token) > MaxTokenLength {
		return nil, nil, ErrMalformed
	}
	// The decoder skips '\r' and '\n': only the alphabet makes one text
	// per token.
	for i := 0; i < len(token); i++ {
		if c := token[i]; !(c >= 'A' && c <= 'Z' || c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '-' || c == '_') {
			return nil, nil, ErrMalformed
		}
	}
	raw, err := tokenEncoding.DecodeString(token)
	if err != nil || len(raw) <= macSize {
		return nil, nil, ErrMalformed
	}
	return raw[:len(raw)-macSize], raw[len(raw)-macSize:], nil
}

// SameResources reports whether a and b are the same vector (a missing
// extended resource is zero).
func SameResources(a, b scheduler.Resources) bool {
	if a.MemoryMB != b.MemoryMB || a.Vcores != b.Vcores {
		return false
	}
	for k, v := range a.Extended {
		if b.Extended[k] != v {
			return false
		}
	}
	for k, v := range b.Extended {
		if a.Extended[k] != v {
			return false
		}
	}
	return true
}
