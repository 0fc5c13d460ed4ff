package tlsutil

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"time"
)

// DefaultRegion is the region of a configurator given none and no
// certificate to take one from.
const DefaultRegion = "global"

// Configurator turns a CA file, a certificate and its key into the TLS
// configurations of one process, for its region. It is safe for
// concurrent use; Reload swaps the files' contents atomically.
type Configurator struct {
	region                    string
	caFile, certFile, keyFile string
	cur                       atomic.Pointer[material]
}

// material is what the files held at the last successful load.
type material struct {
	roots *x509.CertPool
	cert  *tls.Certificate // nil for a process without a certificate
	role  Role             // the role cert holds in the region
}

// New loads caFile, certFile and keyFile for a process of region. certFile
// and keyFile may both be empty for a process that only dials and has no
// certificate of its own (an AM inside a container); such a configurator
// cannot serve. An empty region is the one the certificate names, or
// DefaultRegion without one. The certificate must be signed by the CA,
// valid now, and name exactly one role in the region.
func New(caFile, certFile, keyFile, region string) (*Configurator, error) {
	switch {
	case caFile == "":
		return nil, errors.New("tls: ca_file is required")
	case (certFile == "") != (keyFile == ""):
		return nil, errors.New("tls: cert_file and key_file go together: give both or neither")
	}
	if region == "" {
		region = DefaultRegion
		if certFile != "" {
			certs, err := readCertificates(certFile)
			if err != nil {
				return nil, fmt.Errorf("tls: cert_file: %w", err)
			}
			if r, ok := regionOf(certs[0]); ok {
				region = r
			}
		}
	}
	if err := ValidateRegion(region); err != nil {
		return nil, fmt.Errorf("tls: %w", err)
	}
	// Absolute paths: Reload and the processes CAFile is handed to (AMs,
	// in their own working directories) read them from elsewhere.
	c := &Configurator{region: region, caFile: absPath(caFile), certFile: absPath(certFile), keyFile: absPath(keyFile)}
	if err := c.Reload(); err != nil {
		return nil, err
	}
	return c, nil
}

func absPath(p string) string {
	if p == "" {
		return ""
	}
	if abs, err := filepath.Abs(p); err == nil {
		return abs
	}
	return p
}

// Reload reads the files again and, if they are sound (as New requires),
// uses them for every handshake from now on. If they are not, it returns
// why and the files loaded before stay in use. Connections already open
// are not affected.
func (c *Configurator) Reload() error {
	m, err := c.load()
	if err != nil {
		return err
	}
	c.cur.Store(m)
	return nil
}

func (c *Configurator) load() (*material, error) {
	pemCA, err := os.ReadFile(c.caFile)
	if err != nil {
		return nil, fmt.Errorf("tls: ca_file: %w", err)
	}
	roots := x509.NewCertPool()
	if !roots.AppendCertsFromPEM(pemCA) {
		return nil, fmt.Errorf("tls: ca_file %s holds no PEM certificate", c.caFile)
	}
	m := &material{roots: roots}
	if c.certFile == "" {
		return m, nil
	}
	pair, err := tls.LoadX509KeyPair(c.certFile, c.keyFile)
	if err != nil {
		return nil, fmt.Errorf("tls: cert_file %s and key_file %s: %w", c.certFile, c.keyFile, err)
	}
	leaf := pair.Leaf
	if leaf == nil {
		if leaf, err = x509.ParseCertificate(pair.Certificate[0]); err != nil {
			return nil, fmt.Errorf("tls: cert_file %s: %w", c.certFile, err)
		}
		pair.Leaf = leaf
	}
	inter := x509.NewCertPool()
	for _, der := range pair.Certificate[1:] {
		if ic, err := x509.ParseCertificate(der); err == nil {
			inter.AddCert(ic)
		}
	}
	if _, err := leaf.Verify(x509.VerifyOptions{Roots: roots, Intermediates: inter,
		KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageAny}}); err != nil {
		return nil, fmt.Errorf("tls: cert_file %s does not verify against ca_file %s: %w", c.certFile, c.caFile, err)
	}
	role, ok := roleOf(leaf, c.region)
	if !ok {
		return nil, fmt.Errorf("tls: cert_file %s names no single weft role in region %q (want a SAN like %s)",
			c.certFile, c.region, RoleName(RoleServer, c.region))
	}
	m.cert, m.role = &pair, role
	return m, nil
}

// CAFile is the absolute path of the CA file, to hand to processes (an AM in a
// container) that dial this one's peers without a certificate of their own.
func (c *Configurator) CAFile() string { return c.caFile }

// Region is the region whose role SANs this configurator checks.
func (c *Configurator) Region() string { return c.region }

// Role is the role this process's own certificate holds ("" without one).
func (c *Configurator) Role() Role { return c.cur.Load().role }

// Expiry is when this process's own certificate expires (zero without one).
func (c *Configurator) Expiry() time.Time {
	if m := c.cur.Load(); m.cert != nil {
		return m.cert.Leaf.NotAfter
	}
	return time.Time{}
}

// IncomingConfig is the TLS configuration of a listener that requires a
// client certificate: it serves this process's certificate and accepts
// only peers whose certificate the CA signed, is valid now and names a
// role in this region. TLS 1.2 at least; 1.3 when the peer has it. Each
// handshake uses the files of the last successful load.
func (c *Configurator) IncomingConfig() *tls.Config {
	return c.incoming(tls.RequireAndVerifyClientCert)
}

