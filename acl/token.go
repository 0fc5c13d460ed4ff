package acl

import (
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/hex"
	"fmt"
	"strings"
)

// Token types.
const (
	TypeClient     = "client"     // what its policies grant
	TypeManagement = "management" // everything
)

// AnonymousPolicy is the policy that applies to requests without a token;
// it does not exist, so grants nothing, until an operator writes it.
const AnonymousPolicy = "anonymous"

// Token is a credential as the servers keep it: the secret itself is never
// stored, only its SHA-256 (SecretHash), so neither the Raft log nor a
// snapshot holds a usable secret.
type Token struct {
	// AccessorID names the token in listings and commands; it is not a
	// credential.
	AccessorID string `codec:"accessor_id"`
	SecretHash []byte `codec:"secret_hash"`
	// Name is who the token belongs to; with ACLs on, it is the user of
	// every app submitted with the token.
	Name     string   `codec:"name"`
	Type     string   `codec:"type"`
	Policies []string `codec:"policies"`
	// ExpiresAt is when the token stops working (Unix ns); 0 never.
	ExpiresAt   int64  `codec:"expires_at"`
	CreateTime  int64  `codec:"create_time"`
	CreateIndex uint64 `codec:"create_index"`
	ModifyIndex uint64 `codec:"modify_index"`
}

// Expired reports whether the token has expired at now (Unix ns).
func (t *Token) Expired(now int64) bool { return t.ExpiresAt != 0 && now >= t.ExpiresAt }

// Policy is an ACL policy as the servers keep it: its HCL text, and the
// rules parsed from it when it was written.
type Policy struct {
	Name        string `codec:"name"`
	Description string `codec:"description"`
	Rules       string `codec:"rules"`
	CreateIndex uint64 `codec:"create_index"`
	ModifyIndex uint64 `codec:"modify_index"`

	parsed *Rules
}

// Parsed returns the policy's rules: those recorded with SetParsed, else
// parsed afresh. It never changes p, so a published policy may be read
// from many goroutines.
func (p *Policy) Parsed() (*Rules, error) {
	if p.parsed != nil {
		return p.parsed, nil
	}
	return ParseRules(p.Name+".hcl", []byte(p.Rules))
}

// SetParsed records the rules parsed from p.Rules; call it before p is
// shared.
func (p *Policy) SetParsed(r *Rules) { p.parsed = r }

// NewID returns a random UUID (version 4), used for accessor and secret
// IDs.
func NewID() string {
	var b [16]byte
	if _, err := rand.Read(b[:]); err != nil {
		panic("acl: crypto/rand failed: " + err.Error())
	}
	b[6] = b[6]&0x0f | 0x40
	b[8] = b[8]&0x3f | 0x80
	h := hex.EncodeToString(b[:])
	return h[0:8] + "-" + h[8:12] + "-" + h[12:16] + "-" + h[16:20] + "-" + h[20:]
}

// ValidateID checks that s is a UUID as NewID makes them.
func ValidateID(field, s string) error {
	if len(s) != 36 {
		return fmt.Errorf("%s: want a UUID like 6f1c2d3e-0000-4000-8000-000000000000", field)
	}
	for i, c := range s {
		switch i {
		case 8, 13, 18, 23:
			if c != '-' {
				return fmt.Errorf("%s: want a UUID like 6f1c2d3e-0000-4000-8000-000000000000", field)
			}
		default:
			if !(c >= '0' && c <= '9' || c >= 'a' && c <= 'f') {
				return fmt.Errorf("%s: want a lower-case UUID like 6f1c2d3e-0000-4000-8000-000000000000", field)
			}
		}
	}
	return nil
}

// HashSecret is how a secret ID is kept.
func HashSecret(secret string) []byte {
	h := sha256.Sum256([]byte(secret))
	return h[:]
}

// SecretMatches reports whether secret is the token's secret, in constant
// time.
func (t *Token) SecretMatches(secret string) bool {
	return subtle.ConstantTimeCompare(HashSecret(secret), t.SecretHash) == 1
}

// ValidateName checks a token or policy name: with ACLs on, a token's
// name is the user its apps run as, so it is kept to what a user name may
// be (letters, digits, '.', '_', '-', '@'; 1 to 64 characters).
func ValidateName(field, s string) error {
	if s == "" || len(s) > 64 {
		return fmt.Errorf("%s must be 1 to 64 characters", field)
	}
	for _, c := range s {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || strings.ContainsRune("._-@", c)) {
			return fmt.Errorf("%s %q: use letters, digits, '.', '_', '-' and '@'", field, s)
		}
	}
	return nil
}
