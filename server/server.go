package server

import (
	"fmt"
	"math"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/raft"
	raftboltdb "github.com/hashicorp/raft-boltdb/v2"
	"github.com/hashicorp/serf/serf"
	"github.com/weft-sched/weft/fsm"
	"github.com/weft-sched/weft/internal/clock"
	"github.com/weft-sched/weft/internal/gopool"
	"github.com/weft-sched/weft/internal/gossip"
	"github.com/weft-sched/weft/internal/metrics"
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

	fsm           *fsm.FSM
	raft          *raft.Raft
	raftStore     *raftboltdb.BoltStore
	raftTransport *raft.NetworkTransport
	raftLayer     *raftLayer
	raftNotifyCh  chan bool
	// hadRaftState records whether Raft found state on disk at start; such
	// a server never bootstraps.
	hadRaftState bool

	serf        *serf.Serf
	serfEventCh chan serf.Event

	listener  net.Listener
	rpcAddr   string
	rpcServer *wrpc.Server
	rpcConns  *wrpc.Listener
	pool      *wrpc.Pool // to servers
	agentPool *wrpc.Pool // to agents

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
	board     loadBoard
	// waits is the scheduling loop's delay-scheduling memory, shared with
	// the why-pending explanations under waitsMu.
	waitsMu sync.Mutex
	waits   *scheduler.LocalityWaits
	// snapPolicy says when to take a Raft snapshot, checked every
	// snapInterval to twice it against logMeter (snapshot_policy.go).
	snapPolicy   snapshotPolicy
	snapInterval time.Duration
	logMeter     *logMeter
	// updates batches heartbeats' container updates into few Raft entries.
	updates *updateBatcher
	// hbForward batches the heartbeats a follower forwards to the leader.
	hbForward *heartbeatForwarder
	// promoteMu makes the leader decide promotions one request at a time.
	promoteMu sync.Mutex

	// leaderReady is true on the leader once it has applied a barrier in
	// its term, so consistent reads never see state older than the term.
	leaderReady  atomic.Bool
	bootstrapped atomic.Bool
	reconcileCh  chan serf.Member

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
		raftNotifyCh: make(chan bool, 16),
		serfEventCh:  make(chan serf.Event, 2048),
		reconcileCh:  make(chan serf.Member, 64),
		liveness:     newLiveness(config.NodeTTL, config.NodeGossipGrace),
		batchWorkers: gopool.New(wrpc.MaxHeartbeatBatch, time.Minute),
		waits:        scheduler.NewLocalityWaits(),
		shutdownCh:   make(chan struct{}),
		stoppedCh:    make(chan struct{}),
		haltedCh:     make(chan struct{}),
		pool:         wrpc.NewTLSPool(config.Logger, config.TLS, wrpc.RoleServer),
		agentPool:    wrpc.NewTLSPool(config.Logger, config.TLS, wrpc.RoleAgent),
	}
	s.updates = newUpdateBatcher(s.proposeUpdates)
	s.hbForward = newHeartbeatForwarder(s.sendHeartbeats)
	s.snapInterval, s.snapPolicy = config.snapshotPolicy()
	s.logMeter = &logMeter{}
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
	s.registerEndpoints()
	s.raftLayer = newRaftLayer(ln.Addr(), config.TLS, config.Limits.HandshakeTimeout)

	if err := s.setupRaft(); err != nil {
		ln.Close()
		return nil, err
	}
	s.rpcConns = wrpc.NewListener(s.rpcServer, s.logger, s.raftLayer.handoff, wrpc.WithLimits(config.Limits))
	if config.TLS != nil {
		s.rpcConns.UseTLS(config.TLS, wrpc.RequireClientCert)
	}
	s.goFunc(func() { s.rpcConns.Serve(ln) })

	if err := s.setupSerf(); err != nil {
		s.Shutdown()
		return nil, err
	}
	s.unregisterMetrics = metrics.RegisterServer(s.metricsSample)
	s.goFunc(s.serfEventLoop)
	s.goFunc(s.monitorLeadership)
	s.goFunc(s.watchHalt)
	s.goFunc(func() { s.updates.run(s.shutdownCh) })
	s.goFunc(func() { s.hbForward.run(s.shutdownCh) })
	s.goFunc(s.snapshotLoop)
	if len(config.Join) > 0 {
		s.goFunc(func() { s.joinLoop(config.Join) })
	}
	s.logger.Info("server started", "rpc_addr", s.rpcAddr, "serf_addr", s.SerfAddr(),
		"bootstrap_expect", config.BootstrapExpect, "raft_state_on_disk", s.hadRaftState, "tls", config.TLS != nil)
	return s, nil
}

