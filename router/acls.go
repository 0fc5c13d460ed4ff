package router

import (
	"context"
	"fmt"

	"github.com/weft-sched/weft/router/fedstate"
	wrpc "github.com/weft-sched/weft/rpc"
	"github.com/weft-sched/weft/scheduler/federation"
)

// ACL is the ACL API a router serves. The routers keep every
// sub-cluster's ACLs alike: a change goes to each sub-cluster in turn with
// the same token IDs (the client's, or the router's when it gave none), so
// one token means the same in all of them and to the routers, which check
// their own methods' tokens against a sub-cluster (acl.go). A change is
// refused while a sub-cluster is LOST, which would miss it; a
// DECOMMISSIONED one is left out (bring its ACLs in line before
// recommissioning it). Reads are answered by the first RUNNING
// sub-cluster that answers.
type ACL struct{ r *Router }

// writable refuses an ACL change while a sub-cluster would miss it.
func (e *ACL) writable(st *fedstate.State) error {
	for _, sc := range st.Subclusters() {
		if sc.State == federation.StateLost {
			return wrpc.Errorf(wrpc.CodeUnavailable, "sub-cluster %s is LOST: an ACL change goes to every sub-cluster so that a token means the same in each; wait for it to return, or decommission it", sc.ID)
		}
	}
	return nil
}

// change broadcasts an ACL write; the answer is the first sub-cluster's.
func (e *ACL) change(ctx context.Context, method string, hdr *wrpc.RequestHeader, args, reply any, newReply func() any) error {
	if hdr.RequestID == "" {
		hdr.RequestID = wrpc.NewRequestID() // a sub-cluster's retry is answered once
	}
	if done, err := e.r.node.ForwardWrite(ctx, method, args, reply); done {
		return err
	}
	st := e.r.fsm.State()
	if err := e.writable(st); err != nil {
		return err
	}
	first := true
	_, _, err := e.r.broadcast(ctx, st, method, args, newReply, func(_ *fedstate.Subcluster, ans any) {
		if first {
			copyReply(reply, ans)
			first = false
		}
	})
	return err
}

// copyReply copies one answer into reply (both the same pointer type).
func copyReply(reply, ans any) {
	switch r := reply.(type) {
	case *wrpc.ACLTokenResponse:
		*r = *ans.(*wrpc.ACLTokenResponse)
	case *wrpc.ACLPolicyResponse:
		*r = *ans.(*wrpc.ACLPolicyResponse)
	case *wrpc.WriteResponse:
		*r = *ans.(*wrpc.WriteResponse)
	default:
		panic(fmt.Sprintf("copyReply: %T", reply))
	}
}

// Bootstrap creates the first management token in every sub-cluster.
func (e *ACL) Bootstrap(ctx context.Context, args *wrpc.ACLBootstrapRequest, reply *wrpc.ACLTokenResponse) error {
	if args.AccessorID == "" && args.SecretID == "" {
		args.AccessorID, args.SecretID = wrpc.NewACLIDs()
	}
	return e.change(ctx, "ACL.Bootstrap", &args.RequestHeader, args, reply, func() any { return new(wrpc.ACLTokenResponse) })
}

// TokenCreate creates a token in every sub-cluster.
func (e *ACL) TokenCreate(ctx context.Context, args *wrpc.ACLTokenCreateRequest, reply *wrpc.ACLTokenResponse) error {
	if args.AccessorID == "" && args.SecretID == "" {
		args.AccessorID, args.SecretID = wrpc.NewACLIDs()
	}
	return e.change(ctx, "ACL.TokenCreate", &args.RequestHeader, args, reply, func() any { return new(wrpc.ACLTokenResponse) })
}

// TokenDelete deletes a token in every sub-cluster.
func (e *ACL) TokenDelete(ctx context.Context, args *wrpc.ACLTokenRequest, reply *wrpc.WriteResponse) error {
	return e.change(ctx, "ACL.TokenDelete", &args.RequestHeader, args, reply, func() any { return new(wrpc.WriteResponse) })
}

// PolicyApply writes a policy in every sub-cluster.
func (e *ACL) PolicyApply(ctx context.Context, args *wrpc.ACLPolicyApplyRequest, reply *wrpc.WriteResponse) error {
	return e.change(ctx, "ACL.PolicyApply", &args.RequestHeader, args, reply, func() any { return new(wrpc.WriteResponse) })
}

// PolicyDelete deletes a policy in every sub-cluster.
func (e *ACL) PolicyDelete(ctx context.Context, args *wrpc.ACLPolicyRequest, reply *wrpc.WriteResponse) error {
	return e.change(ctx, "ACL.PolicyDelete", &args.RequestHeader, args, reply, func() any { return new(wrpc.WriteResponse) })
}

// TokenList lists the tokens.
func (e *ACL) TokenList(ctx context.Context, args *wrpc.RequestHeader, reply *wrpc.ACLTokenListResponse) error {
	return e.r.askOne(ctx, e.r.fsm.State(), "ACL.TokenList", args, reply)
}

// TokenInfo shows a token.
func (e *ACL) TokenInfo(ctx context.Context, args *wrpc.ACLTokenRequest, reply *wrpc.ACLTokenResponse) error {
	return e.r.askOne(ctx, e.r.fsm.State(), "ACL.TokenInfo", args, reply)
}

// TokenSelf shows the caller's token.
func (e *ACL) TokenSelf(ctx context.Context, args *wrpc.RequestHeader, reply *wrpc.ACLTokenResponse) error {
	return e.r.askOne(ctx, e.r.fsm.State(), "ACL.TokenSelf", args, reply)
}

// PolicyList lists the policies.
func (e *ACL) PolicyList(ctx context.Context, args *wrpc.RequestHeader, reply *wrpc.ACLPolicyListResponse) error {
	return e.r.askOne(ctx, e.r.fsm.State(), "ACL.PolicyList", args, reply)
}

// PolicyInfo shows a policy.
func (e *ACL) PolicyInfo(ctx context.Context, args *wrpc.ACLPolicyRequest, reply *wrpc.ACLPolicyResponse) error {
	return e.r.askOne(ctx, e.r.fsm.State(), "ACL.PolicyInfo", args, reply)
}
