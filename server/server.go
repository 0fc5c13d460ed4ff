package server

import (
	"context"
	"fmt"
	"net"
	"os"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/raft"
	"github.com/hashicorp/serf/serf"
	"github.com/weft-sched/weft/fsm"
	"github.com/weft-sched/weft/internal/clock"
	"github.com/weft-sched/weft/internal/gopool"
	"github.com/weft-sched/weft/internal/gossip"
	"github.com/weft-sched/weft/internal/identity"
	"github.com/weft-sched/weft/internal/metrics"
	"github.com/weft-sched/weft/internal/raftnode"
	wrpc "github.com/weft-sched/weft/rpc"
	"github.com/weft-sched/weft/scheduler"
)

// Server is one weft server. Create it with New; stop it with Leave (a
// graceful departure from the cluster) or Shutdown (a stop that leaves the
// cluster configuration as it is, as a crash would).
type Server struct {
	config *Config
	logger hclog.Logger
	clock  clock.Clock

	fsm *fsm.FSM
	// node is the Raft plumbing servers and routers share (package
	// raftnode); raft, leaderReady, bootstrapped and logMeter are its.
	node *raftnode.Node
	raft *raft.Raft
	// leaderReady is true on the leader once it has applied a barrier in
	// its term, so consistent reads never see state older than the term.
	leaderReady  *atomic.Bool
	bootstrapped *atomic.Bool
	logMeter     *raftnode.LogMeter
	snapPolicy   raftnode.SnapshotPolicy
	// hadRaftState records whether Raft found state on disk at start; such
	// a server never bootstraps.
	hadRaftState bool

	serf        *serf.Serf
	keyring     *gossip.Keyring
	serfEventCh chan serf.Event

	listener  net.Listener
	rpcAddr   string
	rpcServer *wrpc.Server
	rpcConns  *wrpc.Listener
	pool      *wrpc.Pool // to servers: forwarded calls of agents, heartbeats, peer checks
	agentPool *wrpc.Pool // to agents
	// clientPool carries to the leader the calls of clients this server
	// forwards, on connections of their own: a flood of them never takes
	// what heartbeats and Raft's peer checks need (raftnode.ClientCall).
	clientPool *wrpc.Pool
	// blocking counts the blocking queries clients hold waiting here.
	blocking *blockingCounts
	// routers reaches the federation's routers (with -subcluster-id), on
	// routerPool; nil otherwise.
	routers    *wrpc.Client
	routerPool *wrpc.Pool
	// agentFed is what every agent's registration and heartbeat answer
	// carries of the federation (nil outside one): built when the router
	// list changes, shared by every answer, never modified.
	agentFed atomic.Pointer[wrpc.AgentFederation]
	// unmanagedMu guards unmanaged: AM calls arrive on many goroutines,
	// the leader's duties tick it from one.
	unmanagedMu sync.Mutex
	unmanaged   *unmanagedWatch

	// livenessMu guards liveness: heartbeats and gossip arrive from many
	// goroutines, the leader's duties tick it from one.
	livenessMu sync.Mutex
	liveness   *liveness
	// batchWorkers answer the heartbeats of forwarded batches: goroutines
	// that keep the stacks they grew (a goroutine per heartbeat was 12% of
	// a leader's heartbeat handling at 10,000 nodes, in stack copying).
	batchWorkers *gopool.Pool
	// addrCache holds the servers' addresses heartbeats answer with.
	addrCache atomic.Pointer[serverAddrCache]
	// sigs remembers workload token signatures that verified: an AM's
	// token is checked on every AM call, and the tokens of a batch an
	// AMRMProxy signed share one signature.
	sigs  *identity.SigCache
	board loadBoard
	// waits is the scheduling loop's delay-scheduling memory, shared with
	// the why-pending explanations under waitsMu.
	waitsMu sync.Mutex
	waits   *scheduler.LocalityWaits
	// headrooms is what AM.Allocate answers as each capacity app's
	// headroom, computed once per state.
	headrooms headrooms
	// updates batches heartbeats' container updates into few Raft entries.
	updates *updateBatcher
	// hbForward batches the heartbeats a follower forwards to the leader.
	hbForward *heartbeatForwarder
	// leaderIndex shares a follower's question to the leader, how far it
	// has applied, among the requests with tokens it does not know.
	leaderIndex *leaderIndexAsker
	// promoteMu makes the leader decide promotions one request at a time.
	promoteMu sync.Mutex

	shutdownMu sync.Mutex
	shutdown   bool
	shutdownCh chan struct{}
	stoppedCh  chan struct{} // closed once stop has torn everything down
	wg         sync.WaitGroup

	// unregisterMetrics takes this server out of metrics scrapes.
	unregisterMetrics func()

	// haltedCh is closed (after haltErr is set) when the server stopped
	// because its FSM halted, haltLinger after it did.
	haltedCh   chan struct{}
	haltErr    error
	haltLinger time.Duration
}

