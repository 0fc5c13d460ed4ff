package router

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
	"github.com/weft-sched/weft/internal/clock"
	"github.com/weft-sched/weft/internal/gossip"
	"github.com/weft-sched/weft/internal/raftnode"
	"github.com/weft-sched/weft/router/fedstate"
	wrpc "github.com/weft-sched/weft/rpc"
)

// Router is one weft router. Create it with New; stop it with Leave (a
// graceful departure from the quorum) or Shutdown (as a crash would).
type Router struct {
	config *Config
	logger hclog.Logger
	clock  clock.Clock

	fsm  *fedstate.FSM
	node *raftnode.Node
	raft *raft.Raft

	serf        *serf.Serf
	serfEventCh chan serf.Event

	listener   net.Listener
	rpcAddr    string
	rpcServer  *wrpc.Server
	rpcConns   *wrpc.Listener
	pool       *wrpc.Pool // to routers
	serverPool *wrpc.Pool // to the sub-clusters' servers

	// leaderSince is when this router last became a ready leader: a
	// sub-cluster is not marked LOST before subcluster_timeout from then,
	// as a new leader may not have heard from it yet (SPEC §13).
	leaderSince atomic.Int64
	weightsMu   sync.Mutex    // one generator run at a time
	grants      grants        // tokens sub-clusters granted capabilities (acl.go)
	aclChecks   chan struct{} // a token per question about a token in flight (acl.go)
	shutdownMu  sync.Mutex
	shutdown    bool
	shutdownCh  chan struct{}
	wg          sync.WaitGroup
}

// New starts a router: its stores in the data directory, Raft, the RPC
// listener and serf, then joining and bootstrapping.
func New(config *Config) (*Router, error) {
	if err := config.setDefaults(); err != nil {
		return nil, err
	}
	r := &Router{
		config:      config,
		logger:      config.Logger.Named("router").With("node_id", config.NodeID),
		clock:       config.Clock,
		fsm:         fedstate.New(),
		serfEventCh: make(chan serf.Event, 256),
		shutdownCh:  make(chan struct{}),
		pool:        wrpc.NewTLSPool(config.Logger, config.TLS, wrpc.RoleRouter),
		serverPool:  wrpc.NewTLSPool(config.Logger, config.TLS, wrpc.RoleServer),
		aclChecks:   make(chan struct{}, maxACLChecks),
	}
	if err := os.MkdirAll(config.DataDir, 0o755); err != nil {
		return nil, fmt.Errorf("create data dir: %w", err)
	}
	ln, err := net.Listen("tcp", net.JoinHostPort(config.BindAddr, strconv.Itoa(port(config.RPCPort))))
	if err != nil {
		return nil, fmt.Errorf("listen for RPC: %w", err)
	}
	r.listener, r.rpcAddr = ln, ln.Addr().String()
	r.rpcServer = wrpc.NewServer(r.logger.Named("rpc"))
	r.rpcServer.Authorize = r.authorize
	r.rpcServer.AuthorizeHeader = r.authorizeHeader
	interval, policy := snapshots()
	r.node, err = raftnode.New(raftnode.Config{
		NodeID: config.NodeID, DataDir: config.DataDir, Role: gossip.RoleRouter, PeerRole: wrpc.RoleRouter,
		BootstrapExpect: config.BootstrapExpect, RaftConfig: config.RaftConfig, TrailingLogs: config.RaftTrailingLogs,
		SnapshotInterval: interval, Snapshots: policy, RPCHoldTimeout: config.RPCHoldTimeout,
		ReconcileInterval: config.ReconcileInterval, HandshakeTimeout: config.Limits.HandshakeTimeout,
		TLS: config.TLS, Pool: r.pool, Clock: config.Clock, Logger: config.Logger,
	}, raftnode.Hooks{
		Establish:    func(context.Context) { r.leaderSince.Store(r.clock.Now().UnixNano()) },
		Duties:       []func(context.Context){r.lostLoop, r.generatorLoop},
		Halted:       func() bool { return r.fsm.Halted() != nil },
		AppliedIndex: func() uint64 { return r.fsm.State().Index() },
	}, r.shutdownCh, ln.Addr(), r.fsm)
	if err != nil {
		ln.Close()
		return nil, err
	}
	r.raft = r.node.Raft()
	r.registerEndpoints()
	r.rpcConns = wrpc.NewListener(r.rpcServer, r.logger, r.node.Handoff, wrpc.WithLimits(config.Limits), wrpc.WithRaftRole(wrpc.RoleRouter))
	if config.TLS != nil {
		r.rpcConns.UseTLS(config.TLS, wrpc.RequireClientCert)
	}
	r.goFunc(func() { r.rpcConns.Serve(ln) })

	tags := map[string]string{gossip.TagRole: gossip.RoleRouter, gossip.TagRPCAddr: r.rpcAddr, gossip.TagID: config.NodeID,
		gossip.TagBuild: config.Build}
	if config.BootstrapExpect > 0 {
		tags[gossip.TagExpect] = strconv.Itoa(config.BootstrapExpect)
	}
	var keyring *gossip.Keyring
	r.serf, keyring, err = gossip.Create(gossip.Config{NodeID: config.NodeID, BindAddr: config.BindAddr, Port: port(config.SerfPort),
		DataDir: config.DataDir, Tags: tags, Fast: config.SerfFastGossip, Encrypt: config.Encrypt,
		Logger: config.Logger.Named("serf"), EventCh: r.serfEventCh})
	if err != nil {
		r.Shutdown()
		return nil, err
	}
	r.node.Start(r.serf, keyring, r.goFunc)
	r.goFunc(r.serfEventLoop)
	if len(config.Join) > 0 {
		r.goFunc(func() { gossip.JoinLoop(r.serf, config.Join, config.JoinRetryInterval, r.logger, r.shutdownCh) })
	}
	r.logger.Info("router started", "rpc_addr", r.rpcAddr, "serf_addr", gossip.Addr(r.serf),
		"bootstrap_expect", config.BootstrapExpect, "raft_state_on_disk", r.node.HadState(), "tls", config.TLS != nil)
	return r, nil
}

