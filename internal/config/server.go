package config

import (
	"errors"
	"fmt"
	"net"
	"strings"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/weft-sched/weft/scheduler"
	"github.com/weft-sched/weft/scheduler/federation"
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
	LogJSON         bool     `hcl:"log_json,optional" flag:"log-json" help:"write logs as JSON objects, one a line"`
	Region          string   `hcl:"region,optional" flag:"region" help:"region this server belongs to; certificates name it (server.REGION.weft)"`
	Encrypt         string   `hcl:"encrypt,optional" flag:"encrypt" help:"gossip encryption key (base64 of 32 bytes, from 'weft operator keygen')"`
	Insecure        bool     `hcl:"insecure,optional" flag:"insecure" help:"run without TLS, a gossip key or ACLs on a non-loopback address (anyone who reaches it can run commands)"`
	TLS             *TLS     `hcl:"tls,block"`
	ACL             *ACL     `hcl:"acl,block"`
	Limits          *Limits  `hcl:"limits,block"`
	// A sub-cluster of a federation (SPEC §18): its leader reports to the
	// routers every subcluster_heartbeat.
	SubclusterID        string   `hcl:"subcluster_id,optional" flag:"subcluster-id" help:"make this cluster a sub-cluster of a federation with this ID; its leader reports to the routers (needs -router)"`
	Routers             []string `hcl:"routers,optional" flag:"router" help:"RPC address HOST:PORT of a federation router to report to (repeatable; port 8060 by default)"`
	SubclusterHeartbeat string   `hcl:"subcluster_heartbeat,optional" flag:"subcluster-heartbeat" help:"how often the leader of a sub-cluster reports to the routers (a duration)"`
	// An app spanning into this sub-cluster from another is an unmanaged
	// AM here; its AMRMProxy, in the app's home, calls AM.Allocate. The
	// leader kills one it has not heard from for this long.
	UnmanagedAMTimeout string `hcl:"unmanaged_am_timeout,optional" flag:"unmanaged-am-timeout" help:"how long the leader waits to hear from the AMRMProxy of an app spanning into this sub-cluster before it kills the app here (a duration)"`
	// RaftSkipIndex is the escape hatch from a server that stopped on a
	// committed entry no weft can apply (docs/operations.md, "Unknown
	// Raft entries"). Every server must be given the same value.
	RaftSkipIndex uint64 `hcl:"raft_skip_index,optional" flag:"raft-skip-index" help:"skip the committed Raft entry at this index if no weft can apply it; give every server the same value (see docs/operations.md)"`
	// Raft snapshots: how often the server checks whether to take one,
	// after how much new log it does (bytes against the last snapshot's
	// size, or entries), and how many entries it keeps behind one for
	// followers (docs/operations.md, "Snapshots and restart time").
	RaftSnapshotInterval    string `hcl:"raft_snapshot_interval,optional" flag:"raft-snapshot-interval" help:"how often to check whether to take a Raft snapshot (a duration; each check waits between it and twice it)"`
	RaftSnapshotLogPercent  uint64 `hcl:"raft_snapshot_log_percent,optional" flag:"raft-snapshot-log-percent" help:"take a Raft snapshot at a check once the log committed since the last one reaches this percentage of that snapshot's size (or the minimum); bounds what a restart replays against what it restores"`
	RaftSnapshotMinLogBytes uint64 `hcl:"raft_snapshot_min_log_bytes,optional" flag:"raft-snapshot-min-log-bytes" help:"bytes of log committed since the last Raft snapshot below which no snapshot is taken by size (a young cluster's first snapshot comes after this much)"`
	RaftSnapshotThreshold   uint64 `hcl:"raft_snapshot_threshold,optional" flag:"raft-snapshot-threshold" help:"take a Raft snapshot at a check once this many entries were committed since the last one, whatever their size"`
	RaftTrailingLogs        uint64 `hcl:"raft_trailing_logs,optional" flag:"raft-trailing-logs" help:"Raft entries kept behind a snapshot, so that a follower that was briefly away catches up without a snapshot"`
	// Garbage collection of finished apps and DOWN nodes (SPEC §20).
	MaxCompletedApps int    `hcl:"max_completed_apps,optional" flag:"max-completed-apps" help:"how many finished apps the cluster keeps; older ones are removed with their containers"`
	AppGCThreshold   string `hcl:"app_gc_threshold,optional" flag:"app-gc-threshold" help:"how long a finished app is kept (a duration such as 24h)"`
	NodeGCThreshold  string `hcl:"node_gc_threshold,optional" flag:"node-gc-threshold" help:"how long a DOWN node is kept (a duration such as 24h)"`
	// DynamicUIDRange is where the uid each app's containers run as is
	// taken from (docs/security.md, "Containers and users").
	DynamicUIDRange string `hcl:"dynamic_uid_range,optional" flag:"dynamic-uid-range" help:"uids to give apps, one each while it runs, that their containers run as on agents running as root (FIRST-LAST, or off)"`
	// MaxNodeResources caps what a node may declare when it registers.
	MaxNodeResources map[string]int64 `hcl:"max_node_resources,optional" flag:"max-node-resources" help:"the most capacity a node may declare, e.g. memory_mb=4194304,vcores=1024,gpu=16 (unnamed: the defaults 4 TiB, 1024 vcores, 1024 of any other resource)"`
	// GCPercent is the Go collector's target (GOGC): 0 leaves Go's default
	// (100, or the GOGC environment variable). A server of a cluster of
	// thousands of nodes answers thousands of heartbeats a second; each
	// collection then delays some of them (docs/operations.md, "Large
	// clusters").
	GCPercent int `hcl:"gc_percent,optional" flag:"gc-percent" help:"the Go garbage collector's target percentage (GOGC): collect when the heap has grown this much past what was live; higher collects less often for more memory (0: Go's default, 100)"`
}

