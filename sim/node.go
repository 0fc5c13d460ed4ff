package sim

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/weft-sched/weft/internal/clock"
	"github.com/weft-sched/weft/internal/identity"
	wrpc "github.com/weft-sched/weft/rpc"
	"github.com/weft-sched/weft/scheduler"
)

// NodeConfig describes one simulated node.
type NodeConfig struct {
	ID       string
	Rack     string
	Capacity scheduler.Resources
	// Servers are the servers' RPC addresses.
	Servers []string
	// JoinToken registers the node on servers with ACLs on.
	JoinToken string
	// Heartbeat is the heartbeat interval.
	Heartbeat time.Duration
	// QueueLength is the opportunistic queue's length (0: reject what does
	// not fit at once).
	QueueLength int
	Clock       clock.Clock
	Logger      hclog.Logger
	// OnLaunchAM is called, once per attempt, when the servers tell this
	// node to launch an AM: the simulation starts a simulated AM for it.
	OnLaunchAM func(n *Node, l wrpc.AMLaunch)
	// Stats receives heartbeat latencies and container completions.
	Stats *Stats
	// AMRMProxy gives the node a simulated AMRMProxy (Proxy) that the AMs
	// launched on it allocate opportunistic asks through.
	AMRMProxy bool
	// Policy orders the node's opportunistic queue and picks what a
	// guaranteed arrival evicts or pauses, as an agent's opportunistic
	// block does.
	Policy scheduler.LocalPolicy
}

// simContainer is one container the node holds: running for its task's
// duration, queued, or completed and not acknowledged yet.
type simContainer struct {
	report wrpc.ContainerReport
	dur    time.Duration // how long it runs once started
	endAt  time.Time     // when it completes, once running
	left   time.Duration // what it has left to run, while paused
	timer  *time.Timer   // completes it at endAt, on a live node
	// onEnd, if set, is told when the container completes (the AM's task).
	onEnd func(reason scheduler.ExitReason)
}

// Node is a simulated node: it registers and heartbeats over the real
// node protocol with one connection of its own, as an agent does, and
// "runs" the containers started on it for their task's duration, deciding
// what starts, queues or is evicted with the agent's own
// scheduler.LocalScheduler. It runs no processes.
type Node struct {
	cfg    NodeConfig
	client *wrpc.Client
	secret string
	proxy  *Proxy // nil without an AMRMProxy

	mu sync.Mutex
	// live is set once Run began: containers then complete when their time
	// is up, not only when a heartbeat looks.
	live  bool
	epoch uint64
	seq   uint64 // the last heartbeat's HeartbeatRequest.Seq
	keyID uint32 // the newest workload key the servers sent
	// nodeKey is the node's own key; verifier the servers' public keys;
	// signer mints its proxy's opportunistic container tokens once the
	// servers certified the key (nil before).
	nodeKey    []byte
	verifier   *identity.Verifier
	signer     *identity.NodeSigner
	local      *scheduler.LocalScheduler
	containers map[string]*simContainer
	launched   map[string]bool // AM containers handed to OnLaunchAM
	// Reregistrations counts the times the servers asked this node to
	// register again (it was marked DOWN or they restarted).
	reregistrations int
	// lastOK is when the servers last answered a heartbeat without asking
	// the node to register again.
	lastOK time.Time
	// poke asks for a heartbeat before the next tick (pokeHeartbeat).
	poke chan struct{}
}

// NewNode returns a node; Run makes it live.
func NewNode(cfg NodeConfig) (*Node, error) {
	secret, err := identity.NewNodeSecret()
	if err != nil {
		return nil, err
	}
	if cfg.Clock == nil {
		cfg.Clock = clock.Real{}
	}
	if cfg.Logger == nil {
		cfg.Logger = hclog.NewNullLogger()
	}
	nodeKey, err := identity.NewNodeKey()
	if err != nil {
		return nil, err
	}
	n := &Node{cfg: cfg, secret: secret, nodeKey: nodeKey, poke: make(chan struct{}, 1), client: spreadClient(cfg.Servers, heartbeatTimeout(cfg.Heartbeat)),
		local: scheduler.NewLocalScheduler(cfg.Capacity, cfg.QueueLength), containers: map[string]*simContainer{},
		launched: map[string]bool{}}
	n.local.SetPolicy(cfg.Policy)
	if cfg.AMRMProxy {
		n.proxy = newProxy(n)
	}
	return n, nil
}

