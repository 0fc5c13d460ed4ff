package identity

import (
	"bytes"
	"crypto/ed25519"
	"crypto/rand"
	"encoding/binary"
	"errors"
	"fmt"

	"github.com/weft-sched/weft/scheduler"
)

// A node's AMRMProxy allocates opportunistic containers without asking the
// servers, so it must sign their container tokens itself. It does so with
// the node's own Ed25519 key, never with the servers': each agent makes its
// key at first start and registers the public half with its node secret;
// the servers certify it (NodeCert, signed with their active key, for
// NodeCertLifetime, renewed in heartbeat answers); and every token the node
// mints carries the certificate. Any agent can then check such a token
// with the servers' public keys alone, and the token names the node that
// minted it.

// NodeKeySize is the length of a node key's secret (an Ed25519 seed).
const NodeKeySize = ed25519.SeedSize

// nodeCertVersion opens a certificate's body.
const nodeCertVersion = 1

// nodeCertContext separates certificate signatures from token ones.
const nodeCertContext = "weft node certificate\x00"

// NodeCert is a servers' statement that Key is node NodeID's minting key
// until Expiry, signed with the servers' key KeyID.
type NodeCert struct {
	NodeID string
	Key    ed25519.PublicKey
	Expiry int64 // Unix ns
	KeyID  uint32
	sig    []byte
}

// NewNodeKey returns a fresh node key secret from crypto/rand.
func NewNodeKey() ([]byte, error) {
	b := make([]byte, NodeKeySize)
	if _, err := rand.Read(b); err != nil {
		return nil, fmt.Errorf("generate a node key: %w", err)
	}
	return b, nil
}

// NodePublicKey returns the public half of a node key secret.
func NodePublicKey(secret []byte) (ed25519.PublicKey, error) {
	if len(secret) != NodeKeySize {
		return nil, fmt.Errorf("node key is %d bytes, want %d", len(secret), NodeKeySize)
	}
	return ed25519.NewKeyFromSeed(secret).Public().(ed25519.PublicKey), nil
}

// ValidateNodePublicKey checks that b can be a node's public key.
func ValidateNodePublicKey(b []byte) error {
	if len(b) != ed25519.PublicKeySize {
		return fmt.Errorf("node key must be an Ed25519 public key of %d bytes, not %d", ed25519.PublicKeySize, len(b))
	}
	return nil
}

func (c *NodeCert) body() []byte {
	b := make([]byte, 0, 64+len(c.NodeID))
	b = append(b, nodeCertVersion)
	b = appendString(b, c.NodeID)
	b = append(b, c.Key...)
	b = binary.AppendVarint(b, c.Expiry)
	return binary.AppendUvarint(b, uint64(c.KeyID))
}

func certMessage(body []byte) []byte {
	return append([]byte(nodeCertContext), body...)
}

// encode is the certificate's canonical bytes: its body, then the
// signature.
func (c *NodeCert) encode() []byte {
	return append(c.body(), c.sig...)
}

// parseNodeCert decodes a certificate, canonically, without checking its
// signature.
func parseNodeCert(b []byte) (*NodeCert, error) {
	r := &reader{b: b}
	if r.byte() != nodeCertVersion {
		return nil, ErrMalformed
	}
	c := &NodeCert{NodeID: r.string(), Key: ed25519.PublicKey(r.fixed(ed25519.PublicKeySize))}
	c.Expiry = r.varint()
	keyID := r.uvarint()
	c.sig = r.fixed(sigSize)
	if r.err != nil || len(r.b) != 0 || keyID == 0 || keyID > 1<<32-1 || c.NodeID == "" {
		return nil, ErrMalformed
	}
	c.KeyID = uint32(keyID)
	if !bytes.Equal(c.encode(), b) {
		return nil, ErrMalformed
	}
	return c, nil
}