// Bounds of gc_percent.
const (
	minGCPercent = 25
	maxGCPercent = 10000
)

// CheckGCPercent checks a gc_percent value.
func CheckGCPercent(v int) error {
	if v != 0 && (v < minGCPercent || v > maxGCPercent) {
		return fmt.Errorf("%d: give 0 for Go's default, or a percentage from %d to %d such as 400", v, minGCPercent, maxGCPercent)
	}
	return nil
}

// Garbage collection defaults (SPEC §20).
const (
	DefaultMaxCompletedApps = 10000
	DefaultAppGCThreshold   = 24 * time.Hour
	DefaultNodeGCThreshold  = 24 * time.Hour
)

// Raft snapshot defaults (the same as package server's). A restart
// restores the last snapshot and replays the log committed since; a
// snapshot encodes the whole state. A check every 2–4 s snapshots once the
// log since the last snapshot reaches 5% of that snapshot's size (at least
// 4 MiB), or 8,192 entries: replaying a byte of log costs ~12 times what
// restoring a byte of snapshot does, so the replay stays under the
// restore, and encoding the state costs a fixed share of each byte of log
// whatever the state's size (docs/operations.md, "Snapshots and restart
// time"). 10,240 trailing entries (Raft's default) let a follower that was
// away for a restart catch up from the log, not a snapshot.
const (
	DefaultRaftSnapshotInterval    = 2 * time.Second
	DefaultRaftSnapshotLogPercent  = 5
	DefaultRaftSnapshotMinLogBytes = 4 << 20
	DefaultRaftSnapshotThreshold   = 8192
	DefaultRaftTrailingLogs        = 10240
	maxRaftSnapshotLogPercent      = 10000
	minRaftSnapshotMinLogBytes     = 4096
)

// RaftSnapshot holds the Raft snapshot settings (package server's Config
// fields of the same names).
type RaftSnapshot struct {
	Interval     time.Duration
	LogPercent   uint64
	MinLogBytes  uint64
	Threshold    uint64 // entries
	TrailingLogs uint64
}

