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
	// Container.Stop, Status, Logs and Output for its app's containers.
	KindAM Kind = 1
	// KindContainer authorises starting exactly one container, as
	// allocated, on its node (and reading that container's logs).
	KindContainer Kind = 2
	// KindJoin lets an agent register a node the servers do not know yet
	// (`weft node join-token create`); NodeID, if set, is the only name
	// it may register.
	KindJoin Kind = 3
)

// String names the kind.
func (k Kind) String() string {
	switch k {
	case KindAM:
		return "am"
	case KindContainer:
		return "container"
	case KindJoin:
		return "join"
	}
	return fmt.Sprintf("kind(%d)", uint8(k))
}

// Claims is what a token asserts. Every field is covered by the signature.
type Claims struct {
	Kind        Kind
	AppID       string
	Attempt     int
	ContainerID string
	// NodeID is where the container runs (for an AM token: where the AM
	// runs, the node whose AMRMProxy serves it; for a join token: the one
	// node name it may register, or "" for any).
	NodeID        string
	Resources     scheduler.Resources
	ExecutionType scheduler.ExecutionType
	// User is the app's user: the account a root agent with run_as_user
	// runs the container as, so the caller cannot pick it.
	User string
	// UID, if not 0, is the uid the servers gave the app's containers
	// from the dynamic uid range.
	UID uint32
	// Expiry is when the token stops being valid (Unix ns): it is refused
	// at or after it.
	Expiry int64
	// KeyID names the servers' key that signed the token or, for a token
	// a node minted, the servers' key that signed the node's certificate.
	// The signer fills it in.
	KeyID uint32
	// Minter is the node whose own key signed the token ("" when the
	// servers signed it). Only opportunistic container tokens are minted
	// by nodes (their AMRMProxies'). The signer fills it in.
	Minter string

	// cert is the minting node's certificate, as the token carries it.
	cert []byte
}

// MaxTokenLength bounds a token's text: longer ones are refused before any
// decoding, and signing refuses claims that would need more.
const MaxTokenLength = 2048

// tokenVersion opens every encoded body. Version 1 tokens were HMACs; no
// verifier accepts them any more.
const tokenVersion = 2

// tokenEncoding is base64url without padding, strict.
var tokenEncoding = base64.RawURLEncoding.Strict()

// Errors of token verification. They never carry a key or the token.
var (
	// ErrMalformed: the text is not a token (too long, not base64url, or
	// a body or proof that does not decode canonically).
	ErrMalformed = errors.New("malformed token")
	// ErrUnknownKey: the token names a key the verifier does not hold
	// (never created, retired long ago, or not learned yet).
	ErrUnknownKey = errors.New("token signed by an unknown key")
	// ErrBadSignature: the signature does not match the claims.
	ErrBadSignature = errors.New("token signature does not verify")
	// ErrExpired: the token's expiry has passed.
	ErrExpired = errors.New("token has expired")
	// ErrNoSigningKey: the keyring holds no active key to sign with.
	ErrNoSigningKey = errors.New("no active signing key")
	// ErrNotAllowed: a node minted a token it may not mint (anything but
	// an opportunistic container's, or past its certificate).
	ErrNotAllowed = errors.New("token minted by a node that may not mint it")
)

func executionTypeCode(t scheduler.ExecutionType) (byte, bool) {
	switch t {
	case "":
		return 0, true
	case scheduler.Guaranteed:
		return 1, true
	case scheduler.Opportunistic:
		return 2, true
	}
	return 0, false
}

func executionTypeOf(b byte) (scheduler.ExecutionType, bool) {
	switch b {
	case 0:
		return "", true
	case 1:
		return scheduler.Guaranteed, true
	case 2:
		return scheduler.Opportunistic, true
	}
	return "", false
}

// Minter flags in a body.
const (
	mintedByServers = 0
	mintedByNode    = 1
)

