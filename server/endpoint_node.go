package server

import (
	"context"
	"sort"
	"strings"
	"time"

	"github.com/weft-sched/weft/fsm"
	"github.com/weft-sched/weft/internal/identity"
	"github.com/weft-sched/weft/internal/metrics"
	wrpc "github.com/weft-sched/weft/rpc"
	"github.com/weft-sched/weft/scheduler"
)

// Node holds the agent-facing endpoints (registration and heartbeats) and
// the node listings.
type Node struct{ srv *Server }

// Register records an agent at a new epoch. A retried registration (same
// request ID) gets the epoch of the first. The agent's node secret sets the
// node's on its first registration; later ones must present the same
// (SPEC §15), else nothing changes.
func (e *Node) Register(ctx context.Context, args *wrpc.NodeRegisterRequest, reply *wrpc.NodeRegisterResponse) error {
	if done, err := e.srv.forwardWrite(ctx, "Node.Register", args, reply); done {
		return err
	}
	if !e.srv.leaderReady.Load() {
		return wrpc.ErrNotReady // its secret check would read an old state
	}
	if err := scheduler.ValidateNodeID(args.ID); err != nil {
		return wrpc.Errorf(wrpc.CodeBadRequest, "%v", err)
	}
	if err := scheduler.ValidateNodeCapacity(args.Capacity); err != nil {
		return wrpc.Errorf(wrpc.CodeBadRequest, "node %s: %v", args.ID, err)
	}
	if err := e.srv.checkNodeCapacity(args.ID, args.Capacity); err != nil {
		return err
	}
	if err := identity.ValidateNodeSecret(args.Secret); err != nil {
		return wrpc.Errorf(wrpc.CodeBadRequest, "node %s: %v", args.ID, err)
	}
	if len(args.MintKey) != 0 {
		if err := identity.ValidateNodePublicKey(args.MintKey); err != nil {
			return wrpc.Errorf(wrpc.CodeBadRequest, "node %s: mint_key: %v", args.ID, err)
		}
	}
	st := e.srv.fsm.State()
	now := e.srv.clock.Now()
	n, known := st.Node(args.ID)
	if known {
		if err := checkNodeSecret(n, args.Secret); err != nil {
			e.srv.logger.Warn("refused a registration under a registered node's name", "node", args.ID, "error", err)
			return err
		}
	}
	if !known || len(n.SecretHash) == 0 {
		// A name no agent holds yet: with ACLs on, only an agent the
		// operator introduced may take it.
		if err := e.srv.checkJoinToken(st, args.JoinToken, args.ID, now); err != nil {
			e.srv.logger.Warn("refused the registration of a new node", "node", args.ID, "error", err)
			return err
		}
	}
	res, _, err := e.srv.raftApplyRequest(ctx, &args.RequestHeader, fsm.NodeRegisterType, &fsm.NodeRegisterRequest{
		ID: args.ID, Address: args.Address, Rack: args.Rack, Capacity: args.Capacity, Now: now.UnixNano(),
		SecretHash: identity.HashNodeSecret(args.Secret), MintKey: args.MintKey,
	})
	if err != nil {
		return err
	}
	st = e.srv.fsm.State()
	reply.Epoch = res.(uint64)
	reply.Servers = e.srv.serverAddrs()
	reply.WorkloadKeys = wireKeys(st)
	if n, ok := st.Node(args.ID); ok {
		reply.MintCert = e.srv.nodeCert(st, n, now)
	}
	reply.Federation = e.srv.agentFed.Load()
	e.srv.heartbeatSeen(args.ID, reply.Epoch, now, nil)
	e.srv.logger.Info("node registered", "node", args.ID, "epoch", reply.Epoch, "capacity", args.Capacity.String(), "rack", args.Rack)
	return nil
}

