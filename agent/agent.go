package agent

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/serf/serf"
	"github.com/weft-sched/weft/internal/clock"
	"github.com/weft-sched/weft/internal/gossip"
	"github.com/weft-sched/weft/internal/identity"
	"github.com/weft-sched/weft/internal/metrics"
	wrpc "github.com/weft-sched/weft/rpc"
	"github.com/weft-sched/weft/scheduler"
)

// Agent is a weft node. Create it with New; stop it with Leave (stops its
// containers and leaves the pool) or Shutdown (like a crash).
type Agent struct {
	config *Config
	logger hclog.Logger
	clock  clock.Clock

	listener net.Listener
	rpcAddr  string
	rpcConns *wrpc.Listener
	serf     *serf.Serf
	// keyring is the agent's gossip keyring, set once gossip starts (its
	// RPC port serves before).
	keyring atomic.Pointer[gossip.Keyring]
	client  *wrpc.Client // to the servers
	mgr     *manager
	// retention removes completed containers' directories (retention.go).
	retention *logRetention
	// agentPool reaches other agents (their loads, releasing containers).
	agentPool *wrpc.Pool

	epoch atomic.Uint64
	// heartbeatSeq numbers heartbeats (HeartbeatRequest.Seq): the leader
	// refuses one that arrives after a newer one.
	heartbeatSeq atomic.Uint64
	heartbeat    chan struct{} // asks for an early heartbeat
	// heartbeating is held while a heartbeat is sent and its answer acted
	// on. Nothing else takes it but tests, which hold it to order an
	// event before this node's next heartbeat.
	heartbeating sync.Mutex
	// down is set while heartbeats fail: the servers cannot be reached.
	down atomic.Bool
	// overAt is the computation of the queue limit that first found this
	// node's queue over it (0: not over); heartbeat loop only.
	overAt int64

	sched *distScheduler
	proxy *amrmProxy
	// fed is the agent's sub-cluster's federation, as the servers tell it.
	fed *agentFederation
	seq atomic.Uint64 // opportunistic container IDs minted here

	// secret is the node secret (identity.go); keys the workload keys
	// learned from the servers.
	secret string
	keys   *workloadKeys

	// ctx ends when the agent shuts down; every goroutine it starts ends
	// with it and is waited for (wg). runCtx ends earlier, when the agent
	// leaves: registering and heartbeating stop first.
	ctx       context.Context
	cancel    context.CancelFunc
	runCancel context.CancelFunc
	runDone   chan struct{}

	shutdownOnce sync.Once
	wg           sync.WaitGroup
	// unregisterMetrics takes this agent out of metrics scrapes.
	unregisterMetrics func()
}

