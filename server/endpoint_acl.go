package server

import (
	"context"
	"fmt"
	"time"

	"github.com/weft-sched/weft/acl"
	"github.com/weft-sched/weft/fsm"
	wrpc "github.com/weft-sched/weft/rpc"
)

// ACL holds the token and policy endpoints (SPEC §15).
type ACL struct{ srv *Server }

// MaxTokenTTL bounds a token's time to live.
const MaxTokenTTL = 10 * 365 * 24 * time.Hour

func (e *ACL) enabled() error {
	if !e.srv.config.ACLEnabled {
		return wrpc.Errorf(wrpc.CodeBadRequest, "ACLs are not enabled on this cluster: start the servers with acl { enabled = true } in their config file")
	}
	return nil
}

// tokenIDs checks the IDs a client chose for a new token, or makes them.
func tokenIDs(accessor, secret string) (string, string, error) {
	if accessor == "" {
		accessor = acl.NewID()
	}
	if secret == "" {
		secret = acl.NewID()
	}
	if err := acl.ValidateID("accessor_id", accessor); err != nil {
		return "", "", wrpc.Errorf(wrpc.CodeBadRequest, "%v", err)
	}
	if err := acl.ValidateID("secret_id", secret); err != nil {
		return "", "", wrpc.Errorf(wrpc.CodeBadRequest, "%v", err)
	}
	return accessor, secret, nil
}

// Bootstrap creates the first management token, once in the cluster's
// life; the answer is the only place its secret is ever shown.
func (e *ACL) Bootstrap(ctx context.Context, args *wrpc.ACLBootstrapRequest, reply *wrpc.ACLTokenResponse) error {
	if err := e.enabled(); err != nil {
		return err
	}
	if done, err := e.srv.forwardWrite(ctx, "ACL.Bootstrap", args, reply); done {
		return err
	}
	accessor, secret, err := tokenIDs(args.AccessorID, args.SecretID)
	if err != nil {
		return err
	}
	tok := &acl.Token{AccessorID: accessor, SecretHash: acl.HashSecret(secret), Name: "bootstrap",
		Type: acl.TypeManagement, CreateTime: e.srv.clock.Now().UnixNano()}
	_, index, err := e.srv.raftApplyRequest(ctx, &args.RequestHeader, fsm.ACLBootstrapType, &fsm.ACLBootstrapRequest{Token: tok})
	if err != nil {
		return err
	}
	return e.answerToken(accessor, secret, index, reply)
}

// answerToken fills reply with a token just written, and its secret.
func (e *ACL) answerToken(accessor, secret string, index uint64, reply *wrpc.ACLTokenResponse) error {
	stored, ok := e.srv.fsm.State().ACLToken(accessor)
	if !ok {
		return wrpc.Errorf(wrpc.CodeNotFound, "token %s was deleted as soon as it was created", accessor)
	}
	reply.Token = wrpc.NewACLToken(stored)
	if stored.SecretMatches(secret) {
		reply.Token.SecretID = secret
	}
	reply.Index = index
	return nil
}

// TokenCreate creates a token.
func (e *ACL) TokenCreate(ctx context.Context, args *wrpc.ACLTokenCreateRequest, reply *wrpc.ACLTokenResponse) error {
	if err := e.enabled(); err != nil {
		return err
	}
	if done, err := e.srv.forwardWrite(ctx, "ACL.TokenCreate", args, reply); done {
		return err
	}
	accessor, secret, err := tokenIDs(args.AccessorID, args.SecretID)
	if err != nil {
		return err
	}
	typ := args.Type
	if typ == "" {
		typ = acl.TypeClient
	}
	if err := acl.ValidateName("name", args.Name); err != nil {
		return wrpc.Errorf(wrpc.CodeBadRequest, "%v", err)
	}
	ttl := time.Duration(args.TTL)
	if ttl < 0 || ttl > MaxTokenTTL {
		return wrpc.Errorf(wrpc.CodeBadRequest, "ttl: must be between 0 (never expires) and %s, not %s", MaxTokenTTL, ttl)
	}
	now := e.srv.clock.Now()
	tok := &acl.Token{AccessorID: accessor, SecretHash: acl.HashSecret(secret), Name: args.Name, Type: typ,
		Policies: args.Policies, CreateTime: now.UnixNano()}
	if ttl > 0 {
		tok.ExpiresAt = now.Add(ttl).UnixNano()
	}
	_, index, err := e.srv.raftApplyRequest(ctx, &args.RequestHeader, fsm.ACLTokenUpsertType, &fsm.ACLTokenUpsertRequest{Tokens: []*acl.Token{tok}})
	if err != nil {
		return err
	}
	return e.answerToken(accessor, secret, index, reply)
}