// Deregister marks a node DOWN at its epoch because its agent is leaving
// gracefully: its containers have been stopped and reported, and nothing
// more is placed there. A call with Leaving set comes first, before the
// agent stops its containers: the node is DRAINING meanwhile. An agent
// whose epoch is already over gets no error.
func (e *Node) Deregister(ctx context.Context, args *wrpc.NodeDeregisterRequest, reply *wrpc.WriteResponse) error {
	if done, err := e.srv.forwardWrite(ctx, "Node.Deregister", args, reply); done {
		return err
	}
	n, ok := e.srv.fsm.State().Node(args.ID)
	if !ok {
		return wrpc.Errorf(wrpc.CodeNotFound, "node %s is not registered", args.ID)
	}
	if err := checkNodeSecret(n, args.Secret); err != nil {
		return err
	}
	status, reason := scheduler.NodeDown, "the agent left gracefully"
	if args.Leaving {
		status, reason = scheduler.NodeDraining, "the agent is leaving gracefully: its containers are stopping"
	}
	_, index, err := e.srv.raftApplyRequest(ctx, &args.RequestHeader, fsm.NodeStatusType, &fsm.NodeStatusRequest{
		ID: args.ID, Epoch: args.Epoch, Status: status, Reason: reason, Now: e.srv.clock.Now().UnixNano(),
	})
	reply.Index = index
	if err == nil {
		e.srv.logger.Info(reason, "node", args.ID, "epoch", args.Epoch)
	}
	return err
}

// heartbeatSeen tells liveness a node was heard from.
func (s *Server) heartbeatSeen(id string, epoch uint64, now time.Time, load *wrpc.NodeLoad) {
	s.livenessMu.Lock()
	s.liveness.Heartbeat(id, epoch, now, load)
	s.livenessMu.Unlock()
}

// acceptHeartbeat records a heartbeat as heartbeatSeen does, unless a
// newer one of the node at that epoch was accepted before (liveness.Sequence):
// then it reports false and records nothing.
func (s *Server) acceptHeartbeat(id string, epoch, seq uint64, now time.Time, load *wrpc.NodeLoad) bool {
	s.livenessMu.Lock()
	defer s.livenessMu.Unlock()
	if !s.liveness.Sequence(id, epoch, seq) {
		return false
	}
	s.liveness.Heartbeat(id, epoch, now, load)
	return true
}

// Heartbeat keeps a node alive and reconciles its containers: it records
// the opportunistic containers AMRMProxies placed there and every state
// change, batched with other heartbeats' into one Raft command and only
// when something changed (answering once it is applied), and answers
// with what the agent must do: among that, stop the containers it runs
// that the servers do not hold live on that node. Only the agent with the
// node's secret is heard.
func (e *Node) Heartbeat(ctx context.Context, args *wrpc.HeartbeatRequest, reply *wrpc.HeartbeatResponse) error {
	if done, err := e.srv.forwardHeartbeat(ctx, args, reply); done {
		return err
	}
	return e.heartbeat(ctx, args, reply)
}