func (s *Server) setupRaft() error {
	dir := filepath.Join(s.config.DataDir, "raft")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("create raft dir: %w", err)
	}
	conf := raft.DefaultConfig()
	if s.config.RaftConfig != nil {
		c := *s.config.RaftConfig
		conf = &c
	}
	// weft's snapshot loop (snapshot_policy.go) takes every snapshot:
	// Raft's own policy, which counts entries, never fires.
	conf.SnapshotThreshold = math.MaxUint64
	if s.config.RaftTrailingLogs > 0 {
		conf.TrailingLogs = s.config.RaftTrailingLogs
	}
	conf.LocalID = raft.ServerID(s.config.NodeID)
	conf.Logger = s.config.Logger.Named("raft")
	conf.NotifyCh = s.raftNotifyCh
	conf.BatchApplyCh = true
	s.haltLinger = 2 * conf.HeartbeatTimeout
	conf.MaxAppendEntries = raftMaxAppendEntries // what bounds a Raft message (raft_frames.go)

	store, err := raftboltdb.New(raftboltdb.Options{Path: filepath.Join(dir, "raft.db")})
	if err != nil {
		return fmt.Errorf("open raft store: %w", err)
	}
	s.raftStore = store
	logs, err := raft.NewLogCache(512, store)
	if err != nil {
		return err
	}
	snaps, err := raft.NewFileSnapshotStoreWithLogger(dir, 2, s.config.Logger.Named("raft"))
	if err != nil {
		store.Close()
		return fmt.Errorf("open snapshot store: %w", err)
	}
	s.raftTransport = raft.NewNetworkTransportWithConfig(&raft.NetworkTransportConfig{
		Stream:  s.raftLayer,
		MaxPool: 3,
		Timeout: 10 * time.Second,
		Logger:  s.config.Logger.Named("raft_transport"),
	})
	s.hadRaftState, err = raft.HasExistingState(logs, store, snaps)
	if err != nil {
		store.Close()
		return fmt.Errorf("inspect raft state: %w", err)
	}
	if s.hadRaftState {
		s.bootstrapped.Store(true)
	} else if s.config.BootstrapExpect == 1 {
		cfg := raft.Configuration{Servers: []raft.Server{{
			ID: conf.LocalID, Address: raft.ServerAddress(s.rpcAddr), Suffrage: raft.Voter,
		}}}
		if err := raft.BootstrapCluster(conf, logs, store, snaps, s.raftTransport, cfg); err != nil {
			store.Close()
			return fmt.Errorf("bootstrap single-server cluster: %w", err)
		}
		s.bootstrapped.Store(true)
	}
	s.raft, err = raft.NewRaft(conf, &meteredFSM{FSM: s.fsm, meter: s.logMeter}, logs, store, snaps, s.raftTransport)
	if err != nil {
		store.Close()
		return fmt.Errorf("start raft: %w", err)
	}
	return nil
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
func (s *Server) IsLeader() bool { return s.raft.State() == raft.Leader }

// State returns the latest replicated state this server has applied.
func (s *Server) State() *fsm.State { return s.fsm.State() }

// Leave departs gracefully: a leader hands over by removing itself from the
// Raft configuration, then the server announces its departure in serf (so
// the leader removes it), waits to be removed, and shuts down.
func (s *Server) Leave() error {
	s.logger.Info("leaving the cluster")
	numPeers := 0
	if f := s.raft.GetConfiguration(); f.Error() == nil {
		numPeers = len(f.Configuration().Servers)
	}
	isLeader := s.IsLeader()
	if isLeader && numPeers > 1 {
		if err := s.raft.RemoveServer(raft.ServerID(s.config.NodeID), 0, 0).Error(); err != nil {
			s.logger.Error("failed to remove self from raft configuration", "error", err)
		}
	}
	if s.serf != nil {
		if err := s.serf.Leave(); err != nil {
			s.logger.Error("failed to leave serf", "error", err)
		}
	}
	if !isLeader && numPeers > 1 {
		s.awaitRemoval(10 * time.Second)
	}
	return s.Shutdown()
}

// awaitRemoval waits until this server is no longer in its own copy of the
// Raft configuration, or the timeout passes.
func (s *Server) awaitRemoval(timeout time.Duration) {
	deadline := s.clock.Now().Add(timeout)
	for s.clock.Now().Before(deadline) {
		if s.IsLeader() {
			// Elected while leaving (the others left first): nobody else can
			// remove this server, so it hands over itself, or is the last.
			if err := s.raft.RemoveServer(raft.ServerID(s.config.NodeID), 0, 0).Error(); err != nil {
				s.logger.Warn("could not remove self from raft while leaving", "error", err)
			}
			return
		}
		f := s.raft.GetConfiguration()
		if f.Error() != nil {
			return
		}
		found := false
		for _, srv := range f.Configuration().Servers {
			if srv.ID == raft.ServerID(s.config.NodeID) {
				found = true
			}
		}
		if !found {
			return
		}
		select {
		case <-s.clock.After(100 * time.Millisecond):
		case <-s.shutdownCh:
			return
		}
	}
	s.logger.Warn("leader did not remove this server from raft in time; shutting down anyway")
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
	if s.raft != nil {
		if err := s.raft.Shutdown().Error(); err != nil {
			s.logger.Error("raft shutdown", "error", err)
		}
		s.raftTransport.Close()
		s.raftStore.Close()
	}
	s.raftLayer.Close()
	s.listener.Close()
	s.rpcConns.Close()
	s.pool.Shutdown()
	s.agentPool.Shutdown()
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
