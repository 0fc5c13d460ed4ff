package tlsutil

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/sha256"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"io/fs"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"strings"
	"time"
)

// Role is what a certificate lets its holder be in a cluster. Its value
// is the first label of the certificate's role SAN.
type Role string

// The roles of SPEC §15.
const (
	RoleServer Role = "server" // may open Raft and be a Raft voter
	RoleAgent  Role = "agent"  // may register and heartbeat as a node
	RoleRouter Role = "router" // a federation router (§18)
	RoleClient Role = "client" // the CLI and other tools: a client only
)

// Roles lists every role.
var Roles = []Role{RoleServer, RoleAgent, RoleRouter, RoleClient}

// Valid reports whether r is one of Roles.
func (r Role) Valid() bool {
	for _, v := range Roles {
		if r == v {
			return true
		}
	}
	return false
}

// RoleName is the DNS SAN that names role in region: "<role>.<region>.weft".
func RoleName(role Role, region string) string { return string(role) + "." + region + ".weft" }

// Default lifetimes and file names, as `nomad tls` has them.
const (
	DefaultCADays   = 5 * 365
	DefaultCertDays = 365
	CAFileName      = "weft-agent-ca.pem"
	CAKeyFileName   = "weft-agent-ca-key.pem"
)

// CertFileNames returns the names CreateCert gives a certificate of role in
// region and its key: "<region>-<role>-weft.pem" and "…-key.pem".
func CertFileNames(role Role, region string) (cert, key string) {
	base := region + "-" + string(role) + "-weft"
	return base + ".pem", base + "-key.pem"
}

// ValidateRegion checks that region can sit inside a role SAN: letters,
// digits, '_', '-' and single dots between them (as region settings take).
func ValidateRegion(region string) error {
	if region == "" || len(region) > 200 || strings.HasPrefix(region, ".") || strings.HasSuffix(region, ".") ||
		strings.Contains(region, "..") {
		return fmt.Errorf("region %q: give letters, digits, '_', '-' and single dots between them", region)
	}
	for _, c := range region {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-' || c == '_' || c == '.') {
			return fmt.Errorf("region %q: use only letters, digits, '_', '-' and '.'", region)
		}
	}
	return nil
}

// CreateCA makes a certificate authority for region, valid for days, and
// writes its certificate (CAFileName) and key (CAKeyFileName, mode 0600)
// into dir. It returns the paths written and writes nothing if either
// file exists already.
func CreateCA(dir, region string, days int) (certPath, keyPath string, err error) {
	return createCA(dir, region, days, time.Now())
}

func createCA(dir, region string, days int, now time.Time) (string, string, error) {
	if err := ValidateRegion(region); err != nil {
		return "", "", err
	}
	if days <= 0 {
		return "", "", fmt.Errorf("days: a CA must be valid for at least one day, not %d", days)
	}
	certPath, keyPath := filepath.Join(dir, CAFileName), filepath.Join(dir, CAKeyFileName)
	if err := refuseExisting(certPath, keyPath); err != nil {
		return "", "", err
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return "", "", err
	}
	serial, err := newSerial()
	if err != nil {
		return "", "", err
	}
	tmpl := &x509.Certificate{
		SerialNumber:          serial,
		Subject:               pkix.Name{CommonName: "weft agent CA " + region, Organization: []string{"weft"}},
		NotBefore:             now.Add(-time.Minute),
		NotAfter:              now.AddDate(0, 0, days),
		IsCA:                  true,
		BasicConstraintsValid: true,
		MaxPathLenZero:        true,
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageCRLSign | x509.KeyUsageDigitalSignature,
		SubjectKeyId:          keyID(&key.PublicKey),
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return "", "", fmt.Errorf("sign CA certificate: %w", err)
	}
	if err := writePair(certPath, keyPath, der, key); err != nil {
		return "", "", err
	}
	return certPath, keyPath, nil
}