// Proxy returns the node's AMRMProxy, nil if it has none.
func (n *Node) Proxy() *Proxy { return n.proxy }

// ID returns the node's ID.
func (n *Node) ID() string { return n.cfg.ID }

// Address is the RPC address the node registers with: simulated nodes
// listen nowhere, simulated AMs reach them in-process.
func (n *Node) Address() string { return "sim.invalid:0" }

// Reregistrations returns how often the servers told the node to register
// again.
func (n *Node) Reregistrations() int {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.reregistrations
}

// LastHeartbeat returns when the servers last answered a heartbeat
// without asking the node to register again (zero: never).
func (n *Node) LastHeartbeat() time.Time {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.lastOK
}

// Run registers and heartbeats until ctx ends, registering again when the
// servers ask.
func (n *Node) Run(ctx context.Context) {
	// A context of the node's own: every heartbeat's deadline is its child,
	// and 10,000 nodes' deadlines as children of one shared context
	// contended for its lock and regrew its map of children.
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	defer n.client.Close()
	n.mu.Lock()
	n.live = true
	n.mu.Unlock()
	defer func() {
		n.mu.Lock()
		n.live = false
		for _, c := range n.containers {
			if c.timer != nil {
				c.timer.Stop()
			}
		}
		n.mu.Unlock()
	}()
	for ctx.Err() == nil {
		if !n.register(ctx) {
			return
		}
		n.heartbeatLoop(ctx)
	}
}

func (n *Node) register(ctx context.Context) bool {
	mintKey, _ := identity.NodePublicKey(n.nodeKey)
	req := &wrpc.NodeRegisterRequest{ID: n.cfg.ID, Address: n.Address(), Rack: n.cfg.Rack, Capacity: n.cfg.Capacity, Secret: n.secret,
		MintKey: mintKey, JoinToken: n.cfg.JoinToken}
	backoff := 200 * time.Millisecond
	for {
		var resp wrpc.NodeRegisterResponse
		callCtx, cancel := context.WithTimeout(ctx, 10*time.Second)
		err := n.client.Call(callCtx, "Node.Register", req, &resp)
		cancel()
		if err == nil {
			n.mu.Lock()
			n.epoch = resp.Epoch
			n.setKeysLocked(resp.WorkloadKeys, resp.MintCert)
			n.mu.Unlock()
			return true
		}
		if ctx.Err() != nil {
			return false
		}
		if !wrpc.IsRetryable(err) {
			req.RequestID = ""
		}
		n.cfg.Logger.Debug("registration failed; retrying", "node", n.cfg.ID, "error", err)
		select {
		case <-n.cfg.Clock.After(backoff):
		case <-ctx.Done():
			return false
		}
		backoff = min(2*backoff, 5*time.Second)
	}
}

// pokeHeartbeat asks for a heartbeat now, as an agent's AMRMProxy does
// when its AMs' opportunistic demand rose (the leader grows its window in
// the answer).
func (n *Node) pokeHeartbeat() {
	select {
	case n.poke <- struct{}{}:
	default:
	}
}

// heartbeatLoop heartbeats every interval, and early when poked; it returns when ctx ends or the
// servers ask the node to register again.
func (n *Node) heartbeatLoop(ctx context.Context) {
	tick := n.cfg.Clock.NewTicker(n.cfg.Heartbeat)
	defer tick.Stop()
	for {
		select {
		case <-tick.C():
		case <-n.poke:
		case <-ctx.Done():
			return
		}
		now := n.cfg.Clock.Now()
		n.mu.Lock()
		n.completeDue(now)
		n.local.SetTime(now)
		n.act(n.local.ExpirePauses(), now)
		n.act(n.local.SetUsage(n.measuredLocked()), now)
		n.seq++
		req := &wrpc.HeartbeatRequest{NodeID: n.cfg.ID, Epoch: n.epoch, Secret: n.secret, Containers: n.reports(), Load: n.load(), Seq: n.seq,
			WorkloadKeyID: n.keyID}
		if n.signer != nil {
			req.MintCertExpiry = n.signer.Expiry()
		}
		n.mu.Unlock()
		if n.proxy != nil {
			req.LeastLoadedAt, req.SameListOK = n.proxy.listAt(), true
			req.Load.OpportunisticDemand = n.proxy.demand()
		}
		var resp wrpc.HeartbeatResponse
		hbCtx, cancel := context.WithTimeout(ctx, heartbeatTimeout(n.cfg.Heartbeat))
		began := time.Now()
		err := n.client.Call(hbCtx, "Node.Heartbeat", req, &resp)
		cancel()
		if ctx.Err() != nil {
			return
		}
		if err != nil {
			n.cfg.Stats.HeartbeatFailed(err)
			continue
		}
		n.cfg.Stats.Heartbeat(time.Since(began))
		if resp.ReRegister {
			n.mu.Lock()
			n.reregistrations++
			for id := range n.containers {
				n.stopLocked(id, scheduler.ReasonLost, now)
			}
			n.mu.Unlock()
			return
		}
		n.mu.Lock()
		n.lastOK = time.Now()
		n.setKeysLocked(resp.WorkloadKeys, resp.MintCert)
		for _, id := range resp.Recorded {
			if c, ok := n.containers[id]; ok {
				c.report.Token = "" // the servers hold it: no more need to prove who minted it
			}
		}
		n.mu.Unlock()
		if len(resp.Servers) > 0 {
			n.client.SetServers(resp.Servers)
		}
		if n.proxy != nil {
			n.proxy.update(&resp, req.LeastLoadedAt, n.cfg.Clock.Now())
		}
		n.apply(&resp, now)
	}
}

