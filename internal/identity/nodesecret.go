package identity

import (
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/hex"
	"fmt"
)

// NodeSecretSize is the length of a node secret in bytes; its text is
// twice as many lower-case hex digits.
const NodeSecretSize = 32

// NewNodeSecret returns a fresh node secret (NodeSecretSize bytes from
// crypto/rand, as hex).
func NewNodeSecret() (string, error) {
	b := make([]byte, NodeSecretSize)
	if _, err := rand.Read(b); err != nil {
		return "", fmt.Errorf("generate a node secret: %w", err)
	}
	return hex.EncodeToString(b), nil
}

// ValidateNodeSecret checks a node secret's form: exactly 2×NodeSecretSize
// lower-case hex digits. The error never quotes the secret.
func ValidateNodeSecret(s string) error {
	if len(s) != 2*NodeSecretSize {
		return fmt.Errorf("node secret must be %d hex digits, not %d characters", 2*NodeSecretSize, len(s))
	}
	for i := 0; i < len(s); i++ {
		if c := s[i]; !(c >= '0' && c <= '9' || c >= 'a' && c <= 'f') {
			return fmt.Errorf("node secret must be lower-case hex digits")
		}
	}
	return nil
}

// HashNodeSecret is what the replicated state keeps of a node secret:
// its SHA-256.
func HashNodeSecret(secret string) []byte {
	sum := sha256.Sum256([]byte(secret))
	return sum[:]
}

// NodeSecretMatches reports whether secret hashes to hash, in constant
// time. An empty hash (a node with no secret yet) matches nothing.
func NodeSecretMatches(hash []byte, secret string) bool {
	if len(hash) != sha256.Size {
		return false
	}
	sum := sha256.Sum256([]byte(secret)) // on the stack: every heartbeat checks one
	return subtle.ConstantTimeCompare(hash, sum[:]) == 1
}