// heartbeat is Heartbeat on the leader.
func (e *Node) heartbeat(ctx context.Context, args *wrpc.HeartbeatRequest, reply *wrpc.HeartbeatResponse) error {
	if !e.srv.leaderReady.Load() {
		// A leader still replaying its log holds an old state: it would
		// tell live nodes to register again (and their agents to kill
		// every container). The agent (or the forwarding follower) retries.
		return wrpc.ErrNotReady
	}
	if n := len(args.AppsToCheck); n > wrpc.MaxAppsToCheck {
		return wrpc.Errorf(wrpc.CodeBadRequest, "apps_to_check: %d apps; at most %d", n, wrpc.MaxAppsToCheck)
	}
	st := e.srv.fsm.State()
	node, ok := st.Node(args.NodeID)
	if ok {
		if err := checkNodeSecret(node, args.Secret); err != nil {
			return err
		}
	}
	// Every answer carries it, so that a forwarded batch holds it once
	// (HeartbeatBatchResponse.ShareFederation).
	reply.Federation = e.srv.agentFed.Load()
	if !ok || node.Epoch != args.Epoch || node.Status == scheduler.NodeDown {
		reply.ReRegister = true
		return nil
	}
	now := e.srv.clock.Now()
	if !e.srv.acceptHeartbeat(args.NodeID, args.Epoch, args.Seq, now, &args.Load) {
		return wrpc.Errorf(wrpc.CodeConflict, "heartbeat %d of node %s at epoch %d arrived after a newer one: it is stale and changed nothing",
			args.Seq, args.NodeID, args.Epoch)
	}

	for _, id := range args.AppsToCheck {
		if app, known := st.App(id); known && !app.State.Terminal() {
			reply.AppsRunning = append(reply.AppsRunning, id)
		}
	}
	records, refused, recorded := newOpportunistic(st, args, e.srv.sigs)
	reply.Recorded = recorded
	updates := containerUpdates(st, args, now)
	if len(records)+len(updates) > 0 {
		// Batched with other heartbeats' (batch.go); answered once applied.
		if err := e.srv.submitUpdate(ctx, fsm.ContainerUpdateRequest{
			NodeID: args.NodeID, Records: records, Updates: updates}); err != nil {
			return err
		}
		st = e.srv.fsm.State()
	}
	for _, r := range args.Containers {
		c, known := st.Container(r.ID)
		switch {
		case r.State == scheduler.ContainerCompleted && (!known || c.State == scheduler.ContainerCompleted):
			reply.Acked = append(reply.Acked, r.ID)
		case known && c.State.Live() && c.Promoted && r.ExecutionType == string(scheduler.Opportunistic):
			reply.Promote = append(reply.Promote, r.ID)
		case known && c.State.Live() && c.ExecutionType == scheduler.Opportunistic && r.ExecutionType == string(scheduler.Guaranteed):
			// The agent was told of a promotion the servers do not hold.
			reply.Demote = append(reply.Demote, r.ID)
		}
	}
	for _, id := range append(refused, strayContainers(st, args)...) {
		reply.Kill = append(reply.Kill, wrpc.KillOrder{ID: id, Reason: scheduler.ReasonKilled})
	}
	var ring *identity.Keyring // made when an AM is to launch: rarely
	for _, c := range st.NodeLiveContainers(args.NodeID) {
		switch {
		case c.KillRequested:
			reply.Kill = append(reply.Kill, wrpc.KillOrder{ID: c.ID, Reason: c.KillReason})
		case c.IsAM && c.State == scheduler.ContainerAllocated:
			app, ok := st.App(c.AppID)
			if !ok {
				continue
			}
			info := wrpc.NewContainerInfo(c, node)
			info.User, info.UID = app.Spec.User, app.UID
			if ring == nil {
				ring = keyringOf(st)
			}
			tok, err := amToken(ring, c, app, now)
			if err != nil {
				e.srv.logger.Warn("cannot launch an AM yet", "app", c.AppID, "error", err)
				continue
			}
			reply.LaunchAMs = append(reply.LaunchAMs, wrpc.AMLaunch{Container: info, AppName: app.Spec.Name, AMType: app.Spec.AMType, Token: tok})
		}
	}
	newest := newestKeyID(st)
	if newest != args.WorkloadKeyID {
		reply.WorkloadKeys = wireKeys(st)
	}
	if len(node.MintKey) != 0 && (newest != args.WorkloadKeyID ||
		time.Duration(args.MintCertExpiry-now.UnixNano()) < identity.NodeCertLifetime/2) {
		reply.MintCert = e.srv.nodeCert(st, node, now)
	}
	reply.Servers = e.srv.serverAddrs()
	e.srv.opportunisticView(st, now, args.NodeID, args.LeastLoadedAt, args.SameListOK, max(0, args.Load.OpportunisticDemand), reply)
	reply.Centralized = !opportunisticConfig(st).Distributed
	return nil
}