// verifyNodeCert parses a certificate and checks the servers' signature
// on it. Its expiry is checked through the tokens it backs.
func (v *Verifier) verifyNodeCert(b []byte) (*NodeCert, error) {
	c, err := parseNodeCert(b)
	if err != nil {
		return nil, err
	}
	key, ok := v.keys[c.KeyID]
	if !ok {
		return nil, ErrUnknownKey
	}
	if !ed25519.Verify(key, certMessage(c.body()), c.sig) {
		return nil, ErrBadSignature
	}
	return c, nil
}

// CertifyNode signs, with the active key, that key is node's minting key
// until expiry (Unix ns), and returns the certificate's text.
func (r *Keyring) CertifyNode(node string, key []byte, expiry int64) (string, error) {
	if r == nil || r.active == 0 {
		return "", ErrNoSigningKey
	}
	if err := ValidateNodePublicKey(key); err != nil {
		return "", err
	}
	if node == "" || expiry <= 0 {
		return "", errors.New("a node certificate needs a node and an expiry")
	}
	c := &NodeCert{NodeID: node, Key: key, Expiry: expiry, KeyID: r.active}
	c.sig = ed25519.Sign(r.private[r.active], certMessage(c.body()))
	return tokenEncoding.EncodeToString(c.encode()), nil
}

// NodeSigner mints the opportunistic container tokens of one node's
// AMRMProxy with the node's own key and its certificate.
type NodeSigner struct {
	key  ed25519.PrivateKey
	cert *NodeCert
	raw  []byte
}

// NewNodeSigner holds a node's key secret and the certificate the servers
// gave it, after checking that the certificate is the servers' (v), names
// node and certifies that very key.
func NewNodeSigner(node string, secret []byte, certText string, v *Verifier) (*NodeSigner, error) {
	pub, err := NodePublicKey(secret)
	if err != nil {
		return nil, err
	}
	if len(certText) > MaxTokenLength {
		return nil, ErrMalformed
	}
	raw, err := tokenEncoding.DecodeString(certText)
	if err != nil {
		return nil, ErrMalformed
	}
	if v == nil {
		return nil, ErrUnknownKey
	}
	cert, err := v.verifyNodeCert(raw)
	if err != nil {
		return nil, fmt.Errorf("node certificate: %w", err)
	}
	if cert.NodeID != node || !bytes.Equal(cert.Key, pub) {
		return nil, fmt.Errorf("node certificate is for node %s and another key, not this node %s's", cert.NodeID, node)
	}
	return &NodeSigner{key: ed25519.NewKeyFromSeed(secret), cert: cert, raw: raw}, nil
}

// Expiry is when the signer's certificate ends (Unix ns): it mints
// nothing then.
func (s *NodeSigner) Expiry() int64 { return s.cert.Expiry }

// SignBatch mints opportunistic container tokens, in the order of cs, at
// now (Unix ns). Each must be a container token for an opportunistic
// container, and none may outlive the certificate by more than a
// container token's life.
func (s *NodeSigner) SignBatch(cs []Claims, now int64) ([]string, error) {
	if s == nil {
		return nil, ErrNoSigningKey
	}
	if now >= s.cert.Expiry {
		return nil, fmt.Errorf("the node's certificate expired: %w", ErrNoSigningKey)
	}
	for i := range cs {
		if cs[i].Kind != KindContainer || cs[i].ExecutionType != scheduler.Opportunistic {
			return nil, fmt.Errorf("a node mints only opportunistic container tokens, not a %s token of %s: %w", cs[i].Kind, cs[i].ExecutionType, ErrNotAllowed)
		}
		if cs[i].Expiry > s.cert.Expiry+int64(ContainerTokenLifetime) {
			return nil, fmt.Errorf("token would outlive the node's certificate: %w", ErrNotAllowed)
		}
	}
	return signClaims(s.key, cs, func(c *Claims) {
		c.KeyID, c.Minter, c.cert = s.cert.KeyID, s.cert.NodeID, s.raw
	})
}
