package config

import (
	"errors"
	"fmt"
	"net"
	"strings"

	"github.com/hashicorp/go-hclog"
	"github.com/weft-sched/weft/scheduler"
)

// Server is the configuration of `weft server`. Each field is one setting:
// `hcl` names it in a -config file, `flag` on the command line.
type Server struct {
	NodeID          string   `hcl:"node_id,optional" flag:"node-id" help:"ID of this server (default: the hostname)"`
	DataDir         string   `hcl:"data_dir,optional" flag:"data-dir" help:"directory for the Raft log, snapshots and serf state (required)"`
	Bind            string   `hcl:"bind,optional" flag:"bind" help:"IP address to listen on and advertise"`
	RPCPort         int      `hcl:"rpc_port,optional" flag:"rpc-port" help:"port for msgpack RPC and Raft"`
	SerfPort        int      `hcl:"serf_port,optional" flag:"serf-port" help:"port for serf gossip (TCP and UDP)"`
	HTTPPort        int      `hcl:"http_port,optional" flag:"http-port" help:"port for the HTTP API, metrics and web UI (HTTPS when TLS is on); 0 turns it off, -1 picks a free port"`
	BootstrapExpect int      `hcl:"bootstrap_expect,optional" flag:"bootstrap-expect" help:"bootstrap Raft once this many servers (with the same value) see each other"`
	Join            []string `hcl:"join,optional" flag:"join" help:"serf address of any cluster member to join (repeatable)"`
	LogLevel        string   `hcl:"log_level,optional" flag:"log-level" help:"log level: trace, debug, info, warn or error"`
	Region          string   `hcl:"region,optional" flag:"region" help:"region this server belongs to; certificates name it (server.REGION.weft)"`
	Encrypt         string   `hcl:"encrypt,optional" flag:"encrypt" help:"gossip encryption key (base64 of 32 bytes, from 'weft operator keygen')"`
	Insecure        bool     `hcl:"insecure,optional" flag:"insecure" help:"run without TLS, a gossip key or ACLs on a non-loopback address (anyone who reaches it can run commands)"`
	TLS             *TLS     `hcl:"tls,block"`
	ACL             *ACL     `hcl:"acl,block"`
	Limits          *Limits  `hcl:"limits,block"`
	// RaftSkipIndex is the escape hatch from a server that stopped on a
	// committed entry no weft can apply (docs/operations.md, "Unknown
	// Raft entries"). Every server must be given the same value.
	RaftSkipIndex uint64 `hcl:"raft_skip_index,optional" flag:"raft-skip-index" help:"skip the committed Raft entry at this index if no weft can apply it; give every server the same value (see docs/operations.md)"`
}

// Server and agent defaults (SPEC §2).
const (
	DefaultBind           = "127.0.0.1"
	DefaultServerRPCPort  = 8030
	DefaultServerSerfPort = 8031
	DefaultServerHTTPPort = 8088
	DefaultAgentRPCPort   = 8049
	DefaultAgentSerfPort  = 8041
	DefaultAgentHTTPPort  = 8089
	DefaultLogLevel       = "info"
)

// DefaultServer returns a server configuration holding the defaults.
func DefaultServer() *Server {
	return &Server{Bind: DefaultBind, RPCPort: DefaultServerRPCPort, SerfPort: DefaultServerSerfPort,
		HTTPPort: DefaultServerHTTPPort, LogLevel: DefaultLogLevel, Region: DefaultRegion}
}

// Validate checks every setting and names the first bad one.
func (c *Server) Validate() error {
	if c.DataDir == "" {
		return errors.New("data_dir (-data-dir) is required: where the server keeps its Raft log and snapshots")
	}
	if c.BootstrapExpect < 0 {
		return fmt.Errorf("bootstrap_expect (-bootstrap-expect) must not be negative, not %d", c.BootstrapExpect)
	}
	if err := validateSecurity(c.Region, c.TLS, c.Limits); err != nil {
		return err
	}
	if err := validateEncrypt(c.Encrypt); err != nil {
		return err
	}
	return validateCommon(c.NodeID, c.Bind, c.LogLevel, map[string]int{"rpc_port": c.RPCPort, "serf_port": c.SerfPort, "http_port": c.HTTPPort}, c.Join)
}

func validateCommon(nodeID, bind, logLevel string, ports map[string]int, join []string) error {
	if nodeID != "" {
		if err := scheduler.ValidateNodeID(nodeID); err != nil {
			return fmt.Errorf("node_id (-node-id): %v", err)
		}
	}
	if ip := net.ParseIP(bind); ip == nil || ip.IsUnspecified() {
		return fmt.Errorf("bind (-bind) %q: give the IP address other members reach this one at", bind)
	}
	for name, p := range ports {
		if p < -1 || p > 65535 {
			return fmt.Errorf("%s: %d is not a port (0 to 65535, or -1 for any free port)", name, p)
		}
	}
	for _, j := range join {
		if strings.TrimSpace(j) == "" || strings.Contains(j, "://") {
			return fmt.Errorf("join (-join) %q: give HOST or HOST:PORT of a cluster member", j)
		}
	}
	if hclog.LevelFromString(logLevel) == hclog.NoLevel {
		return fmt.Errorf("log_level (-log-level) %q: use trace, debug, info, warn or error", logLevel)
	}
	return nil
}