// checkClaims refuses claims no signer may sign.
func checkClaims(c *Claims) error {
	switch c.Kind {
	case KindAM, KindContainer:
		if c.ExecutionType == "" {
			return fmt.Errorf("token execution_type must be GUARANTEED or OPPORTUNISTIC")
		}
	case KindJoin:
	default:
		return fmt.Errorf("token kind %d is not am, container or join", c.Kind)
	}
	if _, ok := executionTypeCode(c.ExecutionType); !ok {
		return fmt.Errorf("token execution_type %q is not GUARANTEED or OPPORTUNISTIC", c.ExecutionType)
	}
	if c.Attempt < 0 || c.Attempt > math.MaxInt32 {
		return fmt.Errorf("token attempt %d is out of range", c.Attempt)
	}
	if c.Expiry <= 0 {
		return errors.New("token expiry must be set")
	}
	return nil
}

// encodeClaims is the canonical body of c: the version, the kind, the key
// ID, the expiry, the attempt, the app, container and node IDs, the user,
// the uid, the execution type, the resources with extended ones in name
// order and zero ones left out, then who minted it (the servers, or a node
// with its certificate). Equal claims always encode to the same bytes.
func encodeClaims(c *Claims) ([]byte, error) {
	if err := checkClaims(c); err != nil {
		return nil, err
	}
	et, _ := executionTypeCode(c.ExecutionType)
	b := make([]byte, 0, 160+len(c.cert))
	b = append(b, tokenVersion, byte(c.Kind))
	b = binary.AppendUvarint(b, uint64(c.KeyID))
	b = binary.AppendVarint(b, c.Expiry)
	b = binary.AppendUvarint(b, uint64(c.Attempt))
	for _, s := range []string{c.AppID, c.ContainerID, c.NodeID, c.User} {
		b = appendString(b, s)
	}
	b = binary.AppendUvarint(b, uint64(c.UID))
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
	if c.cert == nil {
		if c.Minter != "" {
			return nil, errors.New("token names a minting node but carries no certificate")
		}
		return append(b, mintedByServers), nil
	}
	b = append(b, mintedByNode)
	return appendBytes(b, c.cert), nil
}

func appendString(b []byte, s string) []byte {
	b = binary.AppendUvarint(b, uint64(len(s)))
	return append(b, s...)
}

func appendBytes(b, v []byte) []byte {
	b = binary.AppendUvarint(b, uint64(len(v)))
	return append(b, v...)
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

func (r *reader) bytes() []byte {
	n := r.uvarint()
	if r.err != nil || n > uint64(len(r.b)) {
		r.fail()
		return nil
	}
	v := r.b[:n:n]
	r.b = r.b[n:]
	return v
}

func (r *reader) string() string { return string(r.bytes()) }

func (r *reader) fixed(n int) []byte {
	if r.err != nil || len(r.b) < n {
		r.fail()
		return nil
	}
	v := r.b[:n:n]
	r.b = r.b[n:]
	return v
}

func (r *reader) fail() {
	if r.err == nil {
		r.err = ErrMalformed
	}
	r.b = nil
}

// decodeClaims parses a body. It accepts only the canonical encoding: the
// claims it returns encode back to exactly body. A node's certificate is
// parsed (Minter is its node) but not verified here.
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
	uid := r.uvarint()
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
	switch r.byte() {
	case mintedByServers:
	case mintedByNode:
		c.cert = r.bytes()
		cert, err := parseNodeCert(c.cert)
		if err != nil {
			return nil, ErrMalformed
		}
		c.Minter = cert.NodeID
		if uint64(cert.KeyID) != keyID {
			return nil, ErrMalformed // the key ID is the certificate's
		}
	default:
		r.fail()
	}
	if r.err != nil || len(r.b) != 0 || !etOK || keyID > math.MaxUint32 || attempt > math.MaxInt32 || uid > math.MaxUint32 {
		return nil, ErrMalformed
	}
	c.KeyID, c.Attempt, c.UID = uint32(keyID), int(attempt), uint32(uid)
	again, err := encodeClaims(c)
	if err != nil || !bytes.Equal(again, body) {
		return nil, ErrMalformed
	}
	return c, nil
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