// CertRequest describes a certificate for CreateCert to make.
type CertRequest struct {
	Role   Role
	Region string
	// Dir is where the certificate and key are written.
	Dir string
	// CAFile and CAKeyFile are the CA that signs it (from CreateCA).
	CAFile, CAKeyFile string
	// DNSNames and IPs are extra SANs (a server's host name and address,
	// for tools that check them; weft peers check only the role SAN).
	DNSNames []string
	IPs      []net.IP
	// Days is how long it is valid.
	Days int
}

// CreateCert makes a certificate for req.Role in req.Region, signed by the
// CA, and writes it and its key (mode 0600) into req.Dir under the names
// of CertFileNames. Its DNS SANs are the role SAN, "localhost" for
// servers, agents and routers, and req.DNSNames; its IP SANs 127.0.0.1
// for those roles, and req.IPs. Servers, agents and routers may serve and
// dial (server and client auth); clients only dial. It expires after
// req.Days, or with its CA if that is sooner. It returns the paths
// written and writes nothing if either file exists already.
func CreateCert(req CertRequest) (certPath, keyPath string, err error) {
	return createCert(req, time.Now())
}

func createCert(req CertRequest, now time.Time) (string, string, error) {
	if !req.Role.Valid() {
		return "", "", fmt.Errorf("role %q: want one of server, agent, router, client", req.Role)
	}
	if err := ValidateRegion(req.Region); err != nil {
		return "", "", err
	}
	if req.Days <= 0 {
		return "", "", fmt.Errorf("days: a certificate must be valid for at least one day, not %d", req.Days)
	}
	for _, d := range req.DNSNames {
		if _, r, ok := splitRoleName(d); ok {
			return "", "", fmt.Errorf("additional DNS name %q names the %s role; a certificate holds the one role it is made for", d, r)
		}
	}
	caCert, caKey, err := loadCA(req.CAFile, req.CAKeyFile)
	if err != nil {
		return "", "", err
	}
	certName, keyName := CertFileNames(req.Role, req.Region)
	certPath, keyPath := filepath.Join(req.Dir, certName), filepath.Join(req.Dir, keyName)
	if err := refuseExisting(certPath, keyPath); err != nil {
		return "", "", err
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return "", "", err
	}
	serial, err := newSerial()
	if err != nil {
		return "", "", err
	}
	name := RoleName(req.Role, req.Region)
	tmpl := &x509.Certificate{
		SerialNumber:          serial,
		Subject:               pkix.Name{CommonName: name},
		NotBefore:             now.Add(-time.Minute),
		NotAfter:              now.AddDate(0, 0, req.Days),
		BasicConstraintsValid: true,
		KeyUsage:              x509.KeyUsageDigitalSignature | x509.KeyUsageKeyEncipherment,
		ExtKeyUsage:           []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
		DNSNames:              []string{name},
		SubjectKeyId:          keyID(&key.PublicKey),
		AuthorityKeyId:        caCert.SubjectKeyId,
	}
	if req.Role != RoleClient {
		tmpl.ExtKeyUsage = append(tmpl.ExtKeyUsage, x509.ExtKeyUsageServerAuth)
		tmpl.DNSNames = append(tmpl.DNSNames, "localhost")
		tmpl.IPAddresses = append(tmpl.IPAddresses, net.IPv4(127, 0, 0, 1))
	}
	tmpl.DNSNames = append(tmpl.DNSNames, req.DNSNames...)
	tmpl.IPAddresses = append(tmpl.IPAddresses, req.IPs...)
	if tmpl.NotAfter.After(caCert.NotAfter) {
		tmpl.NotAfter = caCert.NotAfter // it could not verify any longer
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, caCert, &key.PublicKey, caKey)
	if err != nil {
		return "", "", fmt.Errorf("sign certificate: %w", err)
	}
	if err := writePair(certPath, keyPath, der, key); err != nil {
		return "", "", err
	}
	return certPath, keyPath, nil
}