// New starts an agent: it stops containers a previous run left behind,
// listens for AMs and container requests, joins the pool, and registers
// with the servers as soon as it finds them.
func New(config *Config) (*Agent, error) {
	if err := config.setDefaults(); err != nil {
		return nil, err
	}
	a := &Agent{
		config:    config,
		logger:    config.Logger.Named("agent").With("node_id", config.NodeID),
		clock:     config.Clock,
		heartbeat: make(chan struct{}, 1),
		client:    wrpc.NewClient(nil, wrpc.NewTLSPool(config.Logger, config.TLS, wrpc.RoleServer)),
		agentPool: wrpc.NewTLSPool(config.Logger, config.TLS, wrpc.RoleAgent),
		runDone:   make(chan struct{}),
		// A list's loads may miss a container its AM is still starting
		// (allow half a second) and its node has not reported yet (up to
		// a heartbeat interval when heartbeats are lazy).
		sched: newDistScheduler(config.HeartbeatInterval+500*time.Millisecond, config.Clock.Now()),
	}
	a.client.Spread = true // a cluster's agents spread over its servers
	// A server that answers slowly is waited for, for as long as a
	// heartbeat may take, rather than left for another after a second:
	// the others forward to the same leader, and at thousands of nodes
	// moving on made every slow answer a new connection to another server
	// just when the servers were busiest (docs/scale.md). A server that
	// refuses the connection is still left at once, and one that timed a
	// heartbeat out is left for the next.
	a.client.AttemptTimeout = a.heartbeatTimeout()
	a.ctx, a.cancel = context.WithCancel(context.Background())
	a.proxy = newAMRMProxy(a)
	a.fed = newAgentFederation(a)
	dir := filepath.Join(config.DataDir, "containers")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("create data dir: %w", err)
	}
	secret, created, err := loadNodeSecret(config.DataDir)
	if err != nil {
		return nil, err
	}
	a.secret = secret
	nodeKey, err := loadNodeKey(config.DataDir)
	if err != nil {
		return nil, err
	}
	a.keys = newWorkloadKeys(config.NodeID, nodeKey)
	if created {
		a.logger.Info("created this node's secret; it proves to the servers that this agent is the node", "file", filepath.Join(config.DataDir, nodeSecretFile))
	}
	if n := killLeftovers(dir); n > 0 {
		a.logger.Warn("stopped containers left running by a previous run of this agent", "count", n)
	}
	cg, why := detectCgroups(config.CgroupRoot, config.NodeID, config.DataDir)
	if cg != nil {
		a.logger.Info("enforcing container memory and cpu limits", "with", cg.Label(), "cgroups", strings.Join(cg.dirs(), ","))
	} else {
		a.logger.Info("cgroup limits unavailable; container resources are accounted only", "reason", why)
	}
	a.mgr = newManager(a.logger, config.Clock, config.NodeID, dir, config.Resources, config.OpportunisticQueueLength, config.Opportunistic,
		config.KillGrace, cg, a.pokeHeartbeat)
	a.retention = newLogRetention(a.logger, dir, config.LogRetention)
	if n := a.retention.adoptLeftovers(config.Clock.Now()); n > 0 {
		a.logger.Info("keeping the directories of containers from a previous run for log_retention", "count", n, "log_retention", config.LogRetention)
	}
	a.mgr.retention = a.retention
	a.mgr.runAs = runAsPolicy{agentIsRoot: os.Geteuid() == 0, allowRoot: config.AllowRoot, runAsUser: config.RunAsUser,
		dynamicUIDs: config.DynamicUIDs}
	if err := checkContainerUsers(a.mgr.runAs, a.mgr.lookup, dir, config.Executable, a.logger); err != nil {
		return nil, err
	}
	a.mgr.isolation = detectIsolation(config.Executable)
	a.mgr.isolation.log(a.logger)

	ln, err := net.Listen("tcp", net.JoinHostPort(config.BindAddr, strconv.Itoa(port(config.RPCPort))))
	if err != nil {
		return nil, fmt.Errorf("listen for RPC: %w", err)
	}
	a.listener, a.rpcAddr = ln, ln.Addr().String()
	a.mgr.agentAddr = a.rpcAddr
	a.rpcConns = wrpc.NewListener(a.registerEndpoints(), a.logger, nil, wrpc.WithLimits(config.Limits))
	if config.TLS != nil {
		// Containers have no certificate: they reach their own node's
		// agent (which knows their account, and relays their calls for
		// other nodes), authorized by their tokens; from elsewhere, only
		// holders of a weft certificate get past the handshake.
		a.rpcConns.UseTLS(config.TLS, wrpc.LocalOptionalClientCert)
	}
	a.goFunc(func() { a.rpcConns.Serve(ln) })

	var keyring *gossip.Keyring
	a.serf, keyring, err = gossip.Create(gossip.Config{
		NodeID: config.NodeID, BindAddr: config.BindAddr, Port: port(config.SerfPort), DataDir: config.DataDir,
		Tags: map[string]string{
			gossip.TagRole: gossip.RoleAgent, gossip.TagRPCAddr: a.rpcAddr, gossip.TagID: config.NodeID,
			gossip.TagRack: config.Rack, gossip.TagBuild: config.Build,
		},
		Fast: config.SerfFastGossip, Encrypt: config.Encrypt, Logger: config.Logger.Named("serf"),
	})
	if err != nil {
		a.Shutdown()
		return nil, err
	}
	a.keyring.Store(keyring)
	a.goFunc(func() { gossip.JoinLoop(a.serf, config.Join, config.JoinRetryInterval, a.logger, a.ctx.Done()) })
	var runCtx context.Context
	runCtx, a.runCancel = context.WithCancel(a.ctx)
	a.goFunc(func() {
		defer close(a.runDone)
		a.run(runCtx)
	})
	a.goFunc(a.renewLoop)
	a.goFunc(a.proxy.sweepLoop)
	a.goFunc(a.retentionLoop)
	a.unregisterMetrics = metrics.RegisterAgent(a.metricsSample)
	a.logger.Info("agent started", "rpc_addr", a.rpcAddr, "serf_addr", gossip.Addr(a.serf),
		"resources", config.Resources.String(), "rack", config.Rack, "opportunistic_queue_length", config.OpportunisticQueueLength,
		"tls", config.TLS != nil)
	return a, nil
}

