package router

import (
	"context"
	"errors"
	"fmt"
	"slices"

	"github.com/weft-sched/weft/internal/raftnode"
	"github.com/weft-sched/weft/router/fedstate"
	wrpc "github.com/weft-sched/weft/rpc"
	"github.com/weft-sched/weft/scheduler"
	"github.com/weft-sched/weft/scheduler/federation"
)

// registerEndpoints exposes every RPC method of a router, each with the
// capability it needs.
func (r *Router) registerEndpoints() {
	s := r.rpcServer
	st, fed, op := &Status{r}, &Federation{r}, &Operator{r}
	shared := &raftnode.Operator{Node: r.node, Meta: func(m *wrpc.ResponseMeta) { r.setMeta(m, r.fsm.State().Index()) }, CallMember: r.callMember,
		Logger: r.logger}
	wrpc.Register(s, "Status.Ping", wrpc.CapPublic, shared.Ping)
	wrpc.Register(s, "Status.Leader", wrpc.CapPublic, shared.Leader)
	wrpc.Register(s, "Status.Peers", wrpc.CapPublic, shared.Peers)
	wrpc.Register(s, "Status.Self", wrpc.CapFederation, shared.Self)
	wrpc.Register(s, "Status.Members", wrpc.CapOperatorRead, shared.Members)
	wrpc.Register(s, "Status.Cluster", wrpc.CapOperatorRead, st.Cluster)
	wrpc.Register(s, "Status.Raft", wrpc.CapOperatorRead, st.Raft)

	wrpc.Register(s, "Operator.RaftGetConfiguration", wrpc.CapOperatorRead, shared.RaftGetConfiguration)
	wrpc.Register(s, "Operator.RaftRemovePeer", wrpc.CapOperatorWrite, shared.RaftRemovePeer)
	wrpc.Register(s, "Operator.Debug", wrpc.CapOperatorWrite, shared.Debug)
	wrpc.Register(s, "Operator.KeyringList", wrpc.CapOperatorWrite, shared.KeyringList)
	wrpc.Register(s, "Operator.KeyringInstall", wrpc.CapOperatorWrite, shared.KeyringInstall)
	wrpc.Register(s, "Operator.KeyringUse", wrpc.CapOperatorWrite, shared.KeyringUse)
	wrpc.Register(s, "Operator.KeyringRemove", wrpc.CapOperatorWrite, shared.KeyringRemove)
	wrpc.Register(s, "Gossip.Keyring", wrpc.CapFederation, shared.KeyringMember)
	wrpc.Register(s, "Operator.WorkloadKeyRotate", wrpc.CapOperatorWrite, op.WorkloadKeyRotate)

	wrpc.Register(s, "Federation.Heartbeat", wrpc.CapFederation, fed.Heartbeat, wrpc.MaxBody(wrpc.MaxListBody))
	wrpc.Register(s, "Federation.Subclusters", wrpc.CapOperatorRead, fed.Subclusters)
	wrpc.Register(s, "Federation.PolicyApply", wrpc.CapOperatorWrite, fed.PolicyApply, wrpc.MaxBody(wrpc.MaxListBody))
	wrpc.Register(s, "Federation.PolicyList", wrpc.CapOperatorRead, fed.PolicyList)
	wrpc.Register(s, "Federation.SubclusterAdmin", wrpc.CapOperatorWrite, fed.SubclusterAdmin)
	wrpc.Register(s, "Federation.SplitView", wrpc.CapAgent, fed.SplitView)
	wrpc.Register(s, "Federation.ResolveNodes", wrpc.CapAgent, fed.ResolveNodes, wrpc.MaxBody(wrpc.MaxListBody))
	wrpc.Register(s, "Federation.RegisterSpan", wrpc.CapAgent, fed.RegisterSpan)

	// The client API through routers (relay.go): each call goes to the
	// sub-cluster(s) it concerns with the caller's token, checked there
	// as if called directly (acl.go).
	app, node, ctr, queue, acls := &App{r}, &Node{r}, &Container{r}, &Queue{r}, &ACL{r}
	wrpc.Register(s, "App.Submit", wrpc.CapQueueSubmit, app.Submit, wrpc.MaxBody(wrpc.MaxSpecBody))
	wrpc.Register(s, "App.Status", wrpc.CapQueueRead, app.Status)
	wrpc.Register(s, "App.List", wrpc.CapQueueRead, app.List)
	wrpc.Register(s, "App.Kill", wrpc.CapQueueSubmit, app.Kill)
	wrpc.Register(s, "Node.List", wrpc.CapNodeRead, node.List)
	wrpc.Register(s, "Node.Status", wrpc.CapNodeRead, node.Status)
	wrpc.Register(s, "Node.Drain", wrpc.CapNodeWrite, node.Drain)
	wrpc.Register(s, "Node.ResetSecret", wrpc.CapNodeWrite, node.ResetSecret)
	wrpc.Register(s, "Container.List", wrpc.CapQueueRead, ctr.List)
	wrpc.Register(s, "Container.Logs", wrpc.CapQueueRead, ctr.Logs)
	wrpc.Register(s, "Queue.Apply", wrpc.CapOperatorWrite, queue.Apply, wrpc.MaxBody(wrpc.MaxSpecBody))
	wrpc.Register(s, "Queue.List", wrpc.CapQueueRead, queue.List)
	wrpc.Register(s, "Queue.Status", wrpc.CapQueueRead, queue.Status)

	wrpc.Register(s, "ACL.Bootstrap", wrpc.CapPublic, acls.Bootstrap)
	wrpc.Register(s, "ACL.TokenCreate", wrpc.CapACLWrite, acls.TokenCreate)
	wrpc.Register(s, "ACL.TokenList", wrpc.CapACLRead, acls.TokenList)
	wrpc.Register(s, "ACL.TokenInfo", wrpc.CapACLRead, acls.TokenInfo)
	wrpc.Register(s, "ACL.TokenSelf", wrpc.CapToken, acls.TokenSelf)
	wrpc.Register(s, "ACL.TokenDelete", wrpc.CapACLWrite, acls.TokenDelete)
	wrpc.Register(s, "ACL.PolicyApply", wrpc.CapACLWrite, acls.PolicyApply, wrpc.MaxBody(wrpc.MaxListBody))
	wrpc.Register(s, "ACL.PolicyList", wrpc.CapACLRead, acls.PolicyList)
	wrpc.Register(s, "ACL.PolicyInfo", wrpc.CapACLRead, acls.PolicyInfo)
	wrpc.Register(s, "ACL.PolicyDelete", wrpc.CapACLWrite, acls.PolicyDelete)
}