// maxNewRecordsPerHeartbeat bounds the opportunistic containers one
// heartbeat may add to the replicated state; the rest wait for the next
// heartbeat (the agent reports every container until it is recorded), so
// an agent that reports thousands of containers at once adds them at most
// this fast, and an honest one loses nothing.
const maxNewRecordsPerHeartbeat = 256

// newOpportunistic returns the opportunistic containers a node reports that
// the replicated state does not hold yet (allocated by AMRMProxies, they
// are recorded here, off the allocation path), the live ones that can
// never be recorded, which the agent must stop, and the reported ones the
// state holds (the agent stops sending their tokens).
//
// A container is recorded only with the container token its AMRMProxy
// minted: signed with the key of a node the servers certified, for this
// very container on the reporting node, by the node that runs the AM of
// the container's app attempt (the only AMRMProxy that serves that AM).
// A node can therefore add records only to apps whose AM it runs, and at
// most maxNewRecordsPerHeartbeat a heartbeat.
func newOpportunistic(st *fsm.State, args *wrpc.HeartbeatRequest, sigs *identity.SigCache) (records []fsm.ContainerRecord, refused, recorded []string) {
	ring := keyringOf(st)
	counts := map[metrics.ReportRefusal]int{}
	refuse := func(r *wrpc.ContainerReport, why metrics.ReportRefusal) {
		counts[why]++
		if r.State.Live() {
			refused = append(refused, r.ID)
		}
	}
	for i := range args.Containers {
		r := &args.Containers[i]
		if r.ExecutionType != string(scheduler.Opportunistic) {
			continue
		}
		if _, known := st.Container(r.ID); known {
			if r.Token != "" {
				recorded = append(recorded, r.ID)
			}
			continue
		}
		rec := fsm.ContainerRecord{ID: r.ID, AppID: r.AppID, Attempt: r.Attempt, AskID: r.AskID, Resources: r.Resources,
			State: r.State, ExitCode: r.ExitCode, Reason: r.Reason, Diagnostics: r.Diagnostics,
			AllocatedAt: r.AllocatedAt, StartedAt: r.StartedAt}
		if r.State == scheduler.ContainerCompleted {
			rec.FinishedAt = r.At
		}
		app, ok := st.App(r.AppID)
		if !ok || fsm.ValidateRecord(&rec) != nil || scheduler.ValidateID("id", r.ID) != nil {
			refuse(r, metrics.RefusedMalformed)
			continue
		}
		if r.Token == "" {
			refuse(r, metrics.RefusedNoToken)
			continue
		}
		if why := checkMinted(ring, sigs, app, args.NodeID, r); why != "" {
			refuse(r, why)
			continue
		}
		if len(records) == maxNewRecordsPerHeartbeat {
			counts[metrics.RefusedDeferred]++
			continue // not refused: recorded from a later heartbeat
		}
		records = append(records, rec)
		recorded = append(recorded, r.ID)
	}
	for why, n := range counts {
		metrics.ReportsRefused(why, n)
	}
	return records, refused, recorded
}

// checkMinted checks the token of an opportunistic container that node
// reports, and returns why it may not be recorded ("" if it may). The
// token's expiry is not checked: it bounds when the container may start,
// and one that started may be reported late (after a leaderless spell).
func checkMinted(ring *identity.Keyring, sigs *identity.SigCache, app *scheduler.App, node string, r *wrpc.ContainerReport) metrics.ReportRefusal {
	claims, err := ring.VerifyCached(r.Token, 0, sigs)
	if err != nil || claims.Minter == "" || claims.Kind != identity.KindContainer ||
		claims.ContainerID != r.ID || claims.NodeID != node || claims.AppID != r.AppID || claims.Attempt != r.Attempt ||
		!identity.SameResources(claims.Resources, r.Resources) {
		return metrics.RefusedBadToken
	}
	// IDs an AMRMProxy mints name its node: o-NODE-EPOCH-SEQ.
	if !strings.HasPrefix(r.ID, scheduler.AgentContainerIDPrefix+claims.Minter+"-") {
		return metrics.RefusedBadToken
	}
	for _, at := range app.Attempts {
		if at.Attempt == claims.Attempt {
			if at.NodeID != claims.Minter {
				return metrics.RefusedNotMinter
			}
			return ""
		}
	}
	return metrics.RefusedNotMinter
}