// New starts a server: it opens the stores in the data dir, starts Raft,
// the RPC listener and serf, and begins joining and bootstrapping.
func New(config *Config) (*Server, error) {
	if err := config.setDefaults(); err != nil {
		return nil, err
	}
	s := &Server{
		config:       config,
		logger:       config.Logger.Named("server").With("node_id", config.NodeID),
		clock:        config.Clock,
		serfEventCh:  make(chan serf.Event, 2048),
		liveness:     newLiveness(config.NodeTTL, config.NodeGossipGrace),
		unmanaged:    newUnmanagedWatch(config.UnmanagedAMTimeout),
		batchWorkers: gopool.New(wrpc.MaxHeartbeatBatch, time.Minute),
		waits:        scheduler.NewLocalityWaits(),
		shutdownCh:   make(chan struct{}),
		stoppedCh:    make(chan struct{}),
		haltedCh:     make(chan struct{}),
		pool:         wrpc.NewTLSPool(config.Logger, config.TLS, wrpc.RoleServer),
		clientPool:   wrpc.NewTLSPool(config.Logger, config.TLS, wrpc.RoleServer),
		agentPool:    wrpc.NewTLSPool(config.Logger, config.TLS, wrpc.RoleAgent),
		sigs:         identity.NewSigCache(sigCacheSize),
		blocking:     newBlockingCounts(config.BlockingQueries),
	}
	if config.SubclusterID != "" {
		s.routerPool = wrpc.NewTLSPool(config.Logger, config.TLS, wrpc.RoleRouter)
		s.routers = wrpc.NewClient(config.Routers, s.routerPool)
		s.setAgentFederation(config.Routers)
	}
	s.updates = newUpdateBatcher(s.proposeUpdates)
	s.hbForward = newHeartbeatForwarder(s.sendHeartbeats)
	s.leaderIndex = newLeaderIndexAsker(s.askLeaderIndex)
	s.fsm = fsm.New(config.Logger, fsm.WithSkipIndex(config.RaftSkipIndex), fsm.WithApplyTimer(metrics.FSMApply))
	if config.RaftSkipIndex != 0 {
		s.logger.Warn("raft_skip_index is set: the entry at that index is skipped if it cannot be applied; every server must run with the same value",
			"raft_skip_index", config.RaftSkipIndex)
	}
	if err := os.MkdirAll(config.DataDir, 0o755); err != nil {
		return nil, fmt.Errorf("create data dir: %w", err)
	}

	ln, err := net.Listen("tcp", net.JoinHostPort(config.BindAddr, strconv.Itoa(port(config.RPCPort))))
	if err != nil {
		return nil, fmt.Errorf("listen for RPC: %w", err)
	}
	s.listener = ln
	s.rpcAddr = ln.Addr().String()
	s.rpcServer = wrpc.NewServer(s.logger.Named("rpc"))
	s.rpcServer.Authorize = s.authorize
	s.rpcServer.AuthorizeHeader = s.authorizeHeader
	snapInterval, snapPolicy := config.snapshotPolicy()
	s.node, err = raftnode.New(raftnode.Config{
		NodeID: config.NodeID, DataDir: config.DataDir, Role: RoleServer, PeerRole: wrpc.RoleServer,
		BootstrapExpect: config.BootstrapExpect, RaftConfig: config.RaftConfig, TrailingLogs: config.RaftTrailingLogs,
		SnapshotInterval: snapInterval, Snapshots: snapPolicy, RPCHoldTimeout: config.RPCHoldTimeout,
		ReconcileInterval: config.ReconcileInterval, HandshakeTimeout: config.Limits.HandshakeTimeout,
		TLS: config.TLS, Pool: s.pool, ClientPool: s.clientPool, ClientForwards: config.ClientForwards,
		Clock: config.Clock, Logger: config.Logger,
	}, raftnode.Hooks{
		Establish:    s.establishLeadership,
		Duties:       []func(context.Context){s.scheduleLoop, s.leaderDuties, s.federationLoop},
		Halted:       func() bool { return s.fsm.HaltErr() != nil },
		AppliedIndex: func() uint64 { return s.fsm.State().Index() },
		SnapshotLog:  metrics.SnapshotLog,
	}, s.shutdownCh, ln.Addr(), s.fsm)
	if err != nil {
		ln.Close()
		return nil, err
	}
	s.raft, s.leaderReady, s.bootstrapped = s.node.Raft(), s.node.Ready(), s.node.Bootstrapped()
	s.logMeter, s.snapPolicy, s.hadRaftState = s.node.Meter(), snapPolicy, s.node.HadState()
	s.haltLinger = 2 * s.node.HeartbeatTimeout()
	s.registerEndpoints()
	s.rpcConns = wrpc.NewListener(s.rpcServer, s.logger, s.node.Handoff, wrpc.WithLimits(config.Limits))
	if config.TLS != nil {
		s.rpcConns.UseTLS(config.TLS, wrpc.RequireClientCert)
	}
	s.goFunc(func() { s.rpcConns.Serve(ln) })

	if err := s.setupSerf(); err != nil {
		s.Shutdown()
		return nil, err
	}
	s.unregisterMetrics = metrics.RegisterServer(s.metricsSample)
	s.node.Start(s.serf, s.keyring, s.goFunc)
	s.goFunc(s.serfEventLoop)
	s.goFunc(s.watchHalt)
	s.goFunc(func() { s.updates.run(s.shutdownCh) })
	s.goFunc(func() { s.hbForward.run(s.shutdownCh) })
	s.goFunc(func() { s.leaderIndex.run(s.shutdownCh) })
	if len(config.Join) > 0 {
		s.goFunc(func() { s.joinLoop(config.Join) })
	}
	s.logger.Info("server started", "rpc_addr", s.rpcAddr, "serf_addr", s.SerfAddr(),
		"bootstrap_expect", config.BootstrapExpect, "raft_state_on_disk", s.hadRaftState, "tls", config.TLS != nil)
	return s, nil
}