// rejection gives a federation-state rejection the RPC code of its kind.
func rejection(err error) error {
	var rej *fedstate.Rejection
	if !errors.As(err, &rej) {
		var h *fedstate.HaltError
		if errors.As(err, &h) {
			return &wrpc.Error{Code: wrpc.CodeUnavailable, Message: h.Error()}
		}
		return err
	}
	code := wrpc.CodeBadRequest
	switch rej.Kind {
	case fedstate.ErrNotFound:
		code = wrpc.CodeNotFound
	case fedstate.ErrConflict:
		code = wrpc.CodeConflict
	case fedstate.ErrFull, fedstate.ErrNoRoute:
		code = wrpc.CodeUnavailable
	}
	return &wrpc.Error{Code: code, Message: rej.Msg}
}

// Status answers what a router adds to the status methods it shares with
// servers (raftnode.Operator): the federation's totals (status.go).
type Status struct{ r *Router }

// Federation is the routers' own API.
type Federation struct{ r *Router }

// Heartbeat records a sub-cluster leader's report (through the router
// leader) and answers with its state and the routers' addresses.
func (e *Federation) Heartbeat(ctx context.Context, args *wrpc.FederationHeartbeatRequest, reply *wrpc.FederationHeartbeatResponse) error {
	if err := federation.ValidateID(args.Report.ID); err != nil {
		return wrpc.Errorf(wrpc.CodeBadRequest, "report.id: %v", err)
	}
	if done, err := e.r.node.ForwardWrite(ctx, "Federation.Heartbeat", args, reply); done {
		return err
	}
	rep := args.Report
	res, _, err := e.r.apply(ctx, fedstate.HeartbeatType, &fedstate.HeartbeatRequest{
		ID: rep.ID, Healthy: rep.Healthy, Reason: rep.Reason, Servers: rep.Servers, HTTPAddr: rep.HTTPAddr, Leader: rep.Leader,
		Term: rep.Term, Seq: rep.Seq, Capacity: rep.Capacity, Used: rep.Used, Pending: rep.Pending, NodesReady: rep.NodesReady,
		NodesTotal: rep.NodesTotal, AppsRunning: rep.AppsRunning, Queues: rep.Queues, Racks: rep.Racks, UnmanagedAMs: rep.UnmanagedAMs,
		Now: e.r.clock.Now().UnixNano(),
	})
	if err != nil {
		return err
	}
	sc, ok := res.(*fedstate.Subcluster)
	if !ok {
		return fmt.Errorf("heartbeat: unexpected answer %T: %w", res, wrpc.ErrInternal)
	}
	reply.State = sc.State
	var peers wrpc.PeersResponse
	if err := (&raftnode.Operator{Node: e.r.node}).Peers(ctx, &args.RequestHeader, &peers); err == nil {
		reply.Routers = peers.Peers
	}
	return nil
}