// RPCAddr returns the agent's RPC (AMRMProxy and container) address.
func (a *Agent) RPCAddr() string { return a.rpcAddr }

// NodeID returns the agent's node ID.
func (a *Agent) NodeID() string { return a.config.NodeID }

// Epoch returns the epoch of the agent's current registration (0 before).
func (a *Agent) Epoch() uint64 { return a.epoch.Load() }

// pokeHeartbeat asks for a heartbeat now (a container changed state),
// unless heartbeats are lazy.
func (a *Agent) pokeHeartbeat() {
	if a.config.LazyHeartbeats {
		return
	}
	select {
	case a.heartbeat <- struct{}{}:
	default:
	}
}

// goFunc runs f in a goroutine the agent owns: Shutdown waits for it, so f
// must return once a.ctx ends.
func (a *Agent) goFunc(f func()) {
	a.wg.Add(1)
	go func() {
		defer a.wg.Done()
		f()
	}()
}

// sleep waits d on the agent's clock; it reports false if ctx ended first.
func (a *Agent) sleep(ctx context.Context, d time.Duration) bool {
	select {
	case <-a.clock.After(d):
		return true
	case <-ctx.Done():
		return false
	}
}

// discoverServers points the client at the servers serf knows of, keeping
// those a heartbeat reported when serf knows none yet.
func (a *Agent) discoverServers(fromLeader []string) bool {
	addrs := gossip.ServerRPCAddrs(a.serf)
	if len(addrs) == 0 {
		addrs = fromLeader
	}
	if len(addrs) == 0 {
		return false
	}
	rand.Shuffle(len(addrs), func(i, j int) { addrs[i], addrs[j] = addrs[j], addrs[i] })
	a.client.SetServers(addrs)
	return true
}

// run registers and then heartbeats until ctx ends, registering again
// whenever the servers ask.
func (a *Agent) run(ctx context.Context) {
	for {
		if !a.register(ctx) {
			return
		}
		if !a.heartbeatLoop(ctx) {
			return
		}
	}
}

// registerTimeout bounds one registration call (retried across servers).
const registerTimeout = 10 * time.Second

func (a *Agent) register(ctx context.Context) bool {
	backoff := 200 * time.Millisecond
	// One request: a registration retried after a lost answer gets the
	// epoch of the first, not another one.
	mintKey, _ := identity.NodePublicKey(a.keys.nodeKey)
	req := &wrpc.NodeRegisterRequest{ID: a.config.NodeID, Address: a.rpcAddr, Rack: a.config.Rack, Capacity: a.config.Resources,
		Secret: a.secret, MintKey: mintKey, JoinToken: a.config.JoinToken}
	for {
		if req.JoinToken == "" && a.config.JoinTokenFile != "" {
			req.JoinToken = a.readJoinTokenFile()
		}
		if a.discoverServers(nil) {
			var resp wrpc.NodeRegisterResponse
			callCtx, cancel := context.WithTimeout(ctx, registerTimeout)
			err := a.client.Call(callCtx, "Node.Register", req, &resp)
			cancel()
			if err == nil {
				a.setKeys(resp.WorkloadKeys, resp.MintCert)
				a.fed.set(resp.Federation)
				a.epoch.Store(resp.Epoch)
				a.mgr.reopen()
				a.logger.Info("registered", "epoch", resp.Epoch)
				return true
			}
			if ctx.Err() != nil {
				return false
			}
			if errors.Is(err, wrpc.ErrPermissionDenied) {
				a.logger.Error("the servers refuse this node; retrying", "error", err)
			} else {
				a.logger.Warn("registration failed; retrying", "error", err)
			}
			if !wrpc.IsRetryable(err) {
				req.RequestID = "" // refused: the next attempt is a new request
				if a.config.JoinToken == "" {
					req.JoinToken = "" // read the file again: an operator may have written a new one
				}
			}
		}
		if !a.sleep(ctx, backoff) {
			return false
		}
		backoff = min(2*backoff, 5*time.Second)
	}
}

