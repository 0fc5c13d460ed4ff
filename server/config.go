package server

import (
	"errors"
	"fmt"
	"net"
	"os"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/raft"
	"github.com/weft-sched/weft/fsm"
	"github.com/weft-sched/weft/internal/clock"
	"github.com/weft-sched/weft/internal/inflight"
	"github.com/weft-sched/weft/internal/raftnode"
	"github.com/weft-sched/weft/internal/tlsutil"
	wrpc "github.com/weft-sched/weft/rpc"
	"github.com/weft-sched/weft/scheduler"
)

// Config configures a Server. Zero values take the SPEC defaults.
type Config struct {
	// NodeID names the server in serf and Raft. Default: the hostname.
	NodeID string
	// DataDir holds Raft's log, stable store and snapshots, and serf's
	// snapshot. Required.
	DataDir string
	// BindAddr is the IP every listener binds and advertises. Default 127.0.0.1.
	BindAddr string
	// RPCPort carries msgpack RPC and Raft. Default 8030; -1 picks a free port.
	RPCPort int
	// SerfPort carries serf gossip over TCP and UDP. Default 8031; -1 picks a free port.
	SerfPort int
	// BootstrapExpect is how many servers to wait for before bootstrapping
	// Raft; 0 never bootstraps (the server joins an existing cluster), 1
	// bootstraps this server alone.
	BootstrapExpect int
	// Join lists serf addresses (host:port, or a host tried at ports 8031 and 8041) to join at start; the
	// server keeps retrying until one join succeeds.
	Join []string
	// RPCHoldTimeout bounds how long a request waits for a leader. Default 5 s.
	RPCHoldTimeout time.Duration
	// ReconcileInterval is how often the leader reconciles Raft peers with
	// serf in full (it also reacts to each serf event). Default 30 s.
	ReconcileInterval time.Duration
	// SubclusterID makes this cluster a sub-cluster of a federation (SPEC
	// §18): its leader reports to the routers at Routers (RPC addresses)
	// every SubclusterHeartbeat (default 5 s). Empty: no federation.
	SubclusterID        string
	Routers             []string
	SubclusterHeartbeat time.Duration
	// UnmanagedAMTimeout is how long the leader waits to hear from an
	// unmanaged AM (an app spanning here from another sub-cluster, whose
	// AMRMProxy calls AM.Allocate) before it kills the app: the proxy, or
	// its node, may be gone. Default DefaultUnmanagedAMTimeout.
	UnmanagedAMTimeout time.Duration
	// NodeTTL is how long an agent may go without a heartbeat before the
	// leader marks it DOWN (when it hears from most other nodes). Default 10 s.
	NodeTTL time.Duration
	// NodeGossipGrace is how long an agent that gossip reports failed or
	// gone may go without a heartbeat before it is DOWN. Default 3 s.
	NodeGossipGrace time.Duration
	// JoinRetryInterval is the pause between join attempts. Default 2 s.
	JoinRetryInterval time.Duration
	// Build is the version string advertised in serf tags.
	Build string
	// Logger receives every log line. Default: a null logger.
	Logger hclog.Logger
	// RaftConfig overrides Raft's defaults (tests shorten timeouts).
	// LocalID, Logger, NotifyCh, BatchApplyCh and MaxAppendEntries are
	// always set by the server.
	RaftConfig *raft.Config
	// When to take a Raft snapshot (internal/raftnode/snapshot.go, docs/operations.md
	// "Snapshots and restart time"): checked every RaftSnapshotInterval to
	// twice it, taken once the log applied since the last snapshot reaches
	// max(RaftSnapshotMinLogBytes, RaftSnapshotLogPercent% of that
	// snapshot's size) bytes or RaftSnapshotThreshold entries. Zero takes
	// the Default* of raftnode. Raft's own SnapshotThreshold is
	// always off, RaftConfig's included.
	RaftSnapshotInterval    time.Duration
	RaftSnapshotThreshold   uint64
	RaftSnapshotMinLogBytes uint64
	RaftSnapshotLogPercent  uint64
	// RaftTrailingLogs, if not zero, replaces Raft's TrailingLogs (over
	// RaftConfig too): the entries kept behind a snapshot.
	RaftTrailingLogs uint64
	// SerfFastGossip shortens gossip intervals (tests, weft dev).
	SerfFastGossip bool
	// Encrypt is the gossip encryption key (base64 of 32 bytes, SPEC §15),
	// or "" for none. Once DataDir holds a keyring file (written at the
	// first start with a key, rewritten on every rotation) the file wins.
	Encrypt string
	// Clock drives the leader's duties. Default: the real clock.
	Clock clock.Clock
	// ACLEnabled makes every request need an ACL token that allows it
	// (SPEC §15); off, every caller may do everything.
	ACLEnabled bool
	// RaftSkipIndex is the operator's escape hatch from a halt on a
	// committed entry that no weft can apply (see Halted): the entry at
	// this index is skipped if this binary cannot apply it. Every server
	// must be given the same value. 0 skips nothing.
	RaftSkipIndex uint64
	// TLS turns on mutual TLS (SPEC §15) for RPC and Raft with this
	// server's certificate, which must hold the server role: the RPC port
	// accepts only TLS peers with a certificate, Raft only from servers,
	// and the server dials servers and agents over TLS. Nil: plaintext.
	TLS *tlsutil.Configurator
	// Limits bound what one client may hold of the RPC port (connections,
	// handshake and idle time, streams; SPEC §15). Zero fields take
	// rpc.DefaultLimits.
	Limits wrpc.Limits
	// BlockingQueries bound the blocking queries clients hold waiting on
	// this server; zero fields take DefaultBlockingLimits.
	BlockingQueries BlockingLimits
	// ClientForwards bound the client calls this server forwards to the
	// leader at once, in all and per client address; zero fields take
	// raftnode.DefaultClientForwards.
	ClientForwards inflight.Limits
	// MaxCompletedApps is how many finished apps the state keeps; the
	// leader removes the oldest beyond it (SPEC §20). Default 10,000.
	MaxCompletedApps int
	// AppGCThreshold is how long a finished app stays in the state.
	// Default 24 h.
	AppGCThreshold time.Duration
	// NodeGCThreshold is how long a DOWN node stays in the state.
	// Default 24 h.
	NodeGCThreshold time.Duration
	// MaxNodeResources caps the capacity a node may declare when it
	// registers: memory_mb and vcores, and each extended resource (one
	// not named may be at most DefaultMaxExtendedResource). Zero memory
	// or vcores take DefaultMaxNodeResources'.
	MaxNodeResources scheduler.Resources
	// DynamicUIDs is the range each app's uid is taken from while it runs
	// (the uid its containers run as on agents running as root); empty:
	// apps get none.
	DynamicUIDs fsm.UIDRange
}

