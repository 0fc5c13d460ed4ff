package testutil

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/weft-sched/weft/internal/tlsutil"
)

// PKI is a certificate authority in a test's temporary directory, for
// tests of mutual TLS: it issues a fresh certificate per call.
type PKI struct {
	t         testing.TB
	Dir       string
	CAFile    string
	CAKeyFile string
	Region    string
	issued    int
}

// NewPKI makes a CA for region "global".
func NewPKI(t testing.TB) *PKI {
	t.Helper()
	dir := t.TempDir()
	ca, key, err := tlsutil.CreateCA(dir, tlsutil.DefaultRegion, 30)
	if err != nil {
		t.Fatal(err)
	}
	return &PKI{t: t, Dir: dir, CAFile: ca, CAKeyFile: key, Region: tlsutil.DefaultRegion}
}

// Cert issues a certificate of role and returns its files.
func (p *PKI) Cert(role tlsutil.Role) (cert, key string) {
	p.t.Helper()
	p.issued++
	dir := filepath.Join(p.Dir, fmt.Sprintf("cert-%d", p.issued))
	if err := os.Mkdir(dir, 0o755); err != nil {
		p.t.Fatal(err)
	}
	cert, key, err := tlsutil.CreateCert(tlsutil.CertRequest{Role: role, Region: p.Region, Dir: dir,
		CAFile: p.CAFile, CAKeyFile: p.CAKeyFile, Days: 30})
	if err != nil {
		p.t.Fatal(err)
	}
	return cert, key
}

// Configurator loads a fresh certificate of role.
func (p *PKI) Configurator(role tlsutil.Role) *tlsutil.Configurator {
	p.t.Helper()
	cert, key := p.Cert(role)
	c, err := tlsutil.New(p.CAFile, cert, key, p.Region)
	if err != nil {
		p.t.Fatal(err)
	}
	return c
}

// Anonymous is a configurator with the CA and no certificate of its own,
// as an AM in a container has.
func (p *PKI) Anonymous() *tlsutil.Configurator {
	p.t.Helper()
	c, err := tlsutil.New(p.CAFile, "", "", p.Region)
	if err != nil {
		p.t.Fatal(err)
	}
	return c
}
