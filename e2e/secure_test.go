package e2e

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// security holds the credentials of a secure e2e cluster (SPEC §15), made
// the way the README makes them: a CA and role certificates from
// `weft tls`, a gossip key from `weft operator keygen`; servers run with
// ACLs on and the client commands carry a management token from
// `weft acl bootstrap`.
type security struct {
	t         testing.TB
	pki       string
	gossipKey string
	// agentExtra is added to every agent's configuration file.
	agentExtra string
}

// newSecurity makes the certificates and the gossip key, and points every
// client command of the test at them (WEFT_CACERT, WEFT_CLIENT_CERT,
// WEFT_CLIENT_KEY).
func newSecurity(t testing.TB) *security {
	t.Helper()
	// Containers that run as their apps' uids read the CA file (the keys
	// beside it stay the owner's alone: weft tls writes them 0600).
	pki, err := os.MkdirTemp("", "weft-e2e-pki-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(pki) })
	if err := os.Chmod(pki, 0o755); err != nil {
		t.Fatal(err)
	}
	s := &security{t: t, pki: pki}
	if _, errOut, code := cli(t, "tls", "ca", "create", "-dir", s.pki); code != 0 {
		t.Fatalf("tls ca create: %s", errOut)
	}
	for _, role := range []string{"-server", "-agent", "-client"} {
		if _, errOut, code := cli(t, "tls", "cert", "create", role, "-dir", s.pki); code != 0 {
			t.Fatalf("tls cert create %s: %s", role, errOut)
		}
	}
	out, errOut, code := cli(t, "operator", "keygen")
	if code != 0 {
		t.Fatalf("operator keygen: %s", errOut)
	}
	s.gossipKey = strings.TrimSpace(out)
	t.Setenv("WEFT_CACERT", s.file("weft-agent-ca.pem"))
	t.Setenv("WEFT_CLIENT_CERT", s.file("global-client-weft.pem"))
	t.Setenv("WEFT_CLIENT_KEY", s.file("global-client-weft-key.pem"))
	t.Setenv("WEFT_TOKEN", "")
	return s
}

func (s *security) file(name string) string { return filepath.Join(s.pki, name) }

// config writes the -config file of a server, agent or router: its tls
// block, the gossip key and, for servers and routers, ACLs on.
func (s *security) config(role, name string) string {
	s.t.Helper()
	body := fmt.Sprintf("tls {\n  ca_file   = %q\n  cert_file = %q\n  key_file  = %q\n}\nencrypt = %q\n",
		s.file("weft-agent-ca.pem"), s.file("global-"+role+"-weft.pem"), s.file("global-"+role+"-weft-key.pem"), s.gossipKey)
	if role == "server" || role == "router" {
		body += "acl {\n  enabled = true\n}\n"
	}
	if role == "agent" {
		// With ACLs on, a new node registers only with a join token: the
		// agent reads this file at each attempt until join writes it.
		body += fmt.Sprintf("join_token_file = %q\n", s.joinTokenFile(name)) + s.agentExtra
	}
	path := filepath.Join(s.t.TempDir(), name+".hcl")
	if err := os.WriteFile(path, []byte(body), 0o600); err != nil {
		s.t.Fatal(err)
	}
	return path
}

// bootstrap creates the management token through addr (retrying while the
// servers elect a leader) and gives it to every later client command.
func (s *security) bootstrap(addr string) {
	s.t.Helper()
	var tok struct {
		SecretID string `json:"secret_id"`
	}
	waitFor(s.t, 30*time.Second, "ACL bootstrap", func() error {
		out, errOut, code := cli(s.t, "acl", "bootstrap", "-json", "-address", addr)
		if code != 0 {
			return fmt.Errorf("exit %d: %s", code, strings.TrimSpace(errOut))
		}
		return json.Unmarshal([]byte(out), &tok)
	})
	if tok.SecretID == "" {
		s.t.Fatal("bootstrap answered no secret")
	}
	s.t.Setenv("WEFT_TOKEN", tok.SecretID)
}

// joinTokenFile is where agent name's config file says its join token is.
func (s *security) joinTokenFile(name string) string {
	return filepath.Join(s.pki, "join-token-"+name)
}

// join makes a node-join token through addr (a server of the agents'
// cluster, with the management token bootstrap gave) and writes it where
// the named agents' configs look for it, as an operator introducing new
// nodes would.
func (s *security) join(addr string, agents ...string) {
	s.t.Helper()
	var tok struct {
		Token string `json:"token"`
	}
	waitFor(s.t, 30*time.Second, "a node-join token", func() error {
		out, errOut, code := cli(s.t, "node", "join-token", "create", "-json", "-ttl", "2h", "-address", addr)
		if code != 0 {
			return fmt.Errorf("exit %d: %s", code, strings.TrimSpace(errOut))
		}
		return json.Unmarshal([]byte(out), &tok)
	})
	for _, name := range agents {
		if err := os.WriteFile(s.joinTokenFile(name), []byte(tok.Token+"\n"), 0o600); err != nil {
			s.t.Fatal(err)
		}
	}
}