// RaftSnapshots returns the Raft snapshot settings, checked.
func (c *Server) RaftSnapshots() (RaftSnapshot, error) {
	interval, err := time.ParseDuration(c.RaftSnapshotInterval)
	if err != nil || interval < 100*time.Millisecond {
		return RaftSnapshot{}, fmt.Errorf("raft_snapshot_interval (-raft-snapshot-interval) %q: give a duration of at least 100ms such as 5s", c.RaftSnapshotInterval)
	}
	if c.RaftSnapshotLogPercent == 0 || c.RaftSnapshotLogPercent > maxRaftSnapshotLogPercent {
		return RaftSnapshot{}, fmt.Errorf("raft_snapshot_log_percent (-raft-snapshot-log-percent) %d: give a percentage from 1 to %d, such as %d", c.RaftSnapshotLogPercent, maxRaftSnapshotLogPercent, DefaultRaftSnapshotLogPercent)
	}
	if c.RaftSnapshotMinLogBytes < minRaftSnapshotMinLogBytes {
		return RaftSnapshot{}, fmt.Errorf("raft_snapshot_min_log_bytes (-raft-snapshot-min-log-bytes) %d: give at least %d bytes, such as %d (4 MiB)", c.RaftSnapshotMinLogBytes, minRaftSnapshotMinLogBytes, DefaultRaftSnapshotMinLogBytes)
	}
	if c.RaftSnapshotThreshold == 0 {
		return RaftSnapshot{}, errors.New("raft_snapshot_threshold (-raft-snapshot-threshold) must be positive: the entries after which a snapshot is taken whatever their size")
	}
	if c.RaftTrailingLogs == 0 {
		return RaftSnapshot{}, errors.New("raft_trailing_logs (-raft-trailing-logs) must be positive: a follower a single entry behind would need a whole snapshot")
	}
	return RaftSnapshot{Interval: interval, LogPercent: c.RaftSnapshotLogPercent, MinLogBytes: c.RaftSnapshotMinLogBytes,
		Threshold: c.RaftSnapshotThreshold, TrailingLogs: c.RaftTrailingLogs}, nil
}

// GC returns the garbage collection settings, checked: the most finished
// apps kept, and how long finished apps and DOWN nodes are kept.
func (c *Server) GC() (maxApps int, appAfter, nodeAfter time.Duration, err error) {
	if c.MaxCompletedApps <= 0 {
		return 0, 0, 0, fmt.Errorf("max_completed_apps (-max-completed-apps) must be positive, not %d", c.MaxCompletedApps)
	}
	for _, d := range []struct {
		name, flag, value string
		out               *time.Duration
	}{{"app_gc_threshold", "app-gc-threshold", c.AppGCThreshold, &appAfter}, {"node_gc_threshold", "node-gc-threshold", c.NodeGCThreshold, &nodeAfter}} {
		v, perr := time.ParseDuration(d.value)
		if perr != nil || v <= 0 {
			return 0, 0, 0, fmt.Errorf("%s (-%s) %q: give a positive duration such as 24h", d.name, d.flag, d.value)
		}
		*d.out = v
	}
	return c.MaxCompletedApps, appAfter, nodeAfter, nil
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
		HTTPPort: DefaultServerHTTPPort, LogLevel: DefaultLogLevel, Region: DefaultRegion,
		MaxCompletedApps: DefaultMaxCompletedApps, AppGCThreshold: "24h",
		NodeGCThreshold: "24h", RaftSnapshotInterval: DefaultRaftSnapshotInterval.String(),
		RaftSnapshotLogPercent: DefaultRaftSnapshotLogPercent, RaftSnapshotMinLogBytes: DefaultRaftSnapshotMinLogBytes,
		RaftSnapshotThreshold: DefaultRaftSnapshotThreshold, RaftTrailingLogs: DefaultRaftTrailingLogs,
		SubclusterHeartbeat: DefaultSubclusterHeartbeat.String(), UnmanagedAMTimeout: DefaultUnmanagedAMTimeout.String(),
		DynamicUIDRange: DefaultDynamicUIDRange}
}

// DefaultUnmanagedAMTimeout is how long a sub-cluster's leader waits to
// hear from an unmanaged AM's AMRMProxy (SPEC §18).
const DefaultUnmanagedAMTimeout = 2 * time.Minute

