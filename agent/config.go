package agent

import (
	"errors"
	"fmt"
	"net"
	"os"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/weft-sched/weft/internal/clock"
	"github.com/weft-sched/weft/internal/tlsutil"
	wrpc "github.com/weft-sched/weft/rpc"
	"github.com/weft-sched/weft/scheduler"
)

// Defaults of SPEC §2 and §12.
const (
	DefaultRPCPort                  = 8049
	DefaultSerfPort                 = 8041
	DefaultOpportunisticQueueLength = 10
	DefaultHeartbeatInterval        = time.Second
	DefaultKillGrace                = 5 * time.Second
	DefaultLogRetention             = 24 * time.Hour
	DefaultRack                     = "/default-rack"
)

// DefaultResources is what an agent offers when -resources is not given.
var DefaultResources = scheduler.Resources{MemoryMB: 8192, Vcores: 8}

// Config configures an Agent. Zero values take the defaults.
type Config struct {
	NodeID   string
	DataDir  string
	BindAddr string
	RPCPort  int // -1 picks a free port
	SerfPort int // -1 picks a free port
	// Join lists serf addresses of any members; at least one is needed.
	Join                     []string
	Resources                scheduler.Resources
	Rack                     string
	OpportunisticQueueLength int // negative means the default
	// Opportunistic is how the node orders its queue and evicts, pauses
	// and overcommits opportunistic containers.
	Opportunistic     scheduler.LocalPolicy
	HeartbeatInterval time.Duration
	// LazyHeartbeats heartbeats only every HeartbeatInterval, not also as
	// soon as a container changes state (as YARN node managers do): fewer
	// writes for the leader, slower news of freed resources.
	LazyHeartbeats bool
	KillGrace      time.Duration
	// AllowRoot lets containers run as root when the agent runs as root;
	// without it they never do (SPEC §15).
	AllowRoot bool
	// RunAsUser runs each container as its app user's Unix account, where
	// that account exists on this host, when the agent runs as root.
	RunAsUser bool
	// DynamicUIDs is the range of uids, [first, last], the agent runs an
	// app's containers as when it is root and nothing else decides: the
	// uid the servers gave the app, if it lies within ({0, 0}: none; such
	// containers run as nobody).
	DynamicUIDs [2]uint32
	// JoinToken is the node-join token the agent registers a new node
	// with (with ACLs on, the servers need one for a name they do not
	// know, or whose secret an operator reset).
	JoinToken string
	// JoinTokenFile, when JoinToken is empty, holds the join token: read
	// at each registration attempt, so one written there after the agent
	// started (once an operator made it) is taken up.
	JoinTokenFile string
	// Executable is the weft binary AM containers run ("weft am dshell").
	// Default: this process's executable.
	Executable        string
	JoinRetryInterval time.Duration
	SerfFastGossip    bool
	// Encrypt is the gossip encryption key (base64 of 32 bytes, SPEC §15),
	// or "" for none. Once DataDir holds a keyring file (written at the
	// first start with a key, rewritten on every rotation) the file wins.
	Encrypt string
	// CgroupRoot is the cgroup v2 hierarchy to use instead of looking in
	// /proc/self/mounts for v2, then v1, hierarchies (tests).
	CgroupRoot string
	Build      string
	Logger     hclog.Logger
	// Clock drives heartbeats and the distributed scheduler. Default: the
	// real clock.
	Clock clock.Clock
	// TLS turns on mutual TLS (SPEC §15) with this agent's certificate,
	// which must hold the agent role: the agent dials servers and agents
	// over TLS, and its port takes only TLS (verifying a certificate when
	// one is given: AMs in containers have none). AM containers get the
	// CA file and region (rpc.EnvCACert, rpc.EnvRegion). Nil: plaintext.
	TLS *tlsutil.Configurator
	// Limits bound what one client may hold of the RPC port (connections,
	// handshake and idle time, streams; SPEC §15). Zero fields take
	// rpc.DefaultLimits.
	Limits wrpc.Limits
	// LogRetention is how long a completed container's directory and logs
	// stay on the node (SPEC §20). Default: DefaultLogRetention.
	LogRetention time.Duration
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
		return fmt.Errorf("bind %q: give the IP address servers and AMs reach this agent at", c.BindAddr)
	}
	if len(c.Join) == 0 {
		return errors.New("join: give the serf address of any cluster member")
	}
	if c.RPCPort == 0 {
		c.RPCPort = DefaultRPCPort
	}
	if c.SerfPort == 0 {
		c.SerfPort = DefaultSerfPort
	}
	if c.Resources.IsZero() {
		c.Resources = DefaultResources
	}
	if err := c.Resources.Validate(); err != nil {
		return fmt.Errorf("resources: %w", err)
	}
	if c.Resources.MemoryMB <= 0 || c.Resources.Vcores <= 0 {
		return errors.New("resources: memory_mb and vcores must be positive")
	}
	if c.Rack == "" {
		c.Rack = DefaultRack
	}
	if c.OpportunisticQueueLength < 0 {
		c.OpportunisticQueueLength = DefaultOpportunisticQueueLength
	}
	if c.HeartbeatInterval == 0 {
		c.HeartbeatInterval = DefaultHeartbeatInterval
	}
	if c.KillGrace == 0 {
		c.KillGrace = DefaultKillGrace
	}
	if c.LogRetention <= 0 {
		c.LogRetention = DefaultLogRetention
	}
	if c.JoinRetryInterval == 0 {
		c.JoinRetryInterval = 2 * time.Second
	}
	if c.Executable == "" {
		exe, err := os.Executable()
		if err != nil {
			return fmt.Errorf("find the weft executable for AM containers: %w", err)
		}
		c.Executable = exe
	}
	if c.Logger == nil {
		c.Logger = hclog.NewNullLogger()
	}
	if c.Clock == nil {
		c.Clock = clock.Real{}
	}
	if c.TLS != nil && c.TLS.Role() != tlsutil.RoleAgent {
		return fmt.Errorf("tls: an agent needs a certificate of role agent (%s), not %q; make one with 'weft tls cert create -agent'",
			tlsutil.RoleName(tlsutil.RoleAgent, c.TLS.Region()), c.TLS.Role())
	}
	return nil
}

func port(p int) int {
	if p < 0 {
		return 0
	}
	return p
}
