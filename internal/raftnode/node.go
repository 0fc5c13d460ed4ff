package raftnode

import (
	"context"
	"fmt"
	"math"
	"net"
	"os"
	"path/filepath"
	"sync/atomic"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/raft"
	raftboltdb "github.com/hashicorp/raft-boltdb/v2"
	"github.com/hashicorp/serf/serf"
	"github.com/weft-sched/weft/internal/clock"
	"github.com/weft-sched/weft/internal/gossip"
	"github.com/weft-sched/weft/internal/inflight"
	"github.com/weft-sched/weft/internal/tlsutil"
	wrpc "github.com/weft-sched/weft/rpc"
)

// Config is a Node's configuration; the process fills it from its own.
type Config struct {
	NodeID  string
	DataDir string // Raft's files go in DataDir/raft
	// Role is the gossip role of the quorum's members (gossip.RoleServer
	// or gossip.RoleRouter): bootstrap and reconciliation consider only
	// serf members with it. PeerRole is the certificate role its peers
	// must prove with TLS on (wrpc.RoleServer or wrpc.RoleRouter).
	Role     string
	PeerRole wrpc.Role
	// BootstrapExpect is how many members of Role to wait for before
	// bootstrapping (1: bootstrap alone at once; 0: never, join only).
	BootstrapExpect int
	// RaftConfig, if set, is the base Raft configuration (tests shorten
	// its timeouts); TrailingLogs, if set, overrides its TrailingLogs.
	RaftConfig   *raft.Config
	TrailingLogs uint64
	// SnapshotInterval is how often the snapshot policy is checked (every
	// interval to twice it); Snapshots decides.
	SnapshotInterval time.Duration
	Snapshots        SnapshotPolicy
	// RPCHoldTimeout bounds how long a request waits for a leader.
	RPCHoldTimeout time.Duration
	// ReconcileInterval is how often the leader reconciles Raft's
	// configuration with serf in full.
	ReconcileInterval time.Duration
	// HandshakeTimeout bounds an accepted Raft connection's first message.
	HandshakeTimeout time.Duration
	TLS              *tlsutil.Configurator // nil: plaintext
	// Pool reaches the other members: peer checks and the forwarded calls
	// of agents, servers and routers. ClientPool, if set, carries the
	// forwarded calls of clients (ClientCall), so that a flood of them
	// never holds the connections Pool's calls need; nil: Pool.
	Pool       *wrpc.Pool
	ClientPool *wrpc.Pool
	// ClientForwards bounds the client calls this member forwards to the
	// leader at once; past it a client call is answered rate_limited at
	// once. Zero fields take DefaultClientForwards.
	ClientForwards inflight.Limits
	Clock          clock.Clock
	Logger         hclog.Logger
}

// Hooks is what the process adds to the plumbing. Every field may be nil.
type Hooks struct {
	// Establish runs on a new leader once its barrier has applied every
	// earlier entry, before it is ready: the leader's own state, reset
	// for its term.
	Establish func(ctx context.Context)
	// Duties run while this member leads and is ready, until ctx ends.
	Duties []func(ctx context.Context)
	// Halted reports that the FSM stopped applying entries: no snapshot
	// is taken and consistent reads are refused.
	Halted func() bool
	// AppliedIndex is the FSM's last applied index, for the logs.
	AppliedIndex func() uint64
	// SnapshotLog is told the log since the last snapshot and that
	// snapshot's size at every check (metrics).
	SnapshotLog func(logBytes, snapshotBytes uint64)
}

// Node is one member's Raft.
type Node struct {
	cfg    Config
	hooks  Hooks
	logger hclog.Logger
	clock  clock.Clock
	addr   string // this member's RPC (and Raft) address

	raft      *raft.Raft
	store     *raftboltdb.BoltStore
	transport *raft.NetworkTransport
	layer     *layer
	notifyCh  chan bool
	meter     *LogMeter
	// hadState records whether Raft found state on disk at start; such a
	// member never bootstraps.
	hadState bool

	serf        *serf.Serf
	keyring     *gossip.Keyring // the member's own gossip keyring
	reconcileCh chan serf.Member
	// ready is true on the leader once it has applied a barrier in its
	// term, so consistent reads never see state older than the term.
	ready atomic.Bool
	// freshness says whether this member answers blocking reads from its
	// own state (fresh.go).
	freshness *freshness
	// clientForwards bounds the client calls this member forwards to the
	// leader at once (forward.go).
	clientForwards *inflight.Counter
	// lastRefusalLog is when a refused client call was last logged, in
	// Unix nanoseconds.
	lastRefusalLog atomic.Int64
	bootstrapped   atomic.Bool
	shutdownCh     <-chan struct{}
}