// Subclusters lists every sub-cluster the routers know.
func (e *Federation) Subclusters(ctx context.Context, args *wrpc.FederationSubclustersRequest, reply *wrpc.FederationSubclustersResponse) error {
	if done, err := e.r.node.ForwardRead(ctx, "Federation.Subclusters", &args.RequestHeader, args, reply); done {
		return err
	}
	st := e.r.fsm.State()
	for _, sc := range st.Subclusters() {
		reply.Subclusters = append(reply.Subclusters, subclusterInfo(sc))
	}
	e.r.setMeta(&reply.ResponseMeta, st.Index())
	return nil
}

func subclusterInfo(sc *fedstate.Subcluster) wrpc.SubclusterInfo {
	return wrpc.SubclusterInfo{
		SubclusterReport: wrpc.SubclusterReport{ID: sc.ID, Healthy: sc.State == federation.StateRunning, Reason: sc.Reason,
			Servers: slices.Clone(sc.Servers), HTTPAddr: sc.HTTPAddr, Leader: sc.Leader, Term: sc.Term, Seq: sc.Seq,
			Capacity: sc.Capacity, Used: sc.Used, Pending: sc.Pending, NodesReady: sc.NodesReady, NodesTotal: sc.NodesTotal,
			AppsRunning: sc.AppsRunning, Queues: sc.Queues, Racks: slices.Clone(sc.Racks), UnmanagedAMs: sc.UnmanagedAMs},
		State: sc.State, Routed: sc.Routed, Homes: sc.Homes, FirstSeen: sc.FirstSeen, LastHeartbeat: sc.LastHeartbeat,
		StateSince: sc.StateSince,
	}
}

// PolicyApply sets queues' policies, validated here for a one-line error
// naming the field and again in Apply.
func (e *Federation) PolicyApply(ctx context.Context, args *wrpc.FederationPolicyApplyRequest, reply *wrpc.FederationPolicyApplyResponse) error {
	if len(args.Policies) > fedstate.MaxPolicies {
		return wrpc.Errorf(wrpc.CodeBadRequest, "policies: %d; at most %d", len(args.Policies), fedstate.MaxPolicies)
	}
	for i, p := range args.Policies {
		if err := p.Validate(); err != nil {
			return wrpc.Errorf(wrpc.CodeBadRequest, "policies[%d]: %v", i, err)
		}
	}
	if done, err := e.r.node.ForwardWrite(ctx, "Federation.PolicyApply", args, reply); done {
		return err
	}
	res, index, err := e.r.apply(ctx, fedstate.PolicyApplyType, &fedstate.PolicyApplyRequest{Policies: args.Policies, Replace: args.Replace})
	if err != nil {
		return err
	}
	reply.Policies, _ = res.(int)
	reply.Index = index
	return nil
}

// SplitView answers an AMRMProxy (an agent's certificate) how the queue's
// spanning apps split: its AMRMProxy policy and every sub-cluster with its
// weight for the queue, its last report's capacity, use and demand, racks
// and servers (federation part 2).
func (e *Federation) SplitView(ctx context.Context, args *wrpc.FederationSplitViewRequest, reply *wrpc.FederationSplitViewResponse) error {
	if args.Queue == "" {
		return wrpc.Errorf(wrpc.CodeBadRequest, "queue: required")
	}
	if done, err := e.r.node.ForwardRead(ctx, "Federation.SplitView", &args.RequestHeader, args, reply); done {
		return err
	}
	st := e.r.fsm.State()
	queue := scheduler.SubmitQueuePath(args.Queue)
	reply.Policy = st.Policy(queue).AMRMProxy
	if reply.Policy == "" {
		reply.Policy = federation.AMRMHome
	}
	for _, c := range st.Candidates(queue) {
		sc := st.Subcluster(c.ID)
		reply.Candidates = append(reply.Candidates, wrpc.SplitCandidate{ID: c.ID, State: c.State, Weight: c.Weight,
			Capacity: c.Capacity, Used: c.Used, Pending: c.Pending, Racks: slices.Clone(sc.Racks), Servers: slices.Clone(sc.Servers)})
	}
	e.r.setMeta(&reply.ResponseMeta, st.Index())
	return nil
}