// apply carries out a heartbeat's answer: acknowledgements, kills,
// promotions and AM launches.
func (n *Node) apply(resp *wrpc.HeartbeatResponse, now time.Time) {
	var launch []wrpc.AMLaunch
	n.mu.Lock()
	for _, id := range resp.Acked {
		if c, ok := n.containers[id]; ok && c.report.State == scheduler.ContainerCompleted {
			delete(n.containers, id)
			delete(n.launched, id)
		}
	}
	for _, id := range resp.Promote {
		if n.local.Promote(id) {
			if c, ok := n.containers[id]; ok {
				c.report.ExecutionType = string(scheduler.Guaranteed)
			}
		}
	}
	for _, k := range resp.Kill {
		n.stopLocked(k.ID, k.Reason, now)
	}
	if resp.QueueLimit > 0 && n.local.Load().Queued > resp.QueueLimit {
		n.act(n.local.Shed(resp.QueueLimit), now)
	}
	for _, l := range resp.LaunchAMs {
		if n.launched[l.Container.ID] {
			continue
		}
		n.launched[l.Container.ID] = true
		n.startLocked(l.Container, 0, nil, now) // an AM runs until its AM finishes
		launch = append(launch, l)
	}
	n.mu.Unlock()
	for _, l := range launch {
		if n.cfg.OnLaunchAM != nil {
			n.cfg.OnLaunchAM(n, l)
		}
	}
}

// Start runs a container placed on this node for dur (0: until Finish),
// as Container.Start does on an agent; onEnd is told when it completes.
// It returns the container's state after the start: RUNNING, QUEUED or
// COMPLETED (rejected).
func (n *Node) Start(ci wrpc.ContainerInfo, dur time.Duration, onEnd func(scheduler.ExitReason)) scheduler.ContainerState {
	now := n.cfg.Clock.Now()
	n.mu.Lock()
	defer n.mu.Unlock()
	if _, dup := n.containers[ci.ID]; dup {
		return n.containers[ci.ID].report.State
	}
	return n.startLocked(ci, dur, onEnd, now)
}

func (n *Node) startLocked(ci wrpc.ContainerInfo, dur time.Duration, onEnd func(scheduler.ExitReason), now time.Time) scheduler.ContainerState {
	et := scheduler.ExecutionType(ci.ExecutionType)
	if et == "" {
		et = scheduler.Guaranteed
	}
	c := &simContainer{dur: dur, onEnd: onEnd, report: wrpc.ContainerReport{ID: ci.ID, AppID: ci.AppID, Attempt: ci.Attempt, AskID: ci.AskID,
		Resources: ci.Resources, ExecutionType: string(et), State: scheduler.ContainerQueued, AllocatedAt: ci.AllocatedAt, At: now.UnixNano()}}
	if et == scheduler.Opportunistic {
		c.report.Token = ci.Token // until the servers record it
	}
	n.containers[ci.ID] = c
	n.local.SetTime(now)
	n.act(n.local.Submit(scheduler.LocalHints(scheduler.LocalContainer{ID: ci.ID, AppID: ci.AppID, Resources: ci.Resources, ExecutionType: et},
		ci.ExpectedDuration, ci.Progress)), now)
	return c.report.State
}