// strayContainers returns the live containers a node reports that the
// servers do not hold live on that node: ones they completed (released,
// expired, lost) or place elsewhere, and guaranteed ones they never heard
// of. Every container an agent may start carries a token the servers or an
// AMRMProxy minted, so such a container has no business running: its agent
// must stop it. (Unknown opportunistic ones are recorded or refused by
// newOpportunistic.)
func strayContainers(st *fsm.State, args *wrpc.HeartbeatRequest) []string {
	var out []string
	for _, r := range args.Containers {
		if !r.State.Live() {
			continue
		}
		c, known := st.Container(r.ID)
		switch {
		case !known && r.ExecutionType != string(scheduler.Opportunistic):
			out = append(out, r.ID)
		case known && (!c.State.Live() || c.NodeID != args.NodeID):
			out = append(out, r.ID)
		}
	}
	return out
}

// containerUpdates compares an agent's report with the replicated state and
// returns only the changes: new states, and live containers the agent no
// longer knows (which are lost). An ALLOCATED container the agent does not
// know yet is not lost: its AM has not started it.
func containerUpdates(st *fsm.State, args *wrpc.HeartbeatRequest, now time.Time) []fsm.ContainerStatus {
	var out []fsm.ContainerStatus
	reported := make(map[string]bool, len(args.Containers))
	for _, r := range args.Containers {
		reported[r.ID] = true
		c, ok := st.Container(r.ID)
		if !ok || c.NodeID != args.NodeID || !c.State.Live() || c.State == r.State {
			continue
		}
		out = append(out, fsm.ContainerStatus{ID: r.ID, State: r.State, ExitCode: r.ExitCode, Reason: r.Reason,
			Diagnostics: r.Diagnostics, At: r.At, StartedAt: r.StartedAt})
	}
	for _, c := range st.NodeLiveContainers(args.NodeID) {
		if !reported[c.ID] && (c.State == scheduler.ContainerRunning || c.State == scheduler.ContainerQueued || c.State == scheduler.ContainerPaused) {
			out = append(out, fsm.ContainerStatus{ID: c.ID, State: scheduler.ContainerCompleted, Reason: scheduler.ReasonLost,
				Diagnostics: "its agent no longer knows it", At: now.UnixNano()})
		}
	}
	return out
}

// List returns every node, or those in one state, in numeric ID order.
func (e *Node) List(ctx context.Context, args *wrpc.NodeListRequest, reply *wrpc.NodeListResponse) error {
	if done, err := e.srv.forwardRead(ctx, "Node.List", &args.RequestHeader, args, reply); done {
		return err
	}
	state, err := scheduler.ParseNodeStatus(args.State)
	if err != nil {
		return wrpc.Errorf(wrpc.CodeBadRequest, "invalid filter: %v", err)
	}
	return e.srv.blockingQuery(ctx, &args.RequestHeader, &reply.ResponseMeta, nodesIndex, func(st *fsm.State) (uint64, error) {
		reply.Nodes = reply.Nodes[:0]
		nodes := st.Nodes()
		sort.Slice(nodes, func(i, j int) bool { return scheduler.CompareIDs(nodes[i].ID, nodes[j].ID) < 0 })
		for _, n := range nodes {
			if state != "" && n.Status != state {
				continue
			}
			info := wrpc.NewNodeInfo(n)
			e.srv.addReported(&info)
			reply.Nodes = append(reply.Nodes, info)
		}
		return nodesIndex(st)
	})
}

// nodesIndex is the index a node listing depends on.
func nodesIndex(st *fsm.State) (uint64, error) { return st.TableIndex(fsm.TableNodes), nil }