// ResolveNodes answers an AMRMProxy which sub-cluster holds each node it
// names, asking every reachable sub-cluster (Node.Which); a node two hold
// goes to the first by ID.
func (e *Federation) ResolveNodes(ctx context.Context, args *wrpc.FederationResolveNodesRequest, reply *wrpc.FederationResolveNodesResponse) error {
	if len(args.Nodes) > wrpc.MaxResolveNodes {
		return wrpc.Errorf(wrpc.CodeBadRequest, "nodes: %d; at most %d", len(args.Nodes), wrpc.MaxResolveNodes)
	}
	reply.Owners = map[string]string{}
	if len(args.Nodes) == 0 {
		return nil
	}
	ask := &wrpc.NodeWhichRequest{RequestHeader: wrpc.RequestHeader{AllowStale: true}, Nodes: args.Nodes}
	unreachable, err := e.r.fanOut(ctx, e.r.fsm.State(), "Node.Which", ask, func() any { return new(wrpc.NodeWhichResponse) },
		func(sc *fedstate.Subcluster, ans any) {
			for _, n := range ans.(*wrpc.NodeWhichResponse).Nodes {
				if _, taken := reply.Owners[n]; !taken {
					reply.Owners[n] = sc.ID
				}
			}
		})
	reply.Unreachable = unreachable
	return err
}

// PolicyList returns the policies and the generated weights.
func (e *Federation) PolicyList(ctx context.Context, args *wrpc.FederationPolicyListRequest, reply *wrpc.FederationPolicyListResponse) error {
	if done, err := e.r.node.ForwardRead(ctx, "Federation.PolicyList", &args.RequestHeader, args, reply); done {
		return err
	}
	st := e.r.fsm.State()
	reply.Policies = st.Policies()
	for _, q := range st.WeightedQueues() {
		w, _ := st.Weights(q)
		reply.Generated = append(reply.Generated, wrpc.QueueWeights{Queue: q, Weights: w})
	}
	e.r.setMeta(&reply.ResponseMeta, st.Index())
	return nil
}

// setMeta fills what a read says of its freshness.
func (r *Router) setMeta(meta *wrpc.ResponseMeta, index uint64) {
	meta.Index = index
	if r.IsLeader() {
		meta.KnownLeader = true
		return
	}
	addr, _ := r.raft.LeaderWithID()
	meta.KnownLeader = addr != ""
	if last := r.raft.LastContact(); !last.IsZero() {
		meta.LastContact = r.clock.Now().Sub(last)
	}
}

// SubclusterAdmin decommissions, recommissions or forgets a sub-cluster.
func (e *Federation) SubclusterAdmin(ctx context.Context, args *wrpc.FederationSubclusterAdminRequest, reply *wrpc.FederationSubclusterAdminResponse) error {
	if err := federation.ValidateID(args.ID); err != nil {
		return wrpc.Errorf(wrpc.CodeBadRequest, "id: %v", err)
	}
	action := fedstate.AdminAction(args.Action)
	switch action {
	case fedstate.Decommission, fedstate.Recommission, fedstate.Forget:
	default:
		return wrpc.Errorf(wrpc.CodeBadRequest, "action: %q is not decommission, recommission or forget", args.Action)
	}
	if done, err := e.r.node.ForwardWrite(ctx, "Federation.SubclusterAdmin", args, reply); done {
		return err
	}
	res, index, err := e.r.apply(ctx, fedstate.AdminType, &fedstate.AdminRequest{ID: args.ID, Action: action, Now: e.r.clock.Now().UnixNano()})
	if err != nil {
		return err
	}
	reply.Index = index
	if sc, ok := res.(*fedstate.Subcluster); ok {
		info := subclusterInfo(sc)
		reply.Subcluster = &info
	}
	return nil
}
