package identity

import (
	"bytes"
	"errors"
	"strings"
	"testing"

	"github.com/weft-sched/weft/scheduler"
)

var oppClaims = Claims{
	Kind: KindContainer, AppID: "app-3", Attempt: 1, ContainerID: "o-n1-4-17", NodeID: "n2",
	Resources: scheduler.Resources{MemoryMB: 256, Vcores: 1}, ExecutionType: scheduler.Opportunistic,
	User: "bob", Expiry: 2_000_000,
}

// nodeSigner certifies a fresh key for node until certExpiry.
func nodeSigner(t testing.TB, r *Keyring, node string, certExpiry int64) (*NodeSigner, []byte) {
	t.Helper()
	secret, err := NewNodeKey()
	if err != nil {
		t.Fatal(err)
	}
	pub, err := NodePublicKey(secret)
	if err != nil {
		t.Fatal(err)
	}
	cert, err := r.CertifyNode(node, pub, certExpiry)
	if err != nil {
		t.Fatal(err)
	}
	s, err := NewNodeSigner(node, secret, cert, r.Verifier)
	if err != nil {
		t.Fatal(err)
	}
	return s, secret
}

// A node mints opportunistic container tokens that any holder of the
// servers' public keys verifies, and that name the node.
func TestNodeMintedTokensNameTheirNode(t *testing.T) {
	r := mustKeyring(t, 1, testKey(1, 9))
	v, _ := NewVerifier(r.PublicKeys())
	s, _ := nodeSigner(t, r, "n1", 1_500_000)
	toks, err := s.SignBatch([]Claims{oppClaims, oppClaims}, 1_000)
	if err != nil {
		t.Fatal(err)
	}
	c, err := v.Verify(toks[1], 1_000)
	if err != nil {
		t.Fatal(err)
	}
	if c.Minter != "n1" || c.KeyID != 1 || c.ContainerID != oppClaims.ContainerID || c.NodeID != "n2" {
		t.Fatalf("claims %+v", c)
	}
	if len(toks[0]) > MaxTokenLength {
		t.Fatalf("a node's token is %d characters", len(toks[0]))
	}
}

// What a node may not mint: anything but an opportunistic container
// token, or one outliving its certificate; nor with a certificate the
// servers did not sign, or of another node's key.
func TestNodesMintOnlyWhatTheyMay(t *testing.T) {
	r := mustKeyring(t, 1, testKey(1, 9))
	s, secret := nodeSigner(t, r, "n1", 1_500_000)
	for name, mutate := range map[string]func(*Claims){
		"an AM token":         func(c *Claims) { c.Kind = KindAM },
		"a guaranteed one":    func(c *Claims) { c.ExecutionType = scheduler.Guaranteed },
		"a join token":        func(c *Claims) { c.Kind, c.ExecutionType = KindJoin, "" },
		"past its cert's end": func(c *Claims) { c.Expiry = 1_500_000 + int64(ContainerTokenLifetime) + 1 },
	} {
		c := oppClaims
		mutate(&c)
		if _, err := s.SignBatch([]Claims{c}, 1_000); !errors.Is(err, ErrNotAllowed) {
			t.Fatalf("%s: %v", name, err)
		}
	}
	if _, err := s.SignBatch([]Claims{oppClaims}, 1_500_000); !errors.Is(err, ErrNoSigningKey) {
		t.Fatalf("minting with an expired certificate: %v", err)
	}

	// A node that signs an AM token anyway (a rogue agent) is refused by
	// every verifier.
	rogue := *s
	forged, err := signClaims(rogue.key, []Claims{func() Claims { c := oppClaims; c.Kind = KindAM; return c }()}, func(c *Claims) {
		c.KeyID, c.Minter, c.cert = rogue.cert.KeyID, rogue.cert.NodeID, rogue.raw
	})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := r.Verify(forged[0], 1_000); !errors.Is(err, ErrNotAllowed) {
		t.Fatalf("a node-minted AM token: %v", err)
	}

	// A certificate from another cluster's keys, or of another key.
	other := mustKeyring(t, 1, testKey(1, 8))
	pub, _ := NodePublicKey(secret)
	foreign, _ := other.CertifyNode("n1", pub, 1_500_000)
	if _, err := NewNodeSigner("n1", secret, foreign, r.Verifier); !errors.Is(err, ErrBadSignature) {
		t.Fatalf("a foreign certificate: %v", err)
	}
	otherSecret, _ := NewNodeKey()
	good, _ := r.CertifyNode("n1", pub, 1_500_000)
	if _, err := NewNodeSigner("n1", otherSecret, good, r.Verifier); err == nil || !strings.Contains(err.Error(), "another key") {
		t.Fatalf("another key's certificate: %v", err)
	}
	if _, err := NewNodeSigner("n9", secret, good, r.Verifier); err == nil {
		t.Fatal("another node's certificate was accepted")
	}
	if _, err := r.CertifyNode("n1", []byte("short"), 1); err == nil {
		t.Fatal("a short public key was certified")
	}
}

// A token whose certificate was swapped for another node's (the claims
// body changes) no longer verifies.
func TestSwappedCertificateBreaksTheToken(t *testing.T) {
	r := mustKeyring(t, 1, testKey(1, 9))
	s1, _ := nodeSigner(t, r, "n1", 1_500_000)
	s2, _ := nodeSigner(t, r, "n2", 1_500_000)
	toks, _ := s1.SignBatch([]Claims{oppClaims}, 1)
	p, _ := parseToken(toks[0])
	body := bytes.Replace(p.body, s1.raw, s2.raw, 1)
	if bytes.Equal(body, p.body) {
		t.Fatal("certificate not found in the body")
	}
	swapped := tokenEncoding.EncodeToString(encodeToken(body, p.index, p.count, p.path, p.sig))
	if _, err := r.Verify(swapped, 1); !errors.Is(err, ErrBadSignature) {
		t.Fatalf("swapped certificate: %v", err)
	}
}