// New opens Raft's stores in the data directory and starts Raft with fsm,
// its transport on addr (the process's RPC listener, which hands Raft
// connections to Handoff). A member alone in bootstrap_expect 1 with no
// state bootstraps at once. hooks are the process's part; shutdown closes
// when the process stops. Start begins the loops.
func New(cfg Config, hooks Hooks, shutdown <-chan struct{}, addr net.Addr, fsm raft.BatchingFSM) (*Node, error) {
	if cfg.Clock == nil {
		cfg.Clock = clock.Real{}
	}
	if cfg.Logger == nil {
		cfg.Logger = hclog.NewNullLogger()
	}
	n := &Node{cfg: cfg, hooks: hooks, shutdownCh: shutdown, logger: cfg.Logger.Named(cfg.Role).With("node_id", cfg.NodeID),
		clock: cfg.Clock, addr: addr.String(),
		notifyCh: make(chan bool, 16), meter: &LogMeter{}, reconcileCh: make(chan serf.Member, 64),
		freshness: newFreshness(), clientForwards: inflight.New(clientForwardLimits(cfg.ClientForwards))}
	if n.cfg.ClientPool == nil {
		n.cfg.ClientPool = cfg.Pool
	}
	n.layer = newLayer(addr, cfg.TLS, cfg.PeerRole, cfg.HandshakeTimeout)
	dir := filepath.Join(cfg.DataDir, "raft")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("create raft dir: %w", err)
	}
	conf := raft.DefaultConfig()
	if cfg.RaftConfig != nil {
		c := *cfg.RaftConfig
		conf = &c
	}
	// The snapshot loop (snapshot.go) takes every snapshot: Raft's own
	// policy, which counts entries, never fires.
	conf.SnapshotThreshold = math.MaxUint64
	if cfg.TrailingLogs > 0 {
		conf.TrailingLogs = cfg.TrailingLogs
	}
	conf.LocalID = raft.ServerID(cfg.NodeID)
	conf.Logger = cfg.Logger.Named("raft")
	conf.NotifyCh = n.notifyCh
	conf.BatchApplyCh = true
	conf.MaxAppendEntries = MaxAppendEntries // what bounds a Raft message (frames.go)

	store, err := raftboltdb.New(raftboltdb.Options{Path: filepath.Join(dir, "raft.db")})
	if err != nil {
		return nil, fmt.Errorf("open raft store: %w", err)
	}
	n.store = store
	logs, err := raft.NewLogCache(512, store)
	if err != nil {
		store.Close()
		return nil, err
	}
	snaps, err := raft.NewFileSnapshotStoreWithLogger(dir, 2, cfg.Logger.Named("raft"))
	if err != nil {
		store.Close()
		return nil, fmt.Errorf("open snapshot store: %w", err)
	}
	n.transport = raft.NewNetworkTransportWithConfig(&raft.NetworkTransportConfig{
		Stream:  n.layer,
		MaxPool: 3,
		Timeout: 10 * time.Second,
		Logger:  cfg.Logger.Named("raft_transport"),
	})
	n.hadState, err = raft.HasExistingState(logs, store, snaps)
	if err != nil {
		store.Close()
		return nil, fmt.Errorf("inspect raft state: %w", err)
	}
	if n.hadState {
		n.bootstrapped.Store(true)
	} else if cfg.BootstrapExpect == 1 {
		c := raft.Configuration{Servers: []raft.Server{{ID: conf.LocalID, Address: raft.ServerAddress(n.addr), Suffrage: raft.Voter}}}
		if err := raft.BootstrapCluster(conf, logs, store, snaps, n.transport, c); err != nil {
			store.Close()
			return nil, fmt.Errorf("bootstrap single-member cluster: %w", err)
		}
		n.bootstrapped.Store(true)
	}
	n.raft, err = raft.NewRaft(conf, &meteredFSM{BatchingFSM: fsm, meter: n.meter}, logs, store, snaps, n.transport)
	if err != nil {
		store.Close()
		return nil, fmt.Errorf("start raft: %w", err)
	}
	return n, nil
}