// DefaultMaxNodeResources is max_node_resources unless configured: 4 TiB
// of memory and 1,024 vcores, larger than the machines weft runs on and
// far smaller than a node could claim to draw every placement to itself.
var DefaultMaxNodeResources = scheduler.Resources{MemoryMB: 4 << 20, Vcores: 1024}

// DefaultMaxExtendedResource caps an extended resource (gpu, ...) that
// max_node_resources does not name.
const DefaultMaxExtendedResource = 1024

// Garbage collection defaults (SPEC §20).
const (
	DefaultMaxCompletedApps = 10000
	DefaultAppGCThreshold   = 24 * time.Hour
	DefaultNodeGCThreshold  = 24 * time.Hour
)

const (
	// DefaultRPCPort is the server's default RPC (and Raft) port.
	DefaultRPCPort = 8030
	// DefaultSerfPort is the server's default serf port.
	DefaultSerfPort = 8031
)

// Snapshot policy defaults (raftnode's; internal/config holds the same
// values for weft server's settings).
const (
	DefaultSnapshotInterval    = raftnode.DefaultSnapshotInterval
	DefaultSnapshotMinLogBytes = raftnode.DefaultSnapshotMinLogBytes
	DefaultSnapshotLogPercent  = raftnode.DefaultSnapshotLogPercent
	DefaultSnapshotMaxEntries  = raftnode.DefaultSnapshotMaxEntries
)

