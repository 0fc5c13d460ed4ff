package router

import (
	"errors"
	"fmt"
	"os"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/raft"
	"github.com/weft-sched/weft/internal/clock"
	"github.com/weft-sched/weft/internal/raftnode"
	"github.com/weft-sched/weft/internal/tlsutil"
	wrpc "github.com/weft-sched/weft/rpc"
)

// Defaults of SPEC §2 and §18.
const (
	DefaultRPCPort            = 8060
	DefaultSerfPort           = 8061
	DefaultSubclusterTimeout  = 30 * time.Second
	DefaultGPGInterval        = 30 * time.Second
	DefaultSubclusterInterval = 5 * time.Second
)

// Config configures a router. Zero values take the defaults.
type Config struct {
	NodeID   string
	DataDir  string
	BindAddr string
	// RPCPort and SerfPort: 0 for the defaults, -1 for any free port.
	RPCPort, SerfPort int
	BootstrapExpect   int
	// Join lists routers' serf addresses to join.
	Join              []string
	JoinRetryInterval time.Duration
	SerfFastGossip    bool
	Encrypt           string // the gossip key, base64; "" for none
	RaftConfig        *raft.Config
	RaftTrailingLogs  uint64
	RPCHoldTimeout    time.Duration
	ReconcileInterval time.Duration
	// SubclusterTimeout is how long a sub-cluster may be silent before the
	// leader marks it LOST; GPGInterval how often the policy generator runs.
	SubclusterTimeout time.Duration
	GPGInterval       time.Duration
	TLS               *tlsutil.Configurator // a router certificate; nil: plaintext
	// ACLEnabled makes the router check the token of every call it
	// answers itself against a RUNNING sub-cluster's ACLs (ACL.Authorize);
	// calls it relays are checked by the sub-cluster they reach.
	ACLEnabled bool
	Limits     wrpc.Limits
	Build      string
	Clock      clock.Clock
	Logger     hclog.Logger
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
	if c.RPCPort == 0 {
		c.RPCPort = DefaultRPCPort
	}
	if c.SerfPort == 0 {
		c.SerfPort = DefaultSerfPort
	}
	if c.JoinRetryInterval == 0 {
		c.JoinRetryInterval = 5 * time.Second
	}
	if c.RPCHoldTimeout == 0 {
		c.RPCHoldTimeout = 5 * time.Second
	}
	if c.ReconcileInterval == 0 {
		c.ReconcileInterval = 30 * time.Second
	}
	if c.SubclusterTimeout == 0 {
		c.SubclusterTimeout = DefaultSubclusterTimeout
	}
	if c.GPGInterval == 0 {
		c.GPGInterval = DefaultGPGInterval
	}
	c.Limits = c.Limits.WithDefaults()
	if c.Clock == nil {
		c.Clock = clock.Real{}
	}
	if c.Logger == nil {
		c.Logger = hclog.NewNullLogger()
	}
	if c.TLS != nil && c.TLS.Role() != tlsutil.RoleRouter {
		return fmt.Errorf("tls: a router needs a router certificate (%s), not a %s one",
			tlsutil.RoleName(tlsutil.RoleRouter, c.TLS.Region()), c.TLS.Role())
	}
	return nil
}

// port turns the -1 of "any free port" into the 0 net.Listen takes.
func port(p int) int {
	if p < 0 {
		return 0
	}
	return p
}

// snapshots is the routers' snapshot policy: the servers' defaults.
func snapshots() (time.Duration, raftnode.SnapshotPolicy) {
	return raftnode.DefaultSnapshotInterval, raftnode.SnapshotPolicy{MinLogBytes: raftnode.DefaultSnapshotMinLogBytes,
		LogPercent: raftnode.DefaultSnapshotLogPercent, MaxEntries: raftnode.DefaultSnapshotMaxEntries}
}