// minUnmanagedAMTimeout keeps a spanning app from being killed between
// two calls of its AMRMProxy.
const minUnmanagedAMTimeout = time.Second

// UnmanagedAMTimeoutDuration returns unmanaged_am_timeout, checked.
func (c *Server) UnmanagedAMTimeoutDuration() (time.Duration, error) {
	d, err := time.ParseDuration(c.UnmanagedAMTimeout)
	if err != nil || d < minUnmanagedAMTimeout {
		return 0, fmt.Errorf("unmanaged_am_timeout (-unmanaged-am-timeout) %q: give a duration of at least %s such as %s",
			c.UnmanagedAMTimeout, minUnmanagedAMTimeout, DefaultUnmanagedAMTimeout)
	}
	return d, nil
}

// DefaultSubclusterHeartbeat is how often a sub-cluster's leader reports
// to the routers (SPEC §18).
const DefaultSubclusterHeartbeat = 5 * time.Second

// Federation returns the sub-cluster settings, checked: its ID (empty for
// none), the routers' addresses and the report interval.
func (c *Server) Federation() (id string, routers []string, every time.Duration, err error) {
	every, perr := time.ParseDuration(c.SubclusterHeartbeat)
	if perr != nil || every < 100*time.Millisecond {
		return "", nil, 0, fmt.Errorf("subcluster_heartbeat (-subcluster-heartbeat) %q: give a duration of at least 100ms such as 5s", c.SubclusterHeartbeat)
	}
	switch {
	case c.SubclusterID == "" && len(c.Routers) > 0:
		return "", nil, 0, errors.New("routers (-router) given without subcluster_id (-subcluster-id): name this sub-cluster")
	case c.SubclusterID == "":
		return "", nil, every, nil
	case len(c.Routers) == 0:
		return "", nil, 0, fmt.Errorf("subcluster_id (-subcluster-id) %q needs the routers to report to: give -router HOST:PORT", c.SubclusterID)
	}
	if err := federation.ValidateID(c.SubclusterID); err != nil {
		return "", nil, 0, fmt.Errorf("subcluster_id (-subcluster-id): %v", err)
	}
	for _, r := range c.Routers {
		host, port, serr := net.SplitHostPort(r)
		if serr != nil || host == "" || port == "" {
			return "", nil, 0, fmt.Errorf("routers (-router) %q: give HOST:PORT of a router, such as 10.0.1.1:8060", r)
		}
	}
	return c.SubclusterID, c.Routers, every, nil
}

// MaxNodeCapacity returns max_node_resources as a vector: the amounts it
// names, and zero (the servers' default) for memory_mb and vcores where it
// names none.
func (c *Server) MaxNodeCapacity() (scheduler.Resources, error) {
	var r scheduler.Resources
	for name, v := range c.MaxNodeResources {
		if name != scheduler.ResourceMemoryMB && name != scheduler.ResourceVcores {
			if err := scheduler.ValidateResourceName(name); err != nil {
				return r, fmt.Errorf("max_node_resources (-max-node-resources): %v", err)
			}
		}
		if v <= 0 {
			return r, fmt.Errorf("max_node_resources (-max-node-resources): %s must be positive (got %d)", name, v)
		}
		r = r.With(name, v)
	}
	return r, nil
}

// Validate checks every setting and names the first bad one.
func (c *Server) Validate() error {
	if _, err := c.MaxNodeCapacity(); err != nil {
		return err
	}
	if _, _, err := ParseUIDRange(c.DynamicUIDRange); err != nil {
		return err
	}
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
	if _, _, _, err := c.GC(); err != nil {
		return err
	}
	if _, err := c.RaftSnapshots(); err != nil {
		return err
	}
	if err := CheckGCPercent(c.GCPercent); err != nil {
		return fmt.Errorf("gc_percent (-gc-percent) %w", err)
	}
	if _, _, _, err := c.Federation(); err != nil {
		return err
	}
	if _, err := c.UnmanagedAMTimeoutDuration(); err != nil {
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
