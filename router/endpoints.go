package router

import (
	"context"
	"errors"
	"fmt"
	"slices"

	"github.com/weft-sched/weft/router/fedstate"
	wrpc "github.com/weft-sched/weft/rpc"
	"github.com/weft-sched/weft/scheduler/federation"
)

// registerEndpoints exposes every RPC method of a router, each with the
// capability it needs.
func (r *Router) registerEndpoints() {
	s := r.rpcServer
	st, fed := &Status{r}, &Federation{r}
	wrpc.Register(s, "Status.Ping", wrpc.CapPublic, st.Ping)
	wrpc.Register(s, "Status.Leader", wrpc.CapPublic, st.Leader)
	wrpc.Register(s, "Status.Peers", wrpc.CapPublic, st.Peers)
	wrpc.Register(s, "Status.Self", wrpc.CapFederation, st.Self)

	wrpc.Register(s, "Federation.Heartbeat", wrpc.CapFederation, fed.Heartbeat)
	wrpc.Register(s, "Federation.Subclusters", wrpc.CapOperatorRead, fed.Subclusters)
	wrpc.Register(s, "Federation.PolicyApply", wrpc.CapOperatorWrite, fed.PolicyApply)
	wrpc.Register(s, "Federation.PolicyList", wrpc.CapOperatorRead, fed.PolicyList)
	wrpc.Register(s, "Federation.SubclusterAdmin", wrpc.CapOperatorWrite, fed.SubclusterAdmin)

	// The client API through routers: each call goes to an app's home or
	// is answered from the routers' state; the home checks the caller's
	// token as if called directly.
	app := &App{r}
	wrpc.Register(s, "App.Submit", wrpc.CapQueueSubmit, app.Submit)
	wrpc.Register(s, "App.Status", wrpc.CapQueueRead, app.Status)
	wrpc.Register(s, "App.List", wrpc.CapQueueRead, app.List)
	wrpc.Register(s, "App.Kill", wrpc.CapQueueSubmit, app.Kill)
	wrpc.Register(s, "Node.List", wrpc.CapNodeRead, (&Node{r}).List)
}

// authorize checks what the transport cannot: certificate roles it checked
// already (CapFederation). Routers hold no ACL store of their own yet: a
// router refuses to start with ACLs on (cmd/weft), so the operator
// capabilities need no token here; the routers' listener and mutual TLS
// are what guard them.
func (r *Router) authorize(ctx context.Context, method string, c wrpc.Capability, args any) (context.Context, error) {
	return ctx, nil
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

// Status answers the liveness and membership questions of SPEC §4.
type Status struct{ r *Router }

// Ping answers.
func (e *Status) Ping(ctx context.Context, args *wrpc.RequestHeader, reply *struct{}) error {
	return nil
}

// Leader returns the router leader this router knows of.
func (e *Status) Leader(ctx context.Context, args *wrpc.RequestHeader, reply *wrpc.LeaderResponse) error {
	addr, id := e.r.raft.LeaderWithID()
	reply.Address, reply.ID = string(addr), string(id)
	return nil
}

// Self names the answering router (its peers check it before Raft).
func (e *Status) Self(ctx context.Context, args *wrpc.RequestHeader, reply *wrpc.SelfResponse) error {
	reply.ID, reply.Address = e.r.config.NodeID, e.r.rpcAddr
	return nil
}

// Peers returns the RPC addresses in this router's Raft configuration.
func (e *Status) Peers(ctx context.Context, args *wrpc.RequestHeader, reply *wrpc.PeersResponse) error {
	f := e.r.raft.GetConfiguration()
	if err := f.Error(); err != nil {
		return err
	}
	for _, s := range f.Configuration().Servers {
		reply.Peers = append(reply.Peers, string(s.Address))
	}
	return nil
}

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
		NodesTotal: rep.NodesTotal, AppsRunning: rep.AppsRunning, Queues: rep.Queues, Racks: rep.Racks, Now: e.r.clock.Now().UnixNano(),
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
	if err := (&Status{e.r}).Peers(ctx, &args.RequestHeader, &peers); err == nil {
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
			AppsRunning: sc.AppsRunning, Queues: sc.Queues, Racks: slices.Clone(sc.Racks)},
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