// RPCAddr returns the address of the RPC (and Raft) listener.
func (s *Server) RPCAddr() string { return s.rpcAddr }

// SerfAddr returns the address serf gossips on.
func (s *Server) SerfAddr() string {
	if s.serf == nil {
		return ""
	}
	return gossip.Addr(s.serf)
}

// NodeID returns the server's node ID.
func (s *Server) NodeID() string { return s.config.NodeID }

// IsLeader reports whether this server is the Raft leader.
func (s *Server) IsLeader() bool { return s.node.IsLeader() }

// State returns the latest replicated state this server has applied.
func (s *Server) State() *fsm.State { return s.fsm.State() }

// Leave departs gracefully: a leader hands over by removing itself from the
// Raft configuration, then the server announces its departure in serf (so
// the leader removes it), waits to be removed, and shuts down.
func (s *Server) Leave() error {
	s.logger.Info("leaving the cluster")
	s.node.Leave()
	return s.Shutdown()
}

// Shutdown stops the server without leaving: its peers see it fail.
func (s *Server) Shutdown() error {
	s.stop()
	s.wg.Wait()
	s.logger.Info("server stopped")
	return nil
}

// stop tears the server down without waiting for its goroutines (one of
// them may be the caller). Only the first call does it; later ones wait
// until it is done.
func (s *Server) stop() {
	s.shutdownMu.Lock()
	if s.shutdown {
		s.shutdownMu.Unlock()
		<-s.stoppedCh
		return
	}
	s.shutdown = true
	close(s.shutdownCh)
	s.shutdownMu.Unlock()

	if s.unregisterMetrics != nil {
		s.unregisterMetrics()
	}

	if s.serf != nil {
		s.serf.Shutdown()
	}
	if s.node != nil {
		s.node.Shutdown()
	}
	s.listener.Close()
	s.rpcConns.Close()
	s.pool.Shutdown()
	s.clientPool.Shutdown()
	s.agentPool.Shutdown()
	if s.routerPool != nil {
		s.routerPool.Shutdown()
	}
	close(s.stoppedCh)
}

// goFunc runs f in a goroutine the server owns: Shutdown waits for it, so
// f must return once shutdownCh is closed.
func (s *Server) goFunc(f func()) {
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		f()
	}()
}

func (s *Server) isShutdown() bool {
	select {
	case <-s.shutdownCh:
		return true
	default:
		return false
	}
}