// snapshotPolicy returns the snapshot check interval and policy, zero
// settings taking the defaults.
func (c *Config) snapshotPolicy() (time.Duration, raftnode.SnapshotPolicy) {
	orDefault := func(v, d uint64) uint64 {
		if v == 0 {
			return d
		}
		return v
	}
	interval := c.RaftSnapshotInterval
	if interval <= 0 {
		interval = DefaultSnapshotInterval
	}
	return interval, raftnode.SnapshotPolicy{
		MinLogBytes: orDefault(c.RaftSnapshotMinLogBytes, DefaultSnapshotMinLogBytes),
		LogPercent:  orDefault(c.RaftSnapshotLogPercent, DefaultSnapshotLogPercent),
		MaxEntries:  orDefault(c.RaftSnapshotThreshold, DefaultSnapshotMaxEntries),
	}
}

func (c *Config) setDefaults() error {
	if c.NodeID == "" {
		h, err := os.Hostname()
		if err != nil {
			return fmt.Errorf("node_id not set and hostname unknown: %w", err)
		}
		c.NodeID = h
	}
	if c.DataDir == "" {
		return errors.New("data_dir is required")
	}
	if c.BindAddr == "" {
		c.BindAddr = "127.0.0.1"
	}
	if ip := net.ParseIP(c.BindAddr); ip == nil || ip.IsUnspecified() {
		return fmt.Errorf("bind %q: give the IP address other servers and agents reach this server at", c.BindAddr)
	}
	if c.RPCPort == 0 {
		c.RPCPort = DefaultRPCPort
	}
	if c.SerfPort == 0 {
		c.SerfPort = DefaultSerfPort
	}
	if c.BootstrapExpect < 0 {
		return errors.New("bootstrap_expect must not be negative")
	}
	if c.RPCHoldTimeout == 0 {
		c.RPCHoldTimeout = 5 * time.Second
	}
	if c.ReconcileInterval == 0 {
		c.ReconcileInterval = 30 * time.Second
	}
	if c.SubclusterHeartbeat == 0 {
		c.SubclusterHeartbeat = 5 * time.Second
	}
	if c.UnmanagedAMTimeout == 0 {
		c.UnmanagedAMTimeout = DefaultUnmanagedAMTimeout
	}
	if c.UnmanagedAMTimeout < 0 {
		return errors.New("unmanaged_am_timeout must be positive")
	}
	if c.SubclusterID != "" && len(c.Routers) == 0 {
		return errors.New("subcluster_id needs the routers' addresses (routers / -router) to report to")
	}
	if c.NodeTTL == 0 {
		c.NodeTTL = DefaultNodeTTL
	}
	if c.NodeGossipGrace == 0 {
		c.NodeGossipGrace = DefaultNodeGossipGrace
	}
	if c.Clock == nil {
		c.Clock = clock.Real{}
	}
	if c.JoinRetryInterval == 0 {
		c.JoinRetryInterval = 2 * time.Second
	}
	if c.Logger == nil {
		c.Logger = hclog.NewNullLogger()
	}
	if c.TLS != nil && c.TLS.Role() != tlsutil.RoleServer {
		return fmt.Errorf("tls: a server needs a certificate of role server (%s), not %q; make one with 'weft tls cert create -server'",
			tlsutil.RoleName(tlsutil.RoleServer, c.TLS.Region()), c.TLS.Role())
	}
	c.Limits = c.Limits.WithDefaults()
	if c.MaxCompletedApps == 0 {
		c.MaxCompletedApps = DefaultMaxCompletedApps
	}
	if c.AppGCThreshold == 0 {
		c.AppGCThreshold = DefaultAppGCThreshold
	}
	if c.NodeGCThreshold == 0 {
		c.NodeGCThreshold = DefaultNodeGCThreshold
	}
	if c.MaxNodeResources.MemoryMB == 0 {
		c.MaxNodeResources.MemoryMB = DefaultMaxNodeResources.MemoryMB
	}
	if c.MaxNodeResources.Vcores == 0 {
		c.MaxNodeResources.Vcores = DefaultMaxNodeResources.Vcores
	}
	if err := c.MaxNodeResources.Validate(); err != nil || c.MaxNodeResources.MemoryMB < 0 || c.MaxNodeResources.Vcores < 0 {
		return fmt.Errorf("max_node_resources must hold positive amounts (%s)", c.MaxNodeResources)
	}
	if c.MaxCompletedApps < 0 || c.AppGCThreshold < 0 || c.NodeGCThreshold < 0 {
		return errors.New("max_completed_apps, app_gc_threshold and node_gc_threshold must not be negative")
	}
	return nil
}

func port(p int) int {
	if p < 0 {
		return 0
	}
	return p
}
