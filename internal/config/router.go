package config

import (
	"errors"
	"fmt"
	"time"
)

// Router is the configuration of `weft router` (SPEC §18). Each field is
// one setting: `hcl` names it in a -config file, `flag` on the command line.
type Router struct {
	NodeID            string   `hcl:"node_id,optional" flag:"node-id" help:"ID of this router (default: the hostname)"`
	DataDir           string   `hcl:"data_dir,optional" flag:"data-dir" help:"directory for the routers' Raft log, snapshots and serf state (required)"`
	Bind              string   `hcl:"bind,optional" flag:"bind" help:"IP address to listen on and advertise"`
	RPCPort           int      `hcl:"rpc_port,optional" flag:"rpc-port" help:"port for msgpack RPC and the routers' Raft"`
	SerfPort          int      `hcl:"serf_port,optional" flag:"serf-port" help:"port for the routers' serf gossip (TCP and UDP)"`
	HTTPPort          int      `hcl:"http_port,optional" flag:"http-port" help:"port for the HTTP API and web UI through the routers (HTTPS when TLS is on); 0 turns it off, -1 picks a free port"`
	BootstrapExpect   int      `hcl:"bootstrap_expect,optional" flag:"bootstrap-expect" help:"bootstrap the routers' Raft once this many routers (with the same value) see each other"`
	Join              []string `hcl:"join,optional" flag:"join" help:"serf address of any router to join (repeatable)"`
	LogLevel          string   `hcl:"log_level,optional" flag:"log-level" help:"log level: trace, debug, info, warn or error"`
	LogJSON           bool     `hcl:"log_json,optional" flag:"log-json" help:"write logs as JSON objects, one a line"`
	Region            string   `hcl:"region,optional" flag:"region" help:"region this router belongs to; certificates name it (router.REGION.weft)"`
	Encrypt           string   `hcl:"encrypt,optional" flag:"encrypt" help:"gossip encryption key of the routers' pool (base64 of 32 bytes, from 'weft operator keygen')"`
	Insecure          bool     `hcl:"insecure,optional" flag:"insecure" help:"run without TLS, a gossip key or ACLs on a non-loopback address (anyone who reaches it can change the federation)"`
	SubclusterTimeout string   `hcl:"subcluster_timeout,optional" flag:"subcluster-timeout" help:"how long a sub-cluster may be silent before it is LOST and gets no new apps (a duration)"`
	GPGInterval       string   `hcl:"gpg_interval,optional" flag:"gpg-interval" help:"how often the router leader recomputes every queue's weights from the sub-clusters' headroom and demand (a duration)"`
	TLS               *TLS     `hcl:"tls,block"`
	ACL               *ACL     `hcl:"acl,block"`
	Limits            *Limits  `hcl:"limits,block"`
}

// Router defaults (SPEC §2, §18).
const (
	DefaultRouterRPCPort     = 8060
	DefaultRouterSerfPort    = 8061
	DefaultRouterHTTPPort    = 8068
	DefaultSubclusterTimeout = 30 * time.Second
	DefaultGPGInterval       = 30 * time.Second
)

// DefaultRouter returns a router configuration holding the defaults.
func DefaultRouter() *Router {
	return &Router{Bind: DefaultBind, RPCPort: DefaultRouterRPCPort, SerfPort: DefaultRouterSerfPort, HTTPPort: DefaultRouterHTTPPort, LogLevel: DefaultLogLevel,
		Region: DefaultRegion, SubclusterTimeout: DefaultSubclusterTimeout.String(), GPGInterval: DefaultGPGInterval.String()}
}

// Intervals returns subcluster_timeout and gpg_interval, checked.
func (c *Router) Intervals() (timeout, gpg time.Duration, err error) {
	for _, d := range []struct {
		name, flag, value string
		min               time.Duration
		out               *time.Duration
	}{{"subcluster_timeout", "subcluster-timeout", c.SubclusterTimeout, time.Second, &timeout},
		{"gpg_interval", "gpg-interval", c.GPGInterval, time.Second, &gpg}} {
		v, perr := time.ParseDuration(d.value)
		if perr != nil || v < d.min {
			return 0, 0, fmt.Errorf("%s (-%s) %q: give a duration of at least %s, such as 30s", d.name, d.flag, d.value, d.min)
		}
		*d.out = v
	}
	return timeout, gpg, nil
}

// SecurityGaps lists what of SPEC §15's secure setup the router lacks;
// haveKeyring as for the server's. A router holds no ACLs of its own:
// with acl { enabled = true } it checks tokens against a sub-cluster's.
func (c *Router) SecurityGaps(haveKeyring bool) []string {
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

// Validate checks every setting and names the first bad one.
func (c *Router) Validate() error {
	if c.DataDir == "" {
		return errors.New("data_dir (-data-dir) is required: where the router keeps its Raft log and snapshots")
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
	if _, _, err := c.Intervals(); err != nil {
		return err
	}
	return validateCommon(c.NodeID, c.Bind, c.LogLevel, map[string]int{"rpc_port": c.RPCPort, "serf_port": c.SerfPort, "http_port": c.HTTPPort}, c.Join)
}
