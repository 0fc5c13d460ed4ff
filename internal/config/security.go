package config

import (
	"fmt"
	"net"
	"strconv"
	"strings"
	"time"

	"github.com/weft-sched/weft/scheduler"
)

// TLS is the `tls { ... }` block of a server, agent or router (SPEC §15):
// the CA that signs every weft certificate and this process's own
// certificate and key. TLS is on when all three files are given.
type TLS struct {
	CAFile   string `hcl:"ca_file,optional"`
	CertFile string `hcl:"cert_file,optional"`
	KeyFile  string `hcl:"key_file,optional"`
}

// Enabled reports whether the block turns TLS on.
func (t *TLS) Enabled() bool { return t != nil && t.CAFile != "" }

func (t *TLS) validate() error {
	if t == nil || (t.CAFile == "" && t.CertFile == "" && t.KeyFile == "") {
		return nil
	}
	switch {
	case t.CAFile == "":
		return fmt.Errorf("tls.ca_file is required when tls.cert_file or tls.key_file is given")
	case t.CertFile == "":
		return fmt.Errorf("tls.cert_file is required with tls.ca_file")
	case t.KeyFile == "":
		return fmt.Errorf("tls.key_file is required with tls.ca_file")
	}
	return nil
}

// ACL is the `acl { ... }` block of a server (SPEC §15).
type ACL struct {
	Enabled bool `hcl:"enabled,optional"`
}

// Limits is the `limits { ... }` block. Zero fields take the
// defaults below. A client is a source IP and the role its certificate
// proves (rpc.Limits).
type Limits struct {
	// RPCMaxConnsPerClient bounds the connections one client may hold
	// open to the RPC port at once, past their handshake.
	RPCMaxConnsPerClient int `hcl:"rpc_max_conns_per_client,optional"`
	// RPCMaxHandshakesPerClient bounds the connections one source IP may
	// hold open while still in their handshake.
	RPCMaxHandshakesPerClient int `hcl:"rpc_max_handshakes_per_client,optional"`
	// RPCHandshakeTimeout bounds how long a new connection may take to
	// deliver its first whole request (type byte, TLS handshake included).
	RPCHandshakeTimeout string `hcl:"rpc_handshake_timeout,optional"`
	// RPCIdleTimeout closes a connection that carried no request for this
	// long.
	RPCIdleTimeout string `hcl:"rpc_idle_timeout,optional"`
	// RPCMaxStreamsPerConn bounds the multiplexed streams one connection
	// may hold open.
	RPCMaxStreamsPerConn int `hcl:"rpc_max_streams_per_conn,optional"`
	// RPCRequestMemoryMB bounds the memory the process holds for requests
	// (MiB); callers without a server, agent or router certificate share
	// at most half of it. RPCRequestMemoryPerClientMB and
	// RPCRequestMemoryPerConnMB bound one client's and one connection's
	// share: a caller past one is cut off.
	RPCRequestMemoryMB          int `hcl:"rpc_request_memory_mb,optional"`
	RPCRequestMemoryPerClientMB int `hcl:"rpc_request_memory_per_client_mb,optional"`
	RPCRequestMemoryPerConnMB   int `hcl:"rpc_request_memory_per_conn_mb,optional"`
}

// Limit defaults: rpc.DefaultLimits' (cmd/weft's TestLimitsBlockReachesTheListener checks).
const (
	DefaultRPCMaxConnsPerClient      = 100
	DefaultRPCMaxHandshakesPerClient = 32
	DefaultRPCHandshakeTimeout       = 5 * time.Second
	DefaultRPCIdleTimeout            = 5*time.Minute + 30*time.Second // longer than the longest blocking query
	DefaultRPCMaxStreamsPerConn      = 256
	DefaultRPCRequestMemoryMB        = 256
	DefaultRPCRequestMemoryPerClient = 48
	DefaultRPCRequestMemoryPerConn   = 24
)

// ResolvedLimits is a Limits block with defaults applied, durations
// parsed and memory in bytes.
type ResolvedLimits struct {
	MaxConnsPerClient      int
	MaxHandshakesPerClient int
	HandshakeTimeout       time.Duration
	IdleTimeout            time.Duration
	MaxStreamsPerConn      int
	RequestMemory          int64
	RequestMemoryPerClient int64
	RequestMemoryPerConn   int64
}