// maxJoinTokenFile bounds what is read of join_token_file.
const maxJoinTokenFile = 4 << 10

// readJoinTokenFile returns the join token in join_token_file, "" if it
// holds none (yet).
func (a *Agent) readJoinTokenFile() string {
	f, err := os.Open(a.config.JoinTokenFile)
	if err != nil {
		if !os.IsNotExist(err) {
			a.logger.Warn("cannot read join_token_file", "file", a.config.JoinTokenFile, "error", err)
		}
		return ""
	}
	defer f.Close()
	b, _ := io.ReadAll(io.LimitReader(f, maxJoinTokenFile))
	return strings.TrimSpace(string(b))
}

// heartbeatTimeout bounds one heartbeat, across every server tried: well
// under the servers' node TTL (SPEC §13), so that a server that hangs or is
// cut off costs a heartbeat or two, never the node.
func (a *Agent) heartbeatTimeout() time.Duration {
	return max(2*a.config.HeartbeatInterval, 3*time.Second)
}

// heartbeatLoop heartbeats every interval (and early when a container
// changes state). It returns false when ctx ends and true when the servers
// ask the agent to register again.
func (a *Agent) heartbeatLoop(ctx context.Context) bool {
	tick := a.clock.NewTicker(a.config.HeartbeatInterval)
	defer tick.Stop()
	hb := heartbeatState{}
	for {
		select {
		case <-tick.C():
		case <-a.heartbeat:
		case <-ctx.Done():
			return false
		}
		if reRegister, stop := a.heartbeatOnce(ctx, &hb); stop {
			return false
		} else if reRegister {
			return true
		}
	}
}

// heartbeatState is what the heartbeat loop keeps from one heartbeat to the
// next.
type heartbeatState struct {
	servers  []string // the servers the last answer named
	failures int      // heartbeats failed in a row
}

// heartbeatOnce sends one heartbeat and acts on its answer, holding
// heartbeating throughout. It reports whether the servers asked the agent
// to register again, and whether ctx ended.
func (a *Agent) heartbeatOnce(ctx context.Context, hb *heartbeatState) (reRegister, stop bool) {
	a.heartbeating.Lock()
	defer a.heartbeating.Unlock()
	a.discoverServers(hb.servers)
	listAt := a.sched.view().At
	_, certExpiry := a.keys.minter()
	a.mgr.measure(a.clock.Now()) // what the containers use, for overcommit and node status
	req := &wrpc.HeartbeatRequest{NodeID: a.config.NodeID, Epoch: a.epoch.Load(), Secret: a.secret, Containers: a.mgr.reports(),
		Load: a.mgr.load(), LeastLoadedAt: listAt, SameListOK: true, WorkloadKeyID: a.keys.newestID(), Seq: a.heartbeatSeq.Add(1),
		AppsToCheck: a.retention.appsToCheck(a.clock.Now()), MintCertExpiry: certExpiry}
	if a.proxy != nil {
		req.Load.OpportunisticDemand = a.proxy.demand()
	}
	var resp wrpc.HeartbeatResponse
	hbCtx, cancel := context.WithTimeout(ctx, a.heartbeatTimeout())
	err := a.client.Call(hbCtx, "Node.Heartbeat", req, &resp)
	cancel()
	if ctx.Err() != nil {
		return false, true
	}
	if err != nil {
		a.down.Store(true)
		if hb.failures++; hb.failures == 1 || hb.failures%30 == 0 {
			a.logger.Warn("heartbeat failed", "error", err, "consecutive_failures", hb.failures)
		}
		return false, false
	}
	a.down.Store(false)
	hb.failures = 0
	if resp.ReRegister {
		// The stopped containers are reported after the registration:
		// the servers recorded those they knew as lost already, and
		// learn of the rest (opportunistic ones started since the last
		// report), so their AMs hear the end of every one.
		a.logger.Warn("the servers no longer know this node at its epoch; stopping its containers and registering again", "epoch", req.Epoch)
		a.mgr.stopAll(scheduler.ReasonLost)
		return true, false
	}
	hb.servers = resp.Servers
	a.fed.set(resp.Federation)
	a.setKeys(resp.WorkloadKeys, resp.MintCert)
	a.mgr.recorded(resp.Recorded)
	a.sched.update(&resp, listAt, a.clock.Now())
	a.rebalance(resp.QueueLimit, resp.LeastLoadedAt)
	a.mgr.ack(resp.Acked)
	a.retention.checked(req.AppsToCheck, resp.AppsRunning, a.clock.Now())
	for _, id := range resp.Promote {
		a.mgr.promote(id)
	}
	for _, id := range resp.Demote {
		a.mgr.demote(id)
	}
	for _, k := range resp.Kill {
		a.mgr.stop(k.ID, k.Reason)
	}
	for _, l := range resp.LaunchAMs {
		a.launchAM(l)
	}
	return false, false
}

