package main

import (
	"bytes"
	"crypto/x509"
	"encoding/pem"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/weft-sched/weft/internal/testutil"
	"github.com/weft-sched/weft/internal/tlsutil"
	"github.com/weft-sched/weft/server"
)

// runCmd runs the weft command line in process and returns its exit code
// and what it printed.
func runCmd(t *testing.T, args ...string) (code int, out, errOut string) {
	t.Helper()
	var o, e bytes.Buffer
	oldOut, oldErr := stdout, stderr
	stdout, stderr = &o, &e
	defer func() { stdout, stderr = oldOut, oldErr }()
	code = run(args)
	return code, o.String(), e.String()
}

func TestTLSCommandsMakeAWorkingSet(t *testing.T) {
	dir := t.TempDir()
	code, out, errOut := runCmd(t, "tls", "ca", "create", "-dir", dir, "-days", "30")
	ca, caKey := filepath.Join(dir, tlsutil.CAFileName), filepath.Join(dir, tlsutil.CAKeyFileName)
	if code != 0 || !strings.Contains(out, ca) || !strings.Contains(out, caKey) {
		t.Fatalf("ca create: exit %d, out %q, err %q", code, out, errOut)
	}
	caBefore, _ := os.ReadFile(caKey)
	if code, _, errOut := runCmd(t, "tls", "ca", "create", "-dir", dir); code != 1 || !strings.Contains(errOut, "already exists") {
		t.Fatalf("a second ca create: exit %d, %q", code, errOut)
	}
	if after, _ := os.ReadFile(caKey); !bytes.Equal(caBefore, after) {
		t.Fatal("the CA key was overwritten")
	}

	for _, role := range tlsutil.Roles {
		code, out, errOut := runCmd(t, "tls", "cert", "create", "-"+string(role), "-dir", dir,
			"-additional-dnsname", "weft.example.com", "-additional-ipaddress", "10.0.0.7")
		cert, key := tlsutil.CertFileNames(role, "global")
		if code != 0 || !strings.Contains(out, filepath.Join(dir, cert)) || !strings.Contains(out, filepath.Join(dir, key)) {
			t.Fatalf("cert create -%s: exit %d, out %q, err %q", role, code, out, errOut)
		}
		tc, err := tlsutil.New(ca, filepath.Join(dir, cert), filepath.Join(dir, key), "global")
		if err != nil || tc.Role() != role {
			t.Fatalf("the %s certificate loads as %v, %v", role, tc, err)
		}
		pair, _ := os.ReadFile(filepath.Join(dir, cert))
		if !bytes.Contains(pair, []byte("CERTIFICATE")) {
			t.Fatalf("%s is not a PEM certificate", cert)
		}
	}
	leaf := certOf(t, filepath.Join(dir, "global-server-weft.pem"))
	if !slices.Contains(leaf.DNSNames, "weft.example.com") || !slices.ContainsFunc(leaf.IPAddresses, func(ip net.IP) bool { return ip.Equal(net.ParseIP("10.0.0.7")) }) {
		t.Fatalf("extra SANs missing: %v %v", leaf.DNSNames, leaf.IPAddresses)
	}
	if code, _, errOut := runCmd(t, "tls", "cert", "create", "-server", "-dir", dir); code != 1 || !strings.Contains(errOut, "already exists") {
		t.Fatalf("a second server cert: exit %d, %q", code, errOut)
	}

	for _, bad := range [][]string{
		{"tls", "cert", "create", "-dir", dir},
		{"tls", "cert", "create", "-server", "-client", "-dir", t.TempDir(), "-ca", ca, "-key", caKey},
		{"tls", "cert", "create", "-agent", "-additional-ipaddress", "ten", "-dir", t.TempDir(), "-ca", ca, "-key", caKey},
		{"tls", "cert", "create", "-agent", "-days", "0"},
		{"tls", "ca", "create", "-region", "a/b", "-dir", t.TempDir()},
		{"tls", "ca", "remove"},
	} {
		if code, _, errOut := runCmd(t, bad...); code != 2 {
			t.Errorf("%q: exit %d (%q), want 2 (usage)", bad, code, errOut)
		}
	}
}

// tlsSet is a CA and certificates made by the weft command line.
type tlsSet struct{ dir, ca string }

func makeTLSSet(t *testing.T) tlsSet {
	dir := t.TempDir()
	if code, _, errOut := runCmd(t, "tls", "ca", "create", "-dir", dir); code != 0 {
		t.Fatal(errOut)
	}
	for _, role := range []string{"-server", "-client", "-agent"} {
		if code, _, errOut := runCmd(t, "tls", "cert", "create", role, "-dir", dir); code != 0 {
			t.Fatal(errOut)
		}
	}
	return tlsSet{dir: dir, ca: filepath.Join(dir, tlsutil.CAFileName)}
}

func (s tlsSet) file(name string) string { return filepath.Join(s.dir, name) }