// IncomingConfigCertOptional is IncomingConfig for a listener that also
// serves peers without a certificate (an agent's port, which AMs in
// containers reach): a certificate that is given is verified as
// IncomingConfig does, and a peer without one has no role.
func (c *Configurator) IncomingConfigCertOptional() *tls.Config {
	return c.incoming(tls.VerifyClientCertIfGiven)
}

func (c *Configurator) incoming(auth tls.ClientAuthType) *tls.Config {
	return &tls.Config{
		MinVersion: tls.VersionTLS12,
		GetConfigForClient: func(*tls.ClientHelloInfo) (*tls.Config, error) {
			m := c.cur.Load()
			if m.cert == nil {
				return nil, errors.New("this process has no certificate to serve")
			}
			return &tls.Config{
				MinVersion:   tls.VersionTLS12,
				Certificates: []tls.Certificate{*m.cert},
				ClientAuth:   auth,
				ClientCAs:    m.roots,
				// A full handshake every time: a reload (a new CA) applies
				// to every connection made after it.
				SessionTicketsDisabled: true,
				VerifyConnection: func(cs tls.ConnectionState) error {
					if len(cs.PeerCertificates) == 0 {
						return nil // only VerifyClientCertIfGiven lets one through
					}
					if _, ok := c.PeerRole(cs); !ok {
						return fmt.Errorf("client certificate %q names no weft role in region %q",
							cs.PeerCertificates[0].Subject.CommonName, c.region)
					}
					return nil
				},
			}, nil
		},
	}
}

// OutgoingConfig is the TLS configuration for dialing a peer that must
// hold role (or one of also): the peer's certificate must be signed by the
// CA, valid now and carry the SAN RoleName(role, region). This process's
// certificate, if it has one, is presented as the client certificate.
// Build one per connection: it holds the files of the last successful
// load.
func (c *Configurator) OutgoingConfig(role Role, also ...Role) *tls.Config {
	m := c.cur.Load()
	if len(also) > 0 {
		return c.outgoingAny(m, append([]Role{role}, also...))
	}
	return &tls.Config{
		MinVersion: tls.VersionTLS12,
		RootCAs:    m.roots,
		ServerName: RoleName(role, c.region),
		GetClientCertificate: func(*tls.CertificateRequestInfo) (*tls.Certificate, error) {
			if m.cert == nil {
				return &tls.Certificate{}, nil // none: the server decides
			}
			return m.cert, nil
		},
	}
}

// outgoingAny is OutgoingConfig for a peer that may hold any of roles (a
// client talking to servers or a federation's routers). crypto/tls checks
// one name, so the chain and the role are checked here instead: the same
// verification, with the peer's one role (roleOf) in place of the name.
func (c *Configurator) outgoingAny(m *material, roles []Role) *tls.Config {
	return &tls.Config{
		MinVersion:         tls.VersionTLS12,
		RootCAs:            m.roots,
		InsecureSkipVerify: true, // verified by VerifyConnection below
		VerifyConnection: func(cs tls.ConnectionState) error {
			if len(cs.PeerCertificates) == 0 {
				return errors.New("the peer gave no certificate")
			}
			inter := x509.NewCertPool()
			for _, ic := range cs.PeerCertificates[1:] {
				inter.AddCert(ic)
			}
			leaf := cs.PeerCertificates[0]
			if _, err := leaf.Verify(x509.VerifyOptions{Roots: m.roots, Intermediates: inter,
				KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}}); err != nil {
				return err
			}
			role, ok := roleOf(leaf, c.region)
			for _, r := range roles {
				if ok && role == r {
					return nil
				}
			}
			names := make([]string, len(roles))
			for i, r := range roles {
				names[i] = RoleName(r, c.region)
			}
			return fmt.Errorf("x509: certificate is valid for %s, not one of %s", strings.Join(leaf.DNSNames, ", "), strings.Join(names, ", "))
		},
		GetClientCertificate: func(*tls.CertificateRequestInfo) (*tls.Certificate, error) {
			if m.cert == nil {
				return &tls.Certificate{}, nil // none: the server decides
			}
			return m.cert, nil
		},
	}
}

// PeerRole returns the role that the peer's verified certificate holds in
// this region. It is false when the peer gave no certificate, when its
// chain was not verified, or when the certificate names no role (or more
// than one) in this region.
func (c *Configurator) PeerRole(cs tls.ConnectionState) (Role, bool) {
	if len(cs.VerifiedChains) == 0 || len(cs.VerifiedChains[0]) == 0 {
		return "", false
	}
	return roleOf(cs.VerifiedChains[0][0], c.region)
}

// roleOf is the one role cert names in region.
func roleOf(cert *x509.Certificate, region string) (Role, bool) {
	var found Role
	for _, r := range Roles {
		name := RoleName(r, region)
		for _, d := range cert.DNSNames {
			if strings.EqualFold(d, name) {
				if found != "" && found != r {
					return "", false // ambiguous: trust neither
				}
				found = r
			}
		}
	}
	return found, found != ""
}

// regionOf is the region of the first role SAN of cert.
func regionOf(cert *x509.Certificate) (string, bool) {
	for _, d := range cert.DNSNames {
		if r, _, ok := splitRoleName(d); ok {
			return r, true
		}
	}
	return "", false
}

// splitRoleName parses "<role>.<region>.weft".
func splitRoleName(name string) (region string, role Role, ok bool) {
	if len(name) < len(".weft") || !strings.EqualFold(name[len(name)-len(".weft"):], ".weft") {
		return "", "", false
	}
	first, region, found := strings.Cut(name[:len(name)-len(".weft")], ".")
	role = Role(strings.ToLower(first))
	if !found || !role.Valid() || region == "" {
		return "", "", false
	}
	return region, role, true
}