// Finish completes a container that runs until told (an AM's), exit 0.
func (n *Node) Finish(id string) {
	now := n.cfg.Clock.Now()
	n.mu.Lock()
	defer n.mu.Unlock()
	if c, ok := n.containers[id]; ok && c.report.State != scheduler.ContainerCompleted {
		n.complete(c, scheduler.ReasonExited, now)
		n.act(n.finished(id, now), now)
	}
}

// Stop stops a container at once with reason, as Container.Stop does on
// an agent.
func (n *Node) Stop(id string, reason scheduler.ExitReason) {
	now := n.cfg.Clock.Now()
	n.mu.Lock()
	defer n.mu.Unlock()
	n.stopLocked(id, reason, now)
}

// stopLocked stops a container at once (simulated processes exit when
// told) with reason.
func (n *Node) stopLocked(id string, reason scheduler.ExitReason, now time.Time) {
	c, ok := n.containers[id]
	if !ok || c.report.State == scheduler.ContainerCompleted {
		return
	}
	n.local.SetTime(now)
	act := n.local.Stop(id, reason)
	n.act(act, now)
	if c.report.State != scheduler.ContainerCompleted {
		n.complete(c, reason, now)
		n.act(n.finished(id, now), now)
	}
}

// act carries out the local scheduler's actions: starts run their
// container's duration, kills and drops complete at once.
func (n *Node) act(a scheduler.Actions, now time.Time) {
	n.local.SetTime(now)
	for len(a.Start)+len(a.Kill)+len(a.Drop)+len(a.Pause)+len(a.Resume) > 0 {
		var next scheduler.Actions
		for _, id := range a.Pause {
			if c, ok := n.containers[id]; ok && c.report.State == scheduler.ContainerRunning {
				if c.timer != nil {
					c.timer.Stop()
				}
				c.left = max(0, c.endAt.Sub(now))
				c.report.State, c.report.At = scheduler.ContainerPaused, now.UnixNano()
			}
		}
		for _, id := range a.Resume {
			if c, ok := n.containers[id]; ok && c.report.State == scheduler.ContainerPaused {
				c.report.State, c.report.At = scheduler.ContainerRunning, now.UnixNano()
				c.endAt = now.Add(c.left)
				if n.live {
					c.timer = time.AfterFunc(c.left, func() { n.expire(id) })
				}
			}
		}
		for _, id := range a.Start {
			if c, ok := n.containers[id]; ok {
				c.report.State, c.report.StartedAt, c.report.At = scheduler.ContainerRunning, now.UnixNano(), now.UnixNano()
				if c.dur > 0 {
					c.endAt = now.Add(c.dur)
					if n.live {
						c.timer = time.AfterFunc(c.dur, func() { n.expire(id) })
					}
				}
			}
		}
		for _, s := range a.Drop {
			if c, ok := n.containers[s.ID]; ok {
				n.complete(c, s.Reason, now)
			}
		}
		for _, s := range a.Kill {
			if c, ok := n.containers[s.ID]; ok {
				n.complete(c, s.Reason, now)
			}
			fin := n.local.Finished(s.ID)
			next.Start = append(next.Start, fin.Start...)
			next.Kill = append(next.Kill, fin.Kill...)
			next.Drop = append(next.Drop, fin.Drop...)
			next.Pause = append(next.Pause, fin.Pause...)
			next.Resume = append(next.Resume, fin.Resume...)
		}
		a = next
	}
}

// finished tells the local scheduler that a container's process exited
// at now.
func (n *Node) finished(id string, now time.Time) scheduler.Actions {
	n.local.SetTime(now)
	return n.local.Finished(id)
}

// expire completes a running container whose time is up, as its process
// exits, and starts what the room it leaves lets start: a container ends
// when it ends, not when the next heartbeat looks (which only reports it).
func (n *Node) expire(id string) {
	now := n.cfg.Clock.Now()
	n.mu.Lock()
	defer n.mu.Unlock()
	if c, ok := n.containers[id]; ok && c.report.State == scheduler.ContainerRunning && !c.endAt.IsZero() {
		n.complete(c, scheduler.ReasonExited, now)
		n.act(n.finished(id, now), now)
	}
}

// complete marks a container completed with reason (exit 0 when it
// exited by itself).
func (n *Node) complete(c *simContainer, reason scheduler.ExitReason, now time.Time) {
	if c.report.State == scheduler.ContainerCompleted {
		return
	}
	if c.timer != nil {
		c.timer.Stop()
	}
	c.report.State, c.report.Reason, c.report.At = scheduler.ContainerCompleted, reason, now.UnixNano()
	if reason == scheduler.ReasonExited {
		zero := 0
		c.report.ExitCode = &zero
	}
	if c.onEnd != nil {
		go c.onEnd(reason)
	}
}