// Resolve applies the defaults; Validate has checked the values.
func (l *Limits) Resolve() ResolvedLimits {
	r := ResolvedLimits{
		MaxConnsPerClient:      DefaultRPCMaxConnsPerClient,
		MaxHandshakesPerClient: DefaultRPCMaxHandshakesPerClient,
		HandshakeTimeout:       DefaultRPCHandshakeTimeout,
		IdleTimeout:            DefaultRPCIdleTimeout,
		MaxStreamsPerConn:      DefaultRPCMaxStreamsPerConn,
		RequestMemory:          DefaultRPCRequestMemoryMB << 20,
		RequestMemoryPerClient: DefaultRPCRequestMemoryPerClient << 20,
		RequestMemoryPerConn:   DefaultRPCRequestMemoryPerConn << 20,
	}
	if l == nil {
		return r
	}
	if l.RPCMaxConnsPerClient > 0 {
		r.MaxConnsPerClient = l.RPCMaxConnsPerClient
	}
	if l.RPCMaxHandshakesPerClient > 0 {
		r.MaxHandshakesPerClient = l.RPCMaxHandshakesPerClient
	}
	if d, err := time.ParseDuration(l.RPCHandshakeTimeout); err == nil && d > 0 {
		r.HandshakeTimeout = d
	}
	if d, err := time.ParseDuration(l.RPCIdleTimeout); err == nil && d > 0 {
		r.IdleTimeout = d
	}
	if l.RPCMaxStreamsPerConn > 0 {
		r.MaxStreamsPerConn = l.RPCMaxStreamsPerConn
	}
	for _, m := range []struct {
		mb  int
		out *int64
	}{{l.RPCRequestMemoryMB, &r.RequestMemory}, {l.RPCRequestMemoryPerClientMB, &r.RequestMemoryPerClient}, {l.RPCRequestMemoryPerConnMB, &r.RequestMemoryPerConn}} {
		if m.mb > 0 {
			*m.out = int64(m.mb) << 20
		}
	}
	return r
}

func (l *Limits) validate() error {
	if l == nil {
		return nil
	}
	for name, v := range map[string]int{
		"rpc_max_conns_per_client": l.RPCMaxConnsPerClient, "rpc_max_handshakes_per_client": l.RPCMaxHandshakesPerClient,
		"rpc_max_streams_per_conn": l.RPCMaxStreamsPerConn, "rpc_request_memory_mb": l.RPCRequestMemoryMB,
		"rpc_request_memory_per_client_mb": l.RPCRequestMemoryPerClientMB, "rpc_request_memory_per_conn_mb": l.RPCRequestMemoryPerConnMB,
	} {
		if v < 0 {
			return fmt.Errorf("limits.%s must not be negative, not %d", name, v)
		}
	}
	for name, v := range map[string]string{"rpc_handshake_timeout": l.RPCHandshakeTimeout, "rpc_idle_timeout": l.RPCIdleTimeout} {
		if v == "" {
			continue
		}
		if d, err := time.ParseDuration(v); err != nil || d <= 0 {
			return fmt.Errorf("limits.%s: %q is not a positive duration like \"5s\"", name, v)
		}
	}
	r := l.Resolve()
	if r.RequestMemoryPerConn > r.RequestMemoryPerClient || r.RequestMemoryPerClient > r.RequestMemory/2 {
		return fmt.Errorf("limits: rpc_request_memory_per_conn_mb (%d) must not exceed rpc_request_memory_per_client_mb (%d), nor that half of rpc_request_memory_mb (%d)",
			r.RequestMemoryPerConn>>20, r.RequestMemoryPerClient>>20, r.RequestMemory>>20)
	}
	return nil
}

// DefaultRegion is the region certificates name when none is configured.
const DefaultRegion = "global"

// IsLoopback reports whether bind is a loopback address: the only place
// a process may run without TLS, a gossip key and ACLs unless -insecure
// is given (SPEC §15).
func IsLoopback(bind string) bool {
	ip := net.ParseIP(bind)
	return ip != nil && ip.IsLoopback()
}