// setKeys takes the workload keys and the node certificate the servers
// sent (none: unchanged).
func (a *Agent) setKeys(keys []wrpc.WorkloadKey, cert string) {
	if err := a.keys.set(keys); err != nil {
		a.logger.Error("the servers sent unusable workload keys; keeping the previous ones", "error", err)
	}
	if err := a.keys.setCert(cert); err != nil {
		a.logger.Error("the servers sent an unusable certificate of this node's key; keeping the previous one", "error", err)
	}
}

// rebalance sheds queued opportunistic containers above the leader's queue
// limit (SPEC §10) once two successive computations of the limit (at)
// both found the queue over it. A limit is computed from loads up to an
// interval old: a burst that filled every queue since would be shed
// against it, though the next computation sees the queues balanced.
func (a *Agent) rebalance(limit int, at int64) {
	if limit <= 0 || at == 0 {
		return // no limit known (a new leader gathering loads)
	}
	if a.mgr.load().Queued <= limit {
		a.overAt = 0
		return
	}
	switch {
	case a.overAt == 0:
		a.overAt = at
	case a.overAt != at:
		a.mgr.shed(limit)
		a.overAt = 0
	}
}

// serversDown reports whether the last heartbeat failed to reach a server.
func (a *Agent) serversDown() bool { return a.down.Load() }

// LeastLoaded returns the least-loaded list the distributed scheduler
// allocates from.
func (a *Agent) LeastLoaded() []scheduler.LeastLoadedNode {
	l, _ := a.sched.snapshot()
	return l
}

// loadResponse describes this node for Agent.Load.
func (a *Agent) loadResponse() wrpc.AgentLoadResponse {
	return wrpc.AgentLoadResponse{NodeID: a.config.NodeID, Rack: a.config.Rack, Capacity: a.config.Resources, Load: a.mgr.load()}
}

// launchAM starts an app's AM in the container the leader placed here.
func (a *Agent) launchAM(l wrpc.AMLaunch) {
	if l.AMType != scheduler.AMTypeDShell && l.AMType != scheduler.AMTypeMapReduce {
		a.logger.Error("unknown AM type; cannot launch", "app", l.Container.AppID, "am_type", l.AMType)
		return
	}
	env := map[string]string{
		wrpc.EnvAppAttempt: strconv.Itoa(l.Container.Attempt),
		wrpc.EnvAMRMAddr:   a.rpcAddr,
	}
	a.mgr.start(l.Container, a.withTLSEnv(wrpc.LaunchSpec{Command: []string{a.config.Executable, "am", l.AMType}, Env: env,
		Secrets: map[string]string{wrpc.SecretAMToken: l.Token}}))
}