// serfEventLoop hands routers' membership to Raft's plumbing.
func (r *Router) serfEventLoop() {
	retry := r.clock.NewTicker(time.Second)
	defer retry.Stop()
	for {
		select {
		case e := <-r.serfEventCh:
			if me, ok := e.(serf.MemberEvent); ok {
				for _, m := range me.Members {
					r.node.MemberEvent(me.Type, m)
				}
			}
		case <-retry.C():
			r.node.MaybeBootstrap()
		case <-r.shutdownCh:
			return
		}
	}
}

// RPCAddr returns the address of the RPC (and Raft) listener.
func (r *Router) RPCAddr() string { return r.rpcAddr }

// SerfAddr returns the address serf gossips on.
func (r *Router) SerfAddr() string {
	if r.serf == nil {
		return ""
	}
	return gossip.Addr(r.serf)
}

// Call answers an RPC method in process for a client of the HTTP API
// (SPEC §16), through the same capability check, authorizer, forwarding
// and handler as a request from the network.
func (r *Router) Call(ctx context.Context, method string, args, reply any) error {
	return r.rpcServer.Call(ctx, method, args, reply)
}

// Capabilities returns the capability every RPC method declares.
func (r *Router) Capabilities() map[string]wrpc.Capability { return r.rpcServer.Capabilities() }

// IsLeader reports whether this router is the Raft leader.
func (r *Router) IsLeader() bool { return r.node.IsLeader() }

// Ready reports whether this router is a leader ready to answer.
func (r *Router) Ready() bool { return r.node.Ready().Load() }

// State returns the federation state this router has applied.
func (r *Router) State() *fedstate.State { return r.fsm.State() }

// Leave departs gracefully, then shuts down.
func (r *Router) Leave() error {
	r.logger.Info("leaving the federation's router quorum")
	r.node.Leave()
	return r.Shutdown()
}

// Shutdown stops the router without leaving: its peers see it fail.
func (r *Router) Shutdown() error {
	r.shutdownMu.Lock()
	if r.shutdown {
		r.shutdownMu.Unlock()
		r.wg.Wait()
		return nil
	}
	r.shutdown = true
	close(r.shutdownCh)
	r.shutdownMu.Unlock()
	if r.serf != nil {
		r.serf.Shutdown()
	}
	r.node.Shutdown()
	r.listener.Close()
	r.rpcConns.Close()
	r.pool.Shutdown()
	r.serverPool.Shutdown()
	r.wg.Wait()
	r.logger.Info("router stopped")
	return nil
}

func (r *Router) goFunc(f func()) {
	r.wg.Add(1)
	go func() {
		defer r.wg.Done()
		f()
	}()
}

// apply proposes a federation command and returns the FSM's answer, a
// rejection turned into the RPC code its kind maps to.
func (r *Router) apply(ctx context.Context, t fedstate.MessageType, body any) (any, uint64, error) {
	buf, err := fedstate.Encode(t, body)
	if err != nil {
		return nil, 0, err
	}
	res, index, err := r.node.Apply(ctx, buf)
	if err != nil {
		return nil, 0, err
	}
	if err, ok := res.(error); ok {
		return nil, index, rejection(err)
	}
	return res, index, nil
}

// callMember calls another router of the routers' gossip pool at the RPC
// address it gossips, over mutual TLS with a router's certificate (the
// keyring methods reach every member so).
func (r *Router) callMember(ctx context.Context, m serf.Member, method string, args, reply any) error {
	addr := m.Tags[gossip.TagRPCAddr]
	switch role := m.Tags[gossip.TagRole]; {
	case addr == "":
		return fmt.Errorf("it gossips no RPC address")
	case role != gossip.RoleRouter:
		return fmt.Errorf("its role %q is not a router's", role)
	}
	return r.pool.Call(ctx, addr, method, args, reply)
}
