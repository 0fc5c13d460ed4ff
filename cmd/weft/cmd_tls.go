package main

import (
	"flag"
	"fmt"
	"net"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"

	"github.com/hashicorp/go-hclog"
	"github.com/weft-sched/weft/internal/config"
	"github.com/weft-sched/weft/internal/tlsutil"
	"github.com/weft-sched/weft/rpc"
)

// runTLS is `weft tls`: a CA and certificates for mutual TLS (SPEC §15),
// as `nomad tls` makes them.
func runTLS(args []string) error {
	return subcommand("tls", args, map[string]func([]string) error{
		"ca": func(args []string) error {
			return subcommand("tls ca", args, map[string]func([]string) error{"create": runTLSCACreate})
		},
		"cert": func(args []string) error {
			return subcommand("tls cert", args, map[string]func([]string) error{"create": runTLSCertCreate})
		},
	})
}

func runTLSCACreate(args []string) error {
	fs := newFlagSet("tls ca create")
	days := fs.Int("days", tlsutil.DefaultCADays, "how many `DAYS` the CA is valid")
	region := fs.String("region", tlsutil.DefaultRegion, "`REGION` the CA is for")
	dir := fs.String("dir", ".", "`DIR` to write "+tlsutil.CAFileName+" and "+tlsutil.CAKeyFileName+" into")
	pos, err := parseArgs(fs, args)
	if err != nil {
		return err
	}
	if len(pos) > 0 {
		return usagef("usage: weft tls ca create [-days N] [-region R] [-dir D]")
	}
	if *days <= 0 {
		return usagef("-days must be positive, not %d", *days)
	}
	if err := tlsutil.ValidateRegion(*region); err != nil {
		return usagef("-region: %v", err)
	}
	cert, key, err := tlsutil.CreateCA(*dir, *region, *days)
	if err != nil {
		return err
	}
	fmt.Fprintf(stdout, "Wrote the CA certificate to %s\n", cert)
	fmt.Fprintf(stdout, "Wrote the CA key to %s (keep it offline: it signs certificates; no weft process needs it)\n", key)
	return nil
}

// stringsFlag is a repeatable string flag.
type stringsFlag []string

func (s *stringsFlag) String() string { return strings.Join(*s, ",") }
func (s *stringsFlag) Set(v string) error {
	*s = append(*s, v)
	return nil
}

func runTLSCertCreate(args []string) error {
	const usage = "usage: weft tls cert create -server|-agent|-router|-client [-region R] [-ca FILE] [-key FILE] " +
		"[-additional-dnsname NAME]... [-additional-ipaddress IP]... [-days N] [-dir D]"
	fs := newFlagSet("tls cert create")
	roles := map[tlsutil.Role]*bool{}
	for _, r := range tlsutil.Roles {
		roles[r] = fs.Bool(string(r), false, "make a certificate of the "+string(r)+" role")
	}
	region := fs.String("region", tlsutil.DefaultRegion, "`REGION` the certificate is for")
	dir := fs.String("dir", ".", "`DIR` to write the certificate and its key into")
	ca := fs.String("ca", "", "CA certificate `FILE` (default: DIR/"+tlsutil.CAFileName+")")
	caKey := fs.String("key", "", "CA key `FILE` (default: DIR/"+tlsutil.CAKeyFileName+")")
	days := fs.Int("days", tlsutil.DefaultCertDays, "how many `DAYS` the certificate is valid")
	var dnsNames, ips stringsFlag
	fs.Var(&dnsNames, "additional-dnsname", "extra DNS `NAME` in the certificate (repeatable)")
	fs.Var(&ips, "additional-ipaddress", "extra `IP` address in the certificate (repeatable)")
	pos, err := parseArgs(fs, args)
	if err != nil {
		return err
	}
	if len(pos) > 0 {
		return usagef("%s", usage)
	}
	var role tlsutil.Role
	for _, r := range tlsutil.Roles {
		if *roles[r] {
			if role != "" {
				return usagef("give one of -server, -agent, -router, -client, not both -%s and -%s", role, r)
			}
			role = r
		}
	}
	if role == "" {
		return usagef("say which role the certificate is for: -server, -agent, -router or -client; %s", usage)
	}
	if *days <= 0 {
		return usagef("-days must be positive, not %d", *days)
	}
	if err := tlsutil.ValidateRegion(*region); err != nil {
		return usagef("-region: %v", err)
	}
	req := tlsutil.CertRequest{Role: role, Region: *region, Dir: *dir, CAFile: *ca, CAKeyFile: *caKey, DNSNames: dnsNames, Days: *days}
	if req.CAFile == "" {
		req.CAFile = filepath.Join(*dir, tlsutil.CAFileName)
	}
	if req.CAKeyFile == "" {
		req.CAKeyFile = filepath.Join(*dir, tlsutil.CAKeyFileName)
	}
	for _, s := range ips {
		ip := net.ParseIP(s)
		if ip == nil {
			return usagef("-additional-ipaddress %q is not an IP address", s)
		}
		req.IPs = append(req.IPs, ip)
	}
	cert, key, err := tlsutil.CreateCert(req)
	if err != nil {
		return err
	}
	fmt.Fprintf(stdout, "Wrote the %s certificate (%s) to %s\n", role, tlsutil.RoleName(role, *region), cert)
	fmt.Fprintf(stdout, "Wrote its key to %s\n", key)
	return nil
}