func validateSecurity(region string, t *TLS, l *Limits) error {
	if region == "" || scheduler.ValidateNodeID(region) != nil {
		return fmt.Errorf("region (-region) %q: use letters, digits, '.', '_' and '-'", region)
	}
	if err := t.validate(); err != nil {
		return err
	}
	return l.validate()
}

// SecurityGaps lists what of SPEC §15's secure setup the server lacks.
// haveKeyring says whether its data dir holds a gossip keyring (which wins
// over encrypt).
func (c *Server) SecurityGaps(haveKeyring bool) []string {
	var gaps []string
	if !c.TLS.Enabled() {
		gaps = append(gaps, "TLS (tls { ca_file, cert_file, key_file })")
	}
	if c.Encrypt == "" && !haveKeyring {
		gaps = append(gaps, "a gossip key (encrypt / -encrypt)")
	}
	if c.ACL == nil || !c.ACL.Enabled {
		gaps = append(gaps, "ACLs (acl { enabled = true })")
	}
	return gaps
}

// SecurityGaps lists what of SPEC §15's secure setup the agent lacks;
// haveKeyring as for the server's.
func (c *Agent) SecurityGaps(haveKeyring bool) []string {
	var gaps []string
	if !c.TLS.Enabled() {
		gaps = append(gaps, "TLS (tls { ca_file, cert_file, key_file })")
	}
	if c.Encrypt == "" && !haveKeyring {
		gaps = append(gaps, "a gossip key (encrypt / -encrypt)")
	}
	return gaps
}

// CheckSecure applies SPEC §15's secure default to a process bound to
// bind that lacks gaps: on a loopback address it may run open; elsewhere
// only with insecure set. The returned warning, if not empty, is what the
// process must log at start and every InsecureWarningInterval.
func CheckSecure(what, bind string, gaps []string, insecure bool) (warning string, err error) {
	if len(gaps) == 0 {
		return "", nil
	}
	lacks := strings.Join(gaps, ", ")
	switch {
	case IsLoopback(bind):
		// Loopback is not private: every user and program of this machine
		// reaches it. Open on loopback is for trying weft out, and says so.
		return fmt.Sprintf("INSECURE: this %s runs on loopback (%s) without %s: every user and program of this machine can read and change the cluster and run commands on its agents; set them up (docs/security.md) on a machine others use", what, bind, lacks), nil
	case insecure:
		return fmt.Sprintf("INSECURE: this %s runs on %s without %s (-insecure): anyone who can reach it can read and change the cluster and run commands on its agents", what, bind, lacks), nil
	}
	return "", fmt.Errorf("this %s would listen on %s, which is not a loopback address, without %s: anyone who reaches it could run commands on every agent. Set them up (docs/security.md: 'weft tls ca create', 'weft operator keygen', acl { enabled = true }), or pass -insecure to run it open anyway", what, bind, lacks)
}

// InsecureWarningInterval is how often an open process repeats its
// warning.
const InsecureWarningInterval = 10 * time.Minute

// DefaultDynamicUIDRange is dynamic_uid_range unless configured: uids no
// account of a usual Linux host has (regular users end below 60000,
// systemd's dynamic users are 61184-65519, container uid ranges begin at
// 100000 or much higher).
const DefaultDynamicUIDRange = "70000-79999"

// ParseUIDRange reads dynamic_uid_range: "FIRST-LAST" (uids, inclusive;
// FIRST above 0) or "off" (0, 0: no dynamic uids).
func ParseUIDRange(s string) (first, last uint32, err error) {
	if s == "off" {
		return 0, 0, nil
	}
	a, b, ok := strings.Cut(s, "-")
	f, ferr := strconv.ParseUint(strings.TrimSpace(a), 10, 32)
	l, lerr := strconv.ParseUint(strings.TrimSpace(b), 10, 32)
	if !ok || ferr != nil || lerr != nil || f == 0 || l < f {
		return 0, 0, fmt.Errorf("dynamic_uid_range %q: give FIRST-LAST, two uids above 0 (such as %s), or off", s, DefaultDynamicUIDRange)
	}
	if f < 1000 {
		return 0, 0, fmt.Errorf("dynamic_uid_range %q: uids below 1000 belong to the system; give a range above them", s)
	}
	return uint32(f), uint32(l), nil
}