// loadCA reads a CA certificate and the key that signs with it.
func loadCA(certFile, keyFile string) (*x509.Certificate, crypto.Signer, error) {
	certs, err := readCertificates(certFile)
	if err != nil {
		return nil, nil, fmt.Errorf("ca file: %w", err)
	}
	ca := certs[0]
	if !ca.IsCA {
		return nil, nil, fmt.Errorf("ca file %s: not a CA certificate", certFile)
	}
	pemKey, err := os.ReadFile(keyFile)
	if err != nil {
		return nil, nil, fmt.Errorf("ca key file: %w", err)
	}
	key, err := parsePrivateKey(pemKey)
	if err != nil {
		return nil, nil, fmt.Errorf("ca key file %s: %w", keyFile, err)
	}
	if !publicKeysEqual(key.Public(), ca.PublicKey) {
		return nil, nil, fmt.Errorf("ca key file %s is not the key of ca file %s", keyFile, certFile)
	}
	return ca, key, nil
}

// readCertificates reads every certificate of a PEM file.
func readCertificates(path string) ([]*x509.Certificate, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var out []*x509.Certificate
	for {
		var block *pem.Block
		block, data = pem.Decode(data)
		if block == nil {
			break
		}
		if block.Type != "CERTIFICATE" {
			continue
		}
		c, err := x509.ParseCertificate(block.Bytes)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", path, err)
		}
		out = append(out, c)
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("%s holds no PEM certificate", path)
	}
	return out, nil
}

func parsePrivateKey(data []byte) (crypto.Signer, error) {
	for {
		var block *pem.Block
		block, data = pem.Decode(data)
		if block == nil {
			return nil, errors.New("no PEM private key found")
		}
		switch block.Type {
		case "EC PRIVATE KEY":
			return x509.ParseECPrivateKey(block.Bytes)
		case "PRIVATE KEY":
			k, err := x509.ParsePKCS8PrivateKey(block.Bytes)
			if err != nil {
				return nil, err
			}
			s, ok := k.(crypto.Signer)
			if !ok {
				return nil, fmt.Errorf("unsupported private key type %T", k)
			}
			return s, nil
		}
	}
}

func publicKeysEqual(a crypto.PublicKey, b any) bool {
	e, ok := a.(interface{ Equal(crypto.PublicKey) bool })
	return ok && e.Equal(b)
}

// refuseExisting fails if any path exists: weft never overwrites a key.
func refuseExisting(paths ...string) error {
	for _, p := range paths {
		if _, err := os.Lstat(p); err == nil {
			return fmt.Errorf("%s already exists; remove it or write into another directory", p)
		} else if !errors.Is(err, fs.ErrNotExist) {
			return err
		}
	}
	return nil
}

// writePair writes a certificate (0644) and its key (0600), each with
// O_EXCL so that a file that appeared meanwhile is never overwritten.
func writePair(certPath, keyPath string, der []byte, key *ecdsa.PrivateKey) error {
	keyDER, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		return err
	}
	if err := writeExclusive(keyPath, pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: keyDER}), 0o600); err != nil {
		return err
	}
	if err := writeExclusive(certPath, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o644); err != nil {
		os.Remove(keyPath)
		return err
	}
	return nil
}

func writeExclusive(path string, data []byte, mode os.FileMode) error {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, mode)
	if err != nil {
		return err
	}
	if _, err := f.Write(data); err != nil {
		f.Close()
		os.Remove(path)
		return err
	}
	if err := f.Close(); err != nil {
		os.Remove(path)
		return err
	}
	return nil
}

func newSerial() (*big.Int, error) {
	return rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 128))
}

func keyID(pub *ecdsa.PublicKey) []byte {
	der, err := x509.MarshalPKIXPublicKey(pub)
	if err != nil {
		return nil
	}
	sum := sha256.Sum256(der)
	return sum[:20]
}