// tlsConfigurator builds a server's or an agent's TLS configurator from
// its tls block: nil when the block does not turn TLS on.
func tlsConfigurator(t *config.TLS, region string) (*tlsutil.Configurator, error) {
	if !t.Enabled() {
		return nil, nil
	}
	return tlsutil.New(t.CAFile, t.CertFile, t.KeyFile, region)
}

// reloadOnSIGHUP reloads tc's files on every SIGHUP until stop is called,
// logging the outcome (a failed reload keeps the certificates in use).
func reloadOnSIGHUP(logger hclog.Logger, tc *tlsutil.Configurator) (stop func()) {
	ch := make(chan os.Signal, 1)
	signal.Notify(ch, syscall.SIGHUP)
	done := make(chan struct{})
	go func() {
		for {
			select {
			case <-ch:
				reloadTLS(logger, tc)
			case <-done:
				return
			}
		}
	}()
	return func() {
		signal.Stop(ch)
		close(done)
	}
}

func reloadTLS(logger hclog.Logger, tc *tlsutil.Configurator) {
	if tc == nil {
		logger.Info("caught SIGHUP; TLS is off, nothing to reload")
		return
	}
	if err := tc.Reload(); err != nil {
		logger.Error("caught SIGHUP; TLS certificates NOT reloaded, the previous ones stay in use", "error", err)
		return
	}
	logger.Info("caught SIGHUP; TLS certificates reloaded", "role", tc.Role(), "region", tc.Region(), "expires", tc.Expiry())
}

// Client TLS settings (SPEC §15): flags, or these environment variables.
const (
	envCACert     = rpc.EnvCACert
	envClientCert = "WEFT_CLIENT_CERT"
	envClientKey  = "WEFT_CLIENT_KEY"
)

// registerTLS registers the client's TLS flags.
func (c *clientFlags) registerTLS(fs *flag.FlagSet) {
	fs.StringVar(&c.caCert, "ca-cert", os.Getenv(envCACert), "CA certificate `FILE` that verifies the servers; turns TLS on (env "+envCACert+")")
	fs.StringVar(&c.clientCert, "client-cert", os.Getenv(envClientCert), "client certificate `FILE` (env "+envClientCert+")")
	fs.StringVar(&c.clientKey, "client-key", os.Getenv(envClientKey), "client certificate's key `FILE` (env "+envClientKey+")")
}

// pool returns the connection pool the client dials servers with: TLS,
// verifying that each holds a server certificate, when -ca-cert is given.
func (c *clientFlags) pool() (*rpc.Pool, error) {
	if c.caCert == "" {
		if c.clientCert != "" || c.clientKey != "" {
			return nil, usagef("-client-cert and -client-key need -ca-cert (or %s) too", envCACert)
		}
		return rpc.NewPool(nil), nil
	}
	tc, err := tlsutil.New(c.caCert, c.clientCert, c.clientKey, "")
	if err != nil {
		return nil, fmt.Errorf("-ca-cert, -client-cert, -client-key: %w", err)
	}
	return rpc.NewTLSPool(nil, tc, rpc.RoleServer, rpc.RoleRouter), nil // a federation's routers answer clients too
}