// withTLSEnv is launch with, when TLS is on, this node's CA file and
// region in its environment (rpc.EnvCACert, rpc.EnvRegion): what a
// container dials agents with — an AM, or a reduce task fetching map
// output. The node's own paths win over what the launch says, which was
// written on another node.
func (a *Agent) withTLSEnv(launch wrpc.LaunchSpec) wrpc.LaunchSpec {
	tc := a.config.TLS
	if tc == nil {
		return launch
	}
	env := make(map[string]string, len(launch.Env)+2)
	for k, v := range launch.Env {
		env[k] = v
	}
	env[wrpc.EnvCACert], env[wrpc.EnvRegion] = tc.CAFile(), tc.Region()
	launch.Env = env
	return launch
}

// leaveTimeout bounds the final report and deregistration of Leave.
const leaveTimeout = 10 * time.Second

// Leave departs gracefully: it stops heartbeating (so nothing re-registers
// the node), has the node DRAINING (nothing more is placed there), stops
// every container and waits for them, reports their ends, takes the node
// out of service (DOWN), leaves the pool and shuts down. The containers end with reason
// node_stopped: their AMs run their work again elsewhere and count no
// failure, and an AM stopped here starts a new attempt that does not count
// against max_am_attempts.
func (a *Agent) Leave() error {
	a.logger.Info("leaving: stopping heartbeats and every container")
	a.runCancel()
	<-a.runDone
	if epoch := a.epoch.Load(); epoch > 0 {
		// DRAINING first: the AMs of the containers stopped here ask again
		// as soon as they hear of it, and nothing of theirs may land here.
		ctx, cancel := context.WithTimeout(a.ctx, leaveTimeout)
		var wr wrpc.WriteResponse
		if err := a.client.Call(ctx, "Node.Deregister", &wrpc.NodeDeregisterRequest{ID: a.config.NodeID, Epoch: epoch, Secret: a.secret,
			Leaving: true}, &wr); err != nil {
			a.logger.Warn("could not tell the servers this node is leaving; stopping its containers anyway", "error", err)
		}
		cancel()
	}
	a.mgr.stopAll(scheduler.ReasonNodeStopped)
	if epoch := a.epoch.Load(); epoch > 0 {
		ctx, cancel := context.WithTimeout(a.ctx, leaveTimeout)
		var resp wrpc.HeartbeatResponse
		if err := a.client.Call(ctx, "Node.Heartbeat", &wrpc.HeartbeatRequest{NodeID: a.config.NodeID, Epoch: epoch, Secret: a.secret,
			Containers: a.mgr.reports(), Load: a.mgr.load(), Seq: a.heartbeatSeq.Add(1)}, &resp); err != nil {
			a.logger.Warn("could not report the stopped containers; the servers will find them lost", "error", err)
		}
		var wr wrpc.WriteResponse
		if err := a.client.Call(ctx, "Node.Deregister", &wrpc.NodeDeregisterRequest{ID: a.config.NodeID, Epoch: epoch, Secret: a.secret}, &wr); err != nil {
			a.logger.Warn("could not take the node out of service; the servers will mark it down when gossip says it left", "error", err)
		} else {
			a.logger.Info("node taken out of service", "epoch", epoch)
		}
		cancel()
	}
	if a.serf != nil {
		if err := a.serf.Leave(); err != nil {
			a.logger.Warn("leave the gossip pool", "error", err)
		}
	}
	return a.Shutdown()
}

// Shutdown stops the agent at once, leaving its containers' processes to
// die with it (they are in their own process groups with a parent-death
// signal); the servers see the node fail.
func (a *Agent) Shutdown() error {
	a.shutdownOnce.Do(func() {
		if a.unregisterMetrics != nil {
			a.unregisterMetrics()
		}
		a.cancel()
		if a.serf != nil {
			a.serf.Shutdown()
		}
		a.listener.Close()
		a.rpcConns.Close()
		a.client.Close()
		a.agentPool.Shutdown()
		a.fed.shutdown()
		a.wg.Wait()
		if a.mgr != nil {
			a.mgr.cg.close()
		}
		a.logger.Info("agent stopped")
	})
	return nil
}