// Status returns one node and its live containers.
func (e *Node) Status(ctx context.Context, args *wrpc.NodeStatusRequest, reply *wrpc.NodeStatusResponse) error {
	if done, err := e.srv.forwardRead(ctx, "Node.Status", &args.RequestHeader, args, reply); done {
		return err
	}
	watch := func(st *fsm.State) (uint64, error) {
		if _, ok := st.Node(args.ID); !ok {
			return 0, wrpc.Errorf(wrpc.CodeNotFound, "node %s not found", args.ID)
		}
		return max(st.TableIndex(fsm.TableNodes), st.TableIndex(fsm.TableContainers)), nil
	}
	return e.srv.blockingQuery(ctx, &args.RequestHeader, &reply.ResponseMeta, watch, func(st *fsm.State) (uint64, error) {
		index, err := watch(st)
		if err != nil {
			return 0, err
		}
		n, _ := st.Node(args.ID)
		reply.Node = wrpc.NewNodeInfo(n)
		e.srv.addReported(&reply.Node)
		reply.Containers = reply.Containers[:0]
		for _, c := range st.NodeLiveContainers(n.ID) {
			reply.Containers = append(reply.Containers, wrpc.NewContainerInfo(c, n))
		}
		sort.Slice(reply.Containers, func(i, j int) bool {
			return scheduler.CompareIDs(reply.Containers[i].ID, reply.Containers[j].ID) < 0
		})
		return index, nil
	})
}

// Which answers a federation's router which of the named nodes this
// cluster holds (a router's or server's certificate; from this server's
// own state, so any server answers).
func (e *Node) Which(ctx context.Context, args *wrpc.NodeWhichRequest, reply *wrpc.NodeWhichResponse) error {
	if len(args.Nodes) > wrpc.MaxResolveNodes {
		return wrpc.Errorf(wrpc.CodeBadRequest, "nodes: %d; at most %d", len(args.Nodes), wrpc.MaxResolveNodes)
	}
	st := e.srv.fsm.State()
	for _, id := range args.Nodes {
		if _, ok := st.Node(id); ok {
			reply.Nodes = append(reply.Nodes, id)
		}
	}
	return nil
}

// queueWait returns the queue wait a node last estimated (known only to
// the leader).
// addReported adds to a node's description what only its last heartbeat
// says, which only the leader holds (nothing in stale reads from
// followers): its queue-wait estimate, its measured use, its overcommit
// limit and how its containers' limits are enforced.
func (s *Server) addReported(info *wrpc.NodeInfo) {
	s.livenessMu.Lock()
	defer s.livenessMu.Unlock()
	l, ok := s.liveness.Load(info.ID)
	if !ok {
		return
	}
	info.EstimatedQueueWait, info.Enforcement = l.EstimatedQueueWait, l.Enforcement
	if l.Measured != nil {
		m := *l.Measured
		info.Measured = &m
	}
	if l.UseLimit != nil {
		u := *l.UseLimit
		info.UseLimit = &u
	}
}

// serverAddrs returns the RPC addresses of the Raft servers, as of at most
// serverAddrsMaxAge ago: every heartbeat's answer carries them, and asking
// Raft for its configuration is a round trip through its main loop (a
// seventh of a heartbeat's handling at 10,000 nodes). The slice is shared:
// callers must not change it.
func (s *Server) serverAddrs() []string {
	now := s.clock.Now()
	if c := s.addrCache.Load(); c != nil && now.Sub(c.at) < serverAddrsMaxAge && now.Sub(c.at) >= 0 {
		return c.addrs
	}
	servers, err := s.raftServers()
	if err != nil {
		return nil
	}
	out := make([]string, len(servers))
	for i, srv := range servers {
		out[i] = srv.Address
	}
	s.addrCache.Store(&serverAddrCache{at: now, addrs: out})
	return out
}

// serverAddrsMaxAge bounds how old the server list agents are given may be.
const serverAddrsMaxAge = time.Second

type serverAddrCache struct {
	at    time.Time
	addrs []string
}
