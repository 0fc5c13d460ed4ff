package tlsutil

import (
	"crypto/tls"
	"crypto/x509"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

// pki is a CA in a temporary directory that makes certificates.
type pki struct {
	t          testing.TB
	dir        string
	ca, caKey  string
	region     string
	issueCount int
}

func newPKI(t testing.TB, region string) *pki {
	t.Helper()
	dir := t.TempDir()
	ca, key, err := CreateCA(dir, region, 30)
	if err != nil {
		t.Fatal(err)
	}
	return &pki{t: t, dir: dir, ca: ca, caKey: key, region: region}
}

// issue makes a certificate for role in region (p's by default) in a
// directory of its own, valid from now.
func (p *pki) issue(role Role, region string) (cert, key string) {
	return p.issueAt(role, region, time.Now(), 10)
}

func (p *pki) issueAt(role Role, region string, now time.Time, days int) (cert, key string) {
	p.t.Helper()
	if region == "" {
		region = p.region
	}
	p.issueCount++
	dir := filepath.Join(p.dir, strings.Repeat("c", p.issueCount))
	if err := os.Mkdir(dir, 0o755); err != nil {
		p.t.Fatal(err)
	}
	cert, key, err := createCert(CertRequest{Role: role, Region: region, Dir: dir, CAFile: p.ca, CAKeyFile: p.caKey, Days: days}, now)
	if err != nil {
		p.t.Fatal(err)
	}
	return cert, key
}

// configurator loads a fresh certificate of role from p.
func (p *pki) configurator(role Role) *Configurator {
	p.t.Helper()
	cert, key := p.issue(role, "")
	c, err := New(p.ca, cert, key, p.region)
	if err != nil {
		p.t.Fatal(err)
	}
	return c
}

type outcome struct {
	server     tls.ConnectionState
	serverErr  error
	clientErr  error
	clientSeen tls.ConnectionState
}

// handshake runs one TLS handshake over loopback TCP. The server writes a
// byte once its side succeeds, so a client certificate refused by the
// server (which TLS 1.3 reports only after the client's handshake) shows
// as a client error too.
func handshake(t *testing.T, serverCfg, clientCfg *tls.Config) outcome {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	done := make(chan outcome, 1)
	go func() {
		var o outcome
		conn, err := ln.Accept()
		if err != nil {
			o.serverErr = err
			done <- o
			return
		}
		defer conn.Close()
		conn.SetDeadline(time.Now().Add(5 * time.Second))
		s := tls.Server(conn, serverCfg)
		if o.serverErr = s.Handshake(); o.serverErr == nil {
			o.server = s.ConnectionState()
			_, o.serverErr = s.Write([]byte{1})
		}
		done <- o
	}()
	conn, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	conn.SetDeadline(time.Now().Add(5 * time.Second))
	c := tls.Client(conn, clientCfg)
	clientErr := c.Handshake()
	if clientErr == nil {
		var b [1]byte
		_, clientErr = c.Read(b[:])
	}
	o := <-done
	o.clientErr = clientErr
	if clientErr == nil {
		o.clientSeen = c.ConnectionState()
	}
	return o
}

func (o outcome) ok() bool { return o.serverErr == nil && o.clientErr == nil }

func TestCAAndCertificatesRoundTrip(t *testing.T) {
	p := newPKI(t, "global")
	for _, f := range []string{CAFileName, CAKeyFileName} {
		if _, err := os.Stat(filepath.Join(p.dir, f)); err != nil {
			t.Fatalf("CA file %s not written: %v", f, err)
		}
	}
	if fi, _ := os.Stat(p.caKey); fi.Mode().Perm() != 0o600 {
		t.Fatalf("CA key mode = %v, want 0600", fi.Mode().Perm())
	}
	for _, role := range Roles {
		cert, key := p.issue(role, "")
		wantCert, wantKey := CertFileNames(role, "global")
		if filepath.Base(cert) != wantCert || filepath.Base(key) != wantKey {
			t.Fatalf("%s files = %s, %s", role, cert, key)
		}
		if fi, _ := os.Stat(key); fi.Mode().Perm() != 0o600 {
			t.Fatalf("%s key mode = %v, want 0600", role, fi.Mode().Perm())
		}
		certs, err := readCertificates(cert)
		if err != nil {
			t.Fatal(err)
		}
		c := certs[0]
		if !slices.Contains(c.DNSNames, string(role)+".global.weft") {
			t.Fatalf("%s DNS SANs = %v", role, c.DNSNames)
		}
		serves := role != RoleClient
		if slices.Contains(c.DNSNames, "localhost") != serves || (len(c.IPAddresses) == 1 && c.IPAddresses[0].Equal(net.IPv4(127, 0, 0, 1))) != serves {
			t.Fatalf("%s SANs = %v %v", role, c.DNSNames, c.IPAddresses)
		}
		if slices.Contains(c.ExtKeyUsage, x509.ExtKeyUsageServerAuth) != serves || !slices.Contains(c.ExtKeyUsage, x509.ExtKeyUsageClientAuth) {
			t.Fatalf("%s ext key usage = %v", role, c.ExtKeyUsage)
		}
		conf, err := New(p.ca, cert, key, "global")
		if err != nil {
			t.Fatal(err)
		}
		if conf.Role() != role || conf.Region() != "global" {
			t.Fatalf("configurator of %s: role %q region %q", role, conf.Role(), conf.Region())
		}
	}

	// A server and a client certificate: a handshake, both ways verified.
	srv, cli := p.configurator(RoleServer), p.configurator(RoleClient)
	o := handshake(t, srv.IncomingConfig(), cli.OutgoingConfig(RoleServer))
	if !o.ok() {
		t.Fatalf("server %v, client %v", o.serverErr, o.clientErr)
	}
	if r, ok := srv.PeerRole(o.server); !ok || r != RoleClient {
		t.Fatalf("server sees role %q %v, want client", r, ok)
	}
	if r, ok := cli.PeerRole(o.clientSeen); !ok || r != RoleServer {
		t.Fatalf("client sees role %q %v, want server", r, ok)
	}
	if o.server.Version != tls.VersionTLS13 {
		t.Fatalf("negotiated version %x, want TLS 1.3", o.server.Version)
	}
}

func TestCreateRefusesToOverwrite(t *testing.T) {
	p := newPKI(t, "global")
	if _, _, err := CreateCA(p.dir, "global", 30); err == nil || !strings.Contains(err.Error(), "already exists") {
		t.Fatalf("second CA in the same dir: %v", err)
	}
	req := CertRequest{Role: RoleServer, Region: "global", Dir: p.dir, CAFile: p.ca, CAKeyFile: p.caKey, Days: 1}
	if _, _, err := CreateCert(req); err != nil {
		t.Fatal(err)
	}
	before, _ := os.ReadFile(filepath.Join(p.dir, "global-server-weft-key.pem"))
	if _, _, err := CreateCert(req); err == nil || !strings.Contains(err.Error(), "already exists") {
		t.Fatalf("second server cert in the same dir: %v", err)
	}
	after, _ := os.ReadFile(filepath.Join(p.dir, "global-server-weft-key.pem"))
	if string(before) != string(after) {
		t.Fatal("the key was overwritten")
	}
	// No certificate may name a second role through an extra SAN.
	req.Role, req.DNSNames = RoleClient, []string{"server.global.weft"}
	if _, _, err := CreateCert(req); err == nil || !strings.Contains(err.Error(), "names the server role") {
		t.Fatalf("client cert with a server SAN: %v", err)
	}
	if _, _, err := CreateCert(CertRequest{Role: "admin", Region: "global", Dir: t.TempDir(), CAFile: p.ca, CAKeyFile: p.caKey, Days: 1}); err == nil {
		t.Fatal("a cert of an unknown role was made")
	}
}

func TestClientCertificateCannotPassAsServer(t *testing.T) {
	p := newPKI(t, "global")
	client, agent := p.configurator(RoleClient), p.configurator(RoleAgent)
	dialer := p.configurator(RoleAgent)
	// A client certificate cannot serve: it lacks server auth.
	if o := handshake(t, client.IncomingConfig(), dialer.OutgoingConfig(RoleServer)); o.clientErr == nil {
		t.Fatal("a dialer expecting a server accepted a client certificate")
	}
	// An agent certificate serves, but is not a server's.
	o := handshake(t, agent.IncomingConfig(), dialer.OutgoingConfig(RoleServer))
	if o.clientErr == nil || !strings.Contains(o.clientErr.Error(), "server.global.weft") {
		t.Fatalf("a dialer expecting a server accepted an agent: %v", o.clientErr)
	}
	if o := handshake(t, agent.IncomingConfig(), dialer.OutgoingConfig(RoleAgent)); !o.ok() {
		t.Fatalf("agent to agent: %v / %v", o.serverErr, o.clientErr)
	}
}

// A client of a federation dials servers and routers alike: it takes a
// peer holding either role, and still refuses any other role, a client
// certificate and a certificate of another CA.
func TestDialingOneOfSeveralRoles(t *testing.T) {
	p, other := newPKI(t, "global"), newPKI(t, "global")
	dialer := p.configurator(RoleClient)
	for _, r := range []Role{RoleServer, RoleRouter} {
		if o := handshake(t, p.configurator(r).IncomingConfig(), dialer.OutgoingConfig(RoleServer, RoleRouter)); !o.ok() {
			t.Fatalf("a client taking a server or a router, to a %s: %v / %v", r, o.serverErr, o.clientErr)
		}
	}
	o := handshake(t, p.configurator(RoleAgent).IncomingConfig(), dialer.OutgoingConfig(RoleServer, RoleRouter))
	if o.clientErr == nil || !strings.Contains(o.clientErr.Error(), "not one of server.global.weft, router.global.weft") {
		t.Fatalf("a client taking a server or a router accepted an agent: %v", o.clientErr)
	}
	if o := handshake(t, p.configurator(RoleClient).IncomingConfig(), dialer.OutgoingConfig(RoleServer, RoleRouter)); o.clientErr == nil {
		t.Fatal("a client taking a server or a router accepted a client certificate")
	}
	if o := handshake(t, other.configurator(RoleRouter).IncomingConfig(), dialer.OutgoingConfig(RoleServer, RoleRouter)); o.clientErr == nil {
		t.Fatal("a client taking a server or a router accepted a router of another CA")
	}
}

func TestCertificateOfAnotherCAIsRefused(t *testing.T) {
	ours, theirs := newPKI(t, "global"), newPKI(t, "global")
	srv := ours.configurator(RoleServer)
	// Their client dialing our server.
	o := handshake(t, srv.IncomingConfig(), theirs.configurator(RoleServer).OutgoingConfig(RoleServer))
	if o.serverErr == nil || o.clientErr == nil {
		t.Fatalf("a peer of another CA was accepted: server %v, client %v", o.serverErr, o.clientErr)
	}
	// Our client dialing their server.
	o = handshake(t, theirs.configurator(RoleServer).IncomingConfig(), ours.configurator(RoleClient).OutgoingConfig(RoleServer))
	if o.clientErr == nil {
		t.Fatal("a server of another CA was accepted")
	}
	// A certificate of another CA does not load either.
	cert, key := theirs.issue(RoleServer, "")
	if _, err := New(ours.ca, cert, key, "global"); err == nil || !strings.Contains(err.Error(), "does not verify") {
		t.Fatalf("loading a certificate of another CA: %v", err)
	}
}

func TestCertificateOfAnotherRegionIsRefused(t *testing.T) {
	p := newPKI(t, "global")
	srv := p.configurator(RoleServer)
	euCert, euKey := p.issue(RoleServer, "eu")
	if _, err := New(p.ca, euCert, euKey, "global"); err == nil || !strings.Contains(err.Error(), "no single weft role") {
		t.Fatalf("loading an eu certificate for region global: %v", err)
	}
	eu, err := New(p.ca, euCert, euKey, "eu")
	if err != nil {
		t.Fatal(err)
	}
	// The same CA, but region eu: refused both ways.
	if o := handshake(t, srv.IncomingConfig(), eu.OutgoingConfig(RoleServer)); o.clientErr == nil {
		t.Fatal("an eu dialer accepted a global server")
	}
	o := handshake(t, srv.IncomingConfig(), p.withRegionDialer(t, euCert, euKey))
	if o.serverErr == nil || !strings.Contains(o.serverErr.Error(), "no weft role in region") {
		t.Fatalf("a global server accepted an eu client: %v", o.serverErr)
	}
	// New takes the region from the certificate when given none.
	if auto, err := New(p.ca, euCert, euKey, ""); err != nil || auto.Region() != "eu" || auto.Role() != RoleServer {
		t.Fatalf("region from the certificate: %v %+v", err, auto)
	}
}

// withRegionDialer dials a global server presenting the given (eu)
// certificate: what a peer from another region would do.
func (p *pki) withRegionDialer(t *testing.T, cert, key string) *tls.Config {
	pair, err := tls.LoadX509KeyPair(cert, key)
	if err != nil {
		t.Fatal(err)
	}
	dialer, err := New(p.ca, "", "", "global")
	if err != nil {
		t.Fatal(err)
	}
	c := dialer.OutgoingConfig(RoleServer)
	c.GetClientCertificate = func(*tls.CertificateRequestInfo) (*tls.Certificate, error) { return &pair, nil }
	return c
}

func TestExpiredCertificateIsRefused(t *testing.T) {
	p := newPKI(t, "global")
	srv := p.configurator(RoleServer)
	cert, key := p.issueAt(RoleAgent, "", time.Now().AddDate(0, 0, -3), 1)
	if _, err := New(p.ca, cert, key, "global"); err == nil || !strings.Contains(err.Error(), "expired") {
		t.Fatalf("loading an expired certificate: %v", err)
	}
	o := handshake(t, srv.IncomingConfig(), p.withRegionDialer(t, cert, key))
	if o.serverErr == nil || !strings.Contains(o.serverErr.Error(), "expired") {
		t.Fatalf("an expired client certificate was accepted: %v", o.serverErr)
	}
	// An expired server certificate is refused by the dialer.
	expired, err := tls.LoadX509KeyPair(cert, key)
	if err != nil {
		t.Fatal(err)
	}
	serving := &tls.Config{Certificates: []tls.Certificate{expired}}
	if o := handshake(t, serving, p.configurator(RoleClient).OutgoingConfig(RoleAgent)); o.clientErr == nil || !strings.Contains(o.clientErr.Error(), "expired") {
		t.Fatalf("an expired server certificate was accepted: %v", o.clientErr)
	}
}

func TestReloadPicksUpNewFilesAndKeepsOldOnError(t *testing.T) {
	old, next := newPKI(t, "global"), newPKI(t, "global")
	dir := t.TempDir()
	ca, cert, key := filepath.Join(dir, "ca.pem"), filepath.Join(dir, "cert.pem"), filepath.Join(dir, "key.pem")
	install := func(p *pki, role Role) {
		c, k := p.issue(role, "")
		for src, dst := range map[string]string{p.ca: ca, c: cert, k: key} {
			data, err := os.ReadFile(src)
			if err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(dst, data, 0o600); err != nil {
				t.Fatal(err)
			}
		}
	}
	install(old, RoleServer)
	srv, err := New(ca, cert, key, "global")
	if err != nil {
		t.Fatal(err)
	}
	if o := handshake(t, srv.IncomingConfig(), old.configurator(RoleClient).OutgoingConfig(RoleServer)); !o.ok() {
		t.Fatalf("before reload: %v / %v", o.serverErr, o.clientErr)
	}
	listener := srv.IncomingConfig() // a listener keeps its config across reloads

	install(next, RoleServer)
	if err := srv.Reload(); err != nil {
		t.Fatal(err)
	}
	if o := handshake(t, listener, next.configurator(RoleClient).OutgoingConfig(RoleServer)); !o.ok() {
		t.Fatalf("a client of the new CA after reload: %v / %v", o.serverErr, o.clientErr)
	}
	if o := handshake(t, listener, old.configurator(RoleClient).OutgoingConfig(RoleServer)); o.ok() {
		t.Fatal("a client of the old CA is still accepted after reload")
	}

	// A broken key: the reload fails and the loaded files stay in use.
	if err := os.WriteFile(key, []byte("not a key"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := srv.Reload(); err == nil {
		t.Fatal("reload of a broken key succeeded")
	}
	if o := handshake(t, listener, next.configurator(RoleClient).OutgoingConfig(RoleServer)); !o.ok() {
		t.Fatalf("after a failed reload: %v / %v", o.serverErr, o.clientErr)
	}
	if srv.Role() != RoleServer {
		t.Fatalf("role after a failed reload = %q", srv.Role())
	}
}

func TestOptionalClientCertificate(t *testing.T) {
	p := newPKI(t, "global")
	agent := p.configurator(RoleAgent)
	anon, err := New(p.ca, "", "", "global")
	if err != nil {
		t.Fatal(err)
	}
	o := handshake(t, agent.IncomingConfigCertOptional(), anon.OutgoingConfig(RoleAgent))
	if !o.ok() {
		t.Fatalf("a peer without a certificate: %v / %v", o.serverErr, o.clientErr)
	}
	if r, ok := agent.PeerRole(o.server); ok {
		t.Fatalf("a peer without a certificate has role %q", r)
	}
	if o := handshake(t, agent.IncomingConfig(), anon.OutgoingConfig(RoleAgent)); o.serverErr == nil {
		t.Fatal("a listener that requires certificates accepted a peer without one")
	}
	// A certificate that is given is still verified.
	o = handshake(t, agent.IncomingConfigCertOptional(), newPKI(t, "global").configurator(RoleServer).OutgoingConfig(RoleAgent))
	if o.serverErr == nil {
		t.Fatal("a certificate of another CA was accepted where certificates are optional")
	}
	if o := handshake(t, agent.IncomingConfigCertOptional(), p.configurator(RoleServer).OutgoingConfig(RoleAgent)); !o.ok() {
		t.Fatalf("a server dialing an agent: %v / %v", o.serverErr, o.clientErr)
	} else if r, _ := agent.PeerRole(o.server); r != RoleServer {
		t.Fatalf("role = %q, want server", r)
	}
	// A process without a certificate cannot serve.
	if o := handshake(t, anon.IncomingConfig(), agent.OutgoingConfig(RoleAgent)); o.serverErr == nil {
		t.Fatal("a configurator without a certificate served")
	}
}

func TestFilesAreRememberedByAbsolutePath(t *testing.T) {
	p := newPKI(t, "global")
	t.Chdir(p.dir)
	c, err := New(CAFileName, "", "", "")
	if err != nil {
		t.Fatal(err)
	}
	if !filepath.IsAbs(c.CAFile()) {
		t.Fatalf("CAFile() = %q, want an absolute path", c.CAFile())
	}
	a, _ := os.Stat(c.CAFile())
	b, _ := os.Stat(p.ca)
	if !os.SameFile(a, b) || c.Region() != DefaultRegion || c.Role() != "" {
		t.Fatalf("configurator without a certificate: %q, region %q, role %q", c.CAFile(), c.Region(), c.Role())
	}
}

// TestCARotationWithBothCAs: during a CA rotation every process trusts a
// ca_file holding both CAs, so peers with certificates of either verify.
func TestCARotationWithBothCAs(t *testing.T) {
	old, next := newPKI(t, "global"), newPKI(t, "global")
	both := filepath.Join(t.TempDir(), "both.pem")
	a, _ := os.ReadFile(old.ca)
	b, _ := os.ReadFile(next.ca)
	if err := os.WriteFile(both, append(a, b...), 0o644); err != nil {
		t.Fatal(err)
	}
	cert, key := next.issue(RoleServer, "")
	srv, err := New(both, cert, key, "global")
	if err != nil {
		t.Fatal(err)
	}
	oldCert, oldKey := old.issue(RoleClient, "")
	cli, err := New(both, oldCert, oldKey, "global")
	if err != nil {
		t.Fatal(err)
	}
	if o := handshake(t, srv.IncomingConfig(), cli.OutgoingConfig(RoleServer)); !o.ok() {
		t.Fatalf("old client, new server, both CAs trusted: %v / %v", o.serverErr, o.clientErr)
	}
	// A process that trusts only the old CA refuses the new server.
	if o := handshake(t, srv.IncomingConfig(), old.configurator(RoleClient).OutgoingConfig(RoleServer)); o.clientErr == nil {
		t.Fatal("a client trusting only the old CA accepted a server of the new one")
	}
}