// TokenList lists every token (without secrets).
func (e *ACL) TokenList(ctx context.Context, args *wrpc.RequestHeader, reply *wrpc.ACLTokenListResponse) error {
	if done, err := e.srv.forwardRead(ctx, "ACL.TokenList", args, args, reply); done {
		return err
	}
	return e.srv.blockingQuery(ctx, args, &reply.ResponseMeta, aclIndex, func(st *fsm.State) (uint64, error) {
		reply.Tokens = reply.Tokens[:0]
		for _, t := range st.ACLTokens() {
			reply.Tokens = append(reply.Tokens, wrpc.NewACLToken(t))
		}
		return st.TableIndex(fsm.TableACL), nil
	})
}

// TokenInfo shows one token by accessor ID.
func (e *ACL) TokenInfo(ctx context.Context, args *wrpc.ACLTokenRequest, reply *wrpc.ACLTokenResponse) error {
	if done, err := e.srv.forwardRead(ctx, "ACL.TokenInfo", &args.RequestHeader, args, reply); done {
		return err
	}
	return e.srv.blockingQuery(ctx, &args.RequestHeader, &reply.ResponseMeta, nil, func(st *fsm.State) (uint64, error) {
		t, ok := st.ACLToken(args.AccessorID)
		if !ok {
			return 0, wrpc.Errorf(wrpc.CodeNotFound, "token %s not found", args.AccessorID)
		}
		reply.Token = wrpc.NewACLToken(t)
		return st.TableIndex(fsm.TableACL), nil
	})
}

// TokenSelf shows the caller's own token.
func (e *ACL) TokenSelf(ctx context.Context, args *wrpc.RequestHeader, reply *wrpc.ACLTokenResponse) error {
	if err := e.enabled(); err != nil {
		return err
	}
	id := e.srv.callerOf(ctx)
	if id.token == nil {
		return wrpc.Errorf(wrpc.CodePermissionDenied, "no ACL token given: set -token or WEFT_TOKEN")
	}
	reply.Token = wrpc.NewACLToken(id.token)
	reply.Index = e.srv.fsm.State().TableIndex(fsm.TableACL)
	return nil
}

// Authorize answers whether the caller's token grants a capability, and
// whether it is a management token: a federation's routers ask it of a
// sub-cluster for their own methods, and for every request to their HTTP
// API before they read it. queue:read and queue:submit are checked on
// the queue named, or on some queue when none is; token asks for a valid
// token. It is answered by the server asked; a token it does not grant is
// refused as the method itself would be.
//
// It is public, so that it answers for the anonymous caller too (whom an
// "anonymous" policy may grant something): it resolves the token itself.
func (e *ACL) Authorize(ctx context.Context, args *wrpc.ACLAuthorizeRequest, reply *wrpc.ACLAuthorizeResponse) error {
	id, err := e.srv.resolveToken(ctx, args.AuthToken)
	if err != nil {
		return fmt.Errorf("ACL.Authorize: %w", err)
	}
	ctx = context.WithValue(ctx, callerKey{}, id)
	switch args.Capability {
	case wrpc.CapQueueRead, wrpc.CapQueueSubmit:
		if args.Queue == "" {
			break
		}
		level := acl.LevelRead
		if args.Capability == wrpc.CapQueueSubmit {
			level = acl.LevelSubmit
		}
		if err := e.srv.allowQueue(ctx, "ACL.Authorize", args.Queue, level); err != nil {
			return err
		}
		reply.Management = id.isManagement()
		return nil
	case wrpc.CapOperatorRead, wrpc.CapOperatorWrite, wrpc.CapNodeRead, wrpc.CapNodeWrite, wrpc.CapACLRead, wrpc.CapACLWrite, wrpc.CapToken:
	default:
		return wrpc.Errorf(wrpc.CodeBadRequest, "capability: %q is not one of operator:read, operator:write, node:read, node:write, acl:read, acl:write, queue:read, queue:submit, token", args.Capability)
	}
	if err := e.srv.allowWithoutRequest("ACL.Authorize", id, args.Capability); err != nil {
		return err
	}
	reply.Management = id.isManagement()
	return nil
}