// completeDue completes the running containers whose time is up.
func (n *Node) completeDue(now time.Time) {
	for id, c := range n.containers {
		if c.report.State == scheduler.ContainerRunning && !c.endAt.IsZero() && !now.Before(c.endAt) {
			n.complete(c, scheduler.ReasonExited, now)
			n.act(n.finished(id, now), now)
		}
	}
}

// setKeysLocked takes the servers' public keys and the certificate of the
// node's key from an answer, as an agent does (none: unchanged). n.mu is
// held.
func (n *Node) setKeysLocked(keys []wrpc.WorkloadKey, cert string) {
	if len(keys) > 0 {
		pub := make([]identity.PublicKey, len(keys))
		for i, k := range keys {
			pub[i] = identity.PublicKey{ID: k.ID, Key: k.PublicKey}
			n.keyID = max(n.keyID, k.ID) // as an agent, so the answers leave the keys out
		}
		if v, err := identity.NewVerifier(pub); err == nil {
			n.verifier = v
		}
	}
	if cert != "" {
		if s, err := identity.NewNodeSigner(n.cfg.ID, n.nodeKey, cert, n.verifier); err == nil {
			n.signer = s
		} else {
			n.cfg.Logger.Warn("unusable node certificate", "node", n.cfg.ID, "error", err)
		}
	}
}

// minter returns what signs this node's proxy's tokens (nil: nothing yet).
func (n *Node) minter() *identity.NodeSigner {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.signer
}

func (n *Node) reports() []wrpc.ContainerReport {
	out := make([]wrpc.ContainerReport, 0, len(n.containers))
	for _, c := range n.containers {
		out = append(out, c.report)
	}
	return out
}

func (n *Node) load() wrpc.NodeLoad {
	l := n.local.Load()
	out := wrpc.NodeLoad{QueueCapacity: n.cfg.QueueLength, RunningGuaranteed: l.RunningGuaranteed, RunningOpportunistic: l.RunningOpportunistic,
		Queued: l.Queued, Used: l.Used, UsedOpportunistic: l.UsedOpportunistic}
	if o := n.cfg.Policy.Overcommit; o.On() {
		measured := n.measuredLocked()
		limit := o.Limit(n.cfg.Capacity)
		out.Measured, out.UseLimit = &measured, &limit
	}
	return out
}

// measuredLocked is what the node's containers would be measured to use,
// as an agent measures their process groups: a task uses what it was
// allocated, a simulated AM its memory and no CPU (it only waits on the
// servers). n.mu is held.
func (n *Node) measuredLocked() scheduler.Resources {
	var use scheduler.Resources
	for id, c := range n.containers {
		if c.report.State != scheduler.ContainerRunning {
			continue
		}
		if n.launched[id] {
			use.MemoryMB += c.report.Resources.MemoryMB
			continue
		}
		use = use.Add(c.report.Resources)
	}
	return use
}

// InUse returns the vcores the node's containers are measured to use, at
// most its capacity.
func (n *Node) InUse() int64 {
	n.mu.Lock()
	defer n.mu.Unlock()
	return min(n.cfg.Capacity.Vcores, n.measuredLocked().Vcores)
}

// Used returns what the node's running containers use.
func (n *Node) Used() scheduler.Resources {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.local.Load().Used
}

// Running returns how many containers run on the node.
func (n *Node) Running() int {
	n.mu.Lock()
	defer n.mu.Unlock()
	l := n.local.Load()
	return l.RunningGuaranteed + l.RunningOpportunistic
}

// String names the node for logs.
func (n *Node) String() string { return fmt.Sprintf("sim node %s", n.cfg.ID) }

// heartbeatTimeout bounds one heartbeat, as an agent's does.
func heartbeatTimeout(interval time.Duration) time.Duration {
	return max(2*interval, 3*time.Second)
}

// spreadClient is a node's client, set up as an agent's is: it starts at a
// random server of the list, so the simulated nodes spread over the
// servers, and waits for a slow server as long as a heartbeat may take.
func spreadClient(servers []string, attempt time.Duration) *wrpc.Client {
	c := wrpc.NewClient(nil, wrpc.NewPool(nil))
	c.Spread = true
	c.AttemptTimeout = attempt
	c.SetServers(servers)
	return c
}