func TestClientCommandsSpeakTLS(t *testing.T) {
	set := makeTLSSet(t)
	tc, err := tlsutil.New(set.ca, set.file("global-server-weft.pem"), set.file("global-server-weft-key.pem"), "global")
	if err != nil {
		t.Fatal(err)
	}
	logger, _ := testutil.Logger(t, hclog.Warn)
	srv, err := server.New(&server.Config{NodeID: "s1", DataDir: t.TempDir(), RPCPort: -1, SerfPort: -1,
		BootstrapExpect: 1, Logger: logger, TLS: tc})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { srv.Shutdown() })
	testutil.WaitFor(t, 15*time.Second, srv.IsLeader)

	addr := srv.RPCAddr()
	withFlags := []string{"-address", addr, "-ca-cert", set.ca,
		"-client-cert", set.file("global-client-weft.pem"), "-client-key", set.file("global-client-weft-key.pem")}
	testutil.WaitForNoError(t, 15*time.Second, "weft status over TLS", func() error {
		if code, _, errOut := runCmd(t, append([]string{"status"}, withFlags...)...); code != 0 {
			return &usageError{errOut}
		}
		return nil
	})
	// The same from the environment.
	t.Setenv("WEFT_CACERT", set.ca)
	t.Setenv("WEFT_CLIENT_CERT", set.file("global-client-weft.pem"))
	t.Setenv("WEFT_CLIENT_KEY", set.file("global-client-weft-key.pem"))
	if code, out, errOut := runCmd(t, "members", "-address", addr); code != 0 || !strings.Contains(out, "s1") {
		t.Fatalf("members with TLS from the environment: exit %d, %q, %q", code, out, errOut)
	}
	// Without a client certificate the server does not answer.
	t.Setenv("WEFT_CLIENT_CERT", "")
	t.Setenv("WEFT_CLIENT_KEY", "")
	if code, _, _ := runCmd(t, "members", "-address", addr); code != 1 {
		t.Fatalf("members without a client certificate: exit %d, want 1", code)
	}
	// Nor in plaintext.
	t.Setenv("WEFT_CACERT", "")
	if code, _, _ := runCmd(t, "members", "-address", addr); code != 1 {
		t.Fatalf("members in plaintext: exit %d, want 1", code)
	}
	// A certificate without the CA is a usage error.
	if code, _, errOut := runCmd(t, "members", "-address", addr, "-client-cert", set.file("global-client-weft.pem")); code != 2 || !strings.Contains(errOut, "need -ca-cert") {
		t.Fatalf("-client-cert alone: exit %d, %q", code, errOut)
	}
}

func TestSIGHUPReloadsCertificates(t *testing.T) {
	set := makeTLSSet(t)
	cert, key := set.file("global-agent-weft.pem"), set.file("global-agent-weft-key.pem")
	tc, err := tlsutil.New(set.ca, cert, key, "global")
	if err != nil {
		t.Fatal(err)
	}
	logger, logs := testutil.Logger(t, hclog.Info)
	stop := reloadOnSIGHUP(logger, tc)
	defer stop()
	expiry := tc.Expiry()

	// A new certificate (shorter-lived) replaces the old files.
	fresh := t.TempDir()
	if code, _, errOut := runCmd(t, "tls", "cert", "create", "-agent", "-days", "10", "-dir", fresh, "-ca", set.ca, "-key", set.file(tlsutil.CAKeyFileName)); code != 0 {
		t.Fatal(errOut)
	}
	for src, dst := range map[string]string{filepath.Join(fresh, "global-agent-weft.pem"): cert, filepath.Join(fresh, "global-agent-weft-key.pem"): key} {
		data, err := os.ReadFile(src)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(dst, data, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	if err := syscall.Kill(os.Getpid(), syscall.SIGHUP); err != nil {
		t.Fatal(err)
	}
	testutil.WaitFor(t, 5*time.Second, func() bool { return logs.Contains("TLS certificates reloaded") })
	if !tc.Expiry().Before(expiry) {
		t.Fatalf("expiry %v after reload, was %v: the new certificate is not in use", tc.Expiry(), expiry)
	}

	// A broken key: logged, and the certificate in use stays.
	if err := os.WriteFile(key, []byte("garbage"), 0o600); err != nil {
		t.Fatal(err)
	}
	inUse := tc.Expiry()
	if err := syscall.Kill(os.Getpid(), syscall.SIGHUP); err != nil {
		t.Fatal(err)
	}
	testutil.WaitFor(t, 5*time.Second, func() bool { return logs.Contains("TLS certificates NOT reloaded") })
	if tc.Expiry() != inUse || tc.Role() != tlsutil.RoleAgent {
		t.Fatal("a failed reload changed the certificate in use")
	}
}

func certOf(t *testing.T, path string) *x509.Certificate {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	block, _ := pem.Decode(data)
	if block == nil {
		t.Fatalf("%s holds no PEM block", path)
	}
	c, err := x509.ParseCertificate(block.Bytes)
	if err != nil {
		t.Fatal(err)
	}
	return c
}