// TokenDelete deletes a token; requests carrying it are refused from then on.
func (e *ACL) TokenDelete(ctx context.Context, args *wrpc.ACLTokenRequest, reply *wrpc.WriteResponse) error {
	if done, err := e.srv.forwardWrite(ctx, "ACL.TokenDelete", args, reply); done {
		return err
	}
	_, index, err := e.srv.raftApplyRequest(ctx, &args.RequestHeader, fsm.ACLTokenDeleteType, &fsm.ACLTokenDeleteRequest{AccessorIDs: []string{args.AccessorID}})
	reply.Index = index
	return err
}

// PolicyApply creates or replaces a policy; a policy that does not parse
// is refused with every problem and its line.
func (e *ACL) PolicyApply(ctx context.Context, args *wrpc.ACLPolicyApplyRequest, reply *wrpc.WriteResponse) error {
	if done, err := e.srv.forwardWrite(ctx, "ACL.PolicyApply", args, reply); done {
		return err
	}
	p := args.Policy
	if err := acl.ValidateName("name", p.Name); err != nil {
		return wrpc.Errorf(wrpc.CodeBadRequest, "policy: %v", err)
	}
	if _, err := acl.ParseRules(p.Name+".hcl", []byte(p.Rules)); err != nil {
		return wrpc.Errorf(wrpc.CodeBadRequest, "policy %s: %v", p.Name, err)
	}
	_, index, err := e.srv.raftApplyRequest(ctx, &args.RequestHeader, fsm.ACLPolicyUpsertType, &fsm.ACLPolicyUpsertRequest{
		Policies: []*acl.Policy{{Name: p.Name, Description: p.Description, Rules: p.Rules}}})
	reply.Index = index
	return err
}

// PolicyList lists every policy.
func (e *ACL) PolicyList(ctx context.Context, args *wrpc.RequestHeader, reply *wrpc.ACLPolicyListResponse) error {
	if done, err := e.srv.forwardRead(ctx, "ACL.PolicyList", args, args, reply); done {
		return err
	}
	return e.srv.blockingQuery(ctx, args, &reply.ResponseMeta, aclIndex, func(st *fsm.State) (uint64, error) {
		reply.Policies = reply.Policies[:0]
		for _, p := range st.ACLPolicies() {
			reply.Policies = append(reply.Policies, policyView(p))
		}
		return aclIndex(st)
	})
}

// aclIndex is the index the ACL listings depend on.
func aclIndex(st *fsm.State) (uint64, error) { return st.TableIndex(fsm.TableACL), nil }

// PolicyInfo shows one policy.
func (e *ACL) PolicyInfo(ctx context.Context, args *wrpc.ACLPolicyRequest, reply *wrpc.ACLPolicyResponse) error {
	if done, err := e.srv.forwardRead(ctx, "ACL.PolicyInfo", &args.RequestHeader, args, reply); done {
		return err
	}
	return e.srv.blockingQuery(ctx, &args.RequestHeader, &reply.ResponseMeta, nil, func(st *fsm.State) (uint64, error) {
		p, ok := st.ACLPolicy(args.Name)
		if !ok {
			return 0, wrpc.Errorf(wrpc.CodeNotFound, "policy %s not found", args.Name)
		}
		reply.Policy = policyView(p)
		return st.TableIndex(fsm.TableACL), nil
	})
}

// PolicyDelete deletes a policy; tokens naming it lose what it granted.
func (e *ACL) PolicyDelete(ctx context.Context, args *wrpc.ACLPolicyRequest, reply *wrpc.WriteResponse) error {
	if done, err := e.srv.forwardWrite(ctx, "ACL.PolicyDelete", args, reply); done {
		return err
	}
	_, index, err := e.srv.raftApplyRequest(ctx, &args.RequestHeader, fsm.ACLPolicyDeleteType, &fsm.ACLPolicyDeleteRequest{Names: []string{args.Name}})
	reply.Index = index
	return err
}

func policyView(p *acl.Policy) wrpc.ACLPolicy {
	return wrpc.ACLPolicy{Name: p.Name, Description: p.Description, Rules: p.Rules, CreateIndex: p.CreateIndex, ModifyIndex: p.ModifyIndex}
}