// Start begins the leadership, snapshot and freshness loops (each through
// goFunc, which the process waits for at shutdown), with s the process's
// serf for bootstrap and reconciliation and keyring its gossip keyring (the
// keyring methods, keyring.go): call it before anything hands the node
// serf events. The loops end when shutdown closes.
func (n *Node) Start(s *serf.Serf, keyring *gossip.Keyring, goFunc func(func())) {
	n.serf, n.keyring = s, keyring
	goFunc(n.monitorLeadership)
	goFunc(func() { n.snapshotLoop(n.shutdownCh) })
	goFunc(n.freshnessLoop)
}

// Handoff gives the transport a connection the RPC listener accepted with
// the first byte ConnRaft.
func (n *Node) Handoff(c net.Conn) { n.layer.handoff(c) }

// Raft returns the Raft instance.
func (n *Node) Raft() *raft.Raft { return n.raft }

// IsLeader reports whether this member is the Raft leader.
func (n *Node) IsLeader() bool { return n.raft.State() == raft.Leader }

// Ready is true on the leader once its barrier applied (consistent reads
// may be answered).
func (n *Node) Ready() *atomic.Bool { return &n.ready }

// Bootstrapped is true once this member bootstrapped, found state on
// disk, or learnt that a peer has a configuration.
func (n *Node) Bootstrapped() *atomic.Bool { return &n.bootstrapped }

// HadState reports whether Raft found state on disk at start.
func (n *Node) HadState() bool { return n.hadState }

// Meter returns the count of log applied since the last snapshot.
func (n *Node) Meter() *LogMeter { return n.meter }

// HeartbeatTimeout is Raft's heartbeat timeout.
func (n *Node) HeartbeatTimeout() time.Duration { return n.raft.ReloadableConfig().HeartbeatTimeout }

func (n *Node) halted() bool { return n.hooks.Halted != nil && n.hooks.Halted() }

func (n *Node) snapshotLog(logBytes, snapshotBytes uint64) {
	if n.hooks.SnapshotLog != nil {
		n.hooks.SnapshotLog(logBytes, snapshotBytes)
	}
}

// Leave departs gracefully: a leader hands over by removing itself from
// the Raft configuration, then the member announces its departure in serf
// (so the leader removes it) and waits to be removed. The process shuts
// down after it.
func (n *Node) Leave() {
	numPeers := 0
	if f := n.raft.GetConfiguration(); f.Error() == nil {
		numPeers = len(f.Configuration().Servers)
	}
	isLeader := n.IsLeader()
	if isLeader && numPeers > 1 {
		if err := n.raft.RemoveServer(raft.ServerID(n.cfg.NodeID), 0, 0).Error(); err != nil {
			n.logger.Error("failed to remove self from raft configuration", "error", err)
		}
	}
	if n.serf != nil {
		if err := n.serf.Leave(); err != nil {
			n.logger.Error("failed to leave serf", "error", err)
		}
	}
	if !isLeader && numPeers > 1 {
		n.awaitRemoval(10 * time.Second)
	}
}

// awaitRemoval waits until this member is no longer in its own copy of
// the Raft configuration, or the timeout passes.
func (n *Node) awaitRemoval(timeout time.Duration) {
	deadline := n.clock.Now().Add(timeout)
	for n.clock.Now().Before(deadline) {
		if n.IsLeader() {
			// Elected while leaving (the others left first): nobody else can
			// remove this member, so it hands over itself, or is the last.
			if err := n.raft.RemoveServer(raft.ServerID(n.cfg.NodeID), 0, 0).Error(); err != nil {
				n.logger.Warn("could not remove self from raft while leaving", "error", err)
			}
			return
		}
		f := n.raft.GetConfiguration()
		if f.Error() != nil {
			return
		}
		found := false
		for _, srv := range f.Configuration().Servers {
			if srv.ID == raft.ServerID(n.cfg.NodeID) {
				found = true
			}
		}
		if !found {
			return
		}
		select {
		case <-n.clock.After(100 * time.Millisecond):
		case <-n.shutdownCh:
			return
		}
	}
	n.logger.Warn("the leader did not remove this member from raft in time; shutting down anyway")
}

// Shutdown stops Raft and closes its transport, store and layer.
func (n *Node) Shutdown() {
	if err := n.raft.Shutdown().Error(); err != nil {
		n.logger.Error("raft shutdown", "error", err)
	}
	n.transport.Close()
	n.store.Close()
	n.layer.Close()
}
