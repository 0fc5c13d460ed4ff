package server

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/weft-sched/weft/acl"
	"github.com/weft-sched/weft/fsm"
	wrpc "github.com/weft-sched/weft/rpc"
	"github.com/weft-sched/weft/scheduler"
)

// caller is who a request comes from, as its ACL token says: the ACL to
// check it against and the token's name (the user of the apps it submits).
type caller struct {
	acl *acl.ACL
	// token is nil for the anonymous caller, and when ACLs are off.
	token *acl.Token
}

// name is the user the caller's apps run as when ACLs are on.
func (id *caller) name() string {
	if id.token == nil {
		return acl.AnonymousPolicy
	}
	return id.token.Name
}

// describe names the caller in a refusal.
func (id *caller) describe() string {
	if id.token == nil {
		return "the anonymous caller (no ACL token given: set -token or WEFT_TOKEN)"
	}
	return fmt.Sprintf("token %q", id.token.Name)
}

type callerKey struct{}

// allowAll is the identity of every caller when ACLs are off.
var allowAll = &caller{acl: acl.Management}

// callerOf returns the identity the authorizer resolved for the request.
// A request that did not pass the authorizer (a call made in process) is
// allowed everything only when ACLs are off.
func (s *Server) callerOf(ctx context.Context) *caller {
	if id, ok := ctx.Value(callerKey{}).(*caller); ok {
		return id
	}
	if !s.config.ACLEnabled {
		return allowAll
	}
	return &caller{acl: acl.DenyAll}
}

// tokenLookupTimeout bounds how long a follower asks the leader about a
// token it does not know: one created a moment ago may not have reached
// it yet.
const tokenLookupTimeout = time.Second

// resolveToken turns a secret into the caller's identity (SPEC §15).
func (s *Server) resolveToken(ctx context.Context, secret string) (*caller, error) {
	if !s.config.ACLEnabled {
		return allowAll, nil
	}
	st := s.fsm.State()
	if secret == "" {
		return &caller{acl: anonymousACL(st)}, nil
	}
	tok, ok := st.ACLTokenBySecret(secret)
	if !ok && !s.IsLeader() {
		var err error
		if tok, ok, err = s.tokenFromLeader(ctx, secret); err != nil {
			// Not known here, and no leader to ask (a server that has
			// just restarted, say, before it has replayed its log): the
			// client tries another server rather than hear "not found".
			return nil, fmt.Errorf("cannot check the ACL token: %w", err)
		}
	}
	if !ok {
		return nil, fmt.Errorf("%w: ACL token not found", wrpc.ErrPermissionDenied)
	}
	if tok.Expired(s.clock.Now().UnixNano()) {
		return nil, fmt.Errorf("%w: ACL token %q expired at %s", wrpc.ErrPermissionDenied, tok.Name, time.Unix(0, tok.ExpiresAt).UTC().Format(time.RFC3339))
	}
	if tok.Type == acl.TypeManagement {
		return &caller{acl: acl.Management, token: tok}, nil
	}
	rules := make([]*acl.Rules, 0, len(tok.Policies))
	for _, name := range tok.Policies {
		if p, ok := st.ACLPolicy(name); ok {
			if r, err := p.Parsed(); err == nil {
				rules = append(rules, r)
			}
		}
	}
	return &caller{acl: acl.Compile(rules...), token: tok}, nil
}

// anonymousACL is what a request without a token may do: what the
// "anonymous" policy grants, nothing if there is none.
func anonymousACL(st *fsm.State) *acl.ACL {
	if p, ok := st.ACLPolicy(acl.AnonymousPolicy); ok {
		if r, err := p.Parsed(); err == nil {
			return acl.Compile(r)
		}
	}
	return acl.DenyAll
}

// tokenFromLeader asks the leader for the token whose secret is secret.
// It reports false when the leader knows no such token, and an error
// (retryable) when there is no leader to ask or it did not answer.
func (s *Server) tokenFromLeader(ctx context.Context, secret string) (*acl.Token, bool, error) {
	addr, _ := s.raft.LeaderWithID()
	if addr == "" || string(addr) == s.rpcAddr {
		return nil, false, wrpc.ErrNoLeader
	}
	ctx, cancel := context.WithTimeout(ctx, tokenLookupTimeout)
	defer cancel()
	var resp wrpc.ACLTokenResponse
	if err := s.pool.Call(ctx, string(addr), "ACL.TokenSelf", &wrpc.RequestHeader{AuthToken: secret}, &resp); err != nil {
		if errors.Is(err, wrpc.ErrPermissionDenied) {
			return nil, false, nil
		}
		return nil, false, fmt.Errorf("%w: asking the leader: %v", wrpc.ErrUnavailable, err)
	}
	v := resp.Token
	return &acl.Token{AccessorID: v.AccessorID, Name: v.Name, Type: v.Type, Policies: v.Policies, ExpiresAt: v.ExpiresAt,
		CreateTime: v.CreateTime, CreateIndex: v.CreateIndex, ModifyIndex: v.ModifyIndex, SecretHash: acl.HashSecret(secret)}, true, nil
}

// authorize is the RPC server's authorizer: it resolves the request's
// token, checks the method-wide part of the method's capability, and hands
// the identity to the handler, which checks the rest (which queue, whose
// app).
func (s *Server) authorize(ctx context.Context, method string, c wrpc.Capability, args any) (context.Context, error) {
	switch c {
	case wrpc.CapPublic, wrpc.CapAgent, wrpc.CapServer, wrpc.CapWorkload, wrpc.CapFederation:
		// Not ACL capabilities: certificates, node secrets and workload
		// tokens are checked by the transport and the handlers.
		return ctx, nil
	}
	var secret string
	if h, ok := args.(interface{ Header() *wrpc.RequestHeader }); ok {
		secret = h.Header().AuthToken
	}
	id, err := s.callerFor(ctx, secret)
	if err != nil {
		return ctx, fmt.Errorf("%s: %w", method, err)
	}
	allowed, known := s.allows(id, c)
	if !known {
		return ctx, fmt.Errorf("%s: %w: the method declares an unknown capability %q", method, wrpc.ErrInternal, c)
	}
	if !allowed {
		return ctx, denied(method, id, string(c))
	}
	return context.WithValue(ctx, callerKey{}, id), nil
}

// headerCaller is the identity authorizeHeader resolved from a request's
// header token, for authorize to take instead of resolving it again.
type headerCaller struct {
	secret string
	id     *caller
}

type headerCallerKey struct{}

// callerFor resolves secret, or takes what authorizeHeader resolved for it.
func (s *Server) callerFor(ctx context.Context, secret string) (*caller, error) {
	if hc, ok := ctx.Value(headerCallerKey{}).(*headerCaller); ok && hc.secret == secret {
		return hc.id, nil
	}
	return s.resolveToken(ctx, secret)
}

// authorizeHeader checks the token a request's header carries before the
// body is read (wrpc.Server.AuthorizeHeader): a workload token must be
// valid (signed by a workload key, not expired); an ACL token must
// resolve and hold the method-wide part of the method's capability, and
// for queue:submit submit on some queue (which queue is in the body, and
// the handler checks it; queue:read asks nothing more, since lists show an
// empty answer to a caller who may read no queue). A caller it refuses is
// answered before its body is read; one it passes may send the method's
// whole body.
func (s *Server) authorizeHeader(ctx context.Context, method string, c wrpc.Capability, token string) (context.Context, error) {
	if c == wrpc.CapWorkload {
		if _, err := keyringOf(s.fsm.State()).Verify(token, s.clock.Now().UnixNano()); err != nil {
			return ctx, wrpc.Errorf(wrpc.CodePermissionDenied, "%s: workload token: %v", method, err)
		}
		return ctx, nil
	}
	id, err := s.resolveToken(ctx, token)
	if err != nil {
		return ctx, fmt.Errorf("%s: %w", method, err)
	}
	allowed, known := s.allows(id, c)
	if c == wrpc.CapQueueSubmit {
		allowed = allowed && id.acl.AllowSomeQueue(acl.LevelSubmit)
	}
	if !known {
		return ctx, fmt.Errorf("%s: %w: the method declares an unknown capability %q", method, wrpc.ErrInternal, c)
	}
	if !allowed {
		return ctx, denied(method, id, string(c))
	}
	return context.WithValue(ctx, headerCallerKey{}, &headerCaller{secret: token, id: id}), nil
}

// allows reports whether id holds the method-wide part of capability c;
// known is false for a capability that is not an ACL one.
func (s *Server) allows(id *caller, c wrpc.Capability) (allowed, known bool) {
	switch c {
	case wrpc.CapOperatorRead:
		return id.acl.AllowOperator(acl.LevelRead), true
	case wrpc.CapOperatorWrite:
		return id.acl.AllowOperator(acl.LevelWrite), true
	case wrpc.CapNodeRead:
		return id.acl.AllowNode(acl.LevelRead), true
	case wrpc.CapNodeWrite:
		return id.acl.AllowNode(acl.LevelWrite), true
	case wrpc.CapACLRead:
		return id.acl.AllowACL(acl.LevelRead), true
	case wrpc.CapACLWrite:
		return id.acl.AllowACL(acl.LevelWrite), true
	case wrpc.CapQueueRead, wrpc.CapQueueSubmit:
		return true, true // per queue, in the handler
	case wrpc.CapToken:
		return id.token != nil || !s.config.ACLEnabled, true
	}
	return false, false
}

// denied is the answer to a caller whose ACL lacks what a method needs.
func denied(method string, id *caller, need string) error {
	return fmt.Errorf("%s: %w: %s lacks %s", method, wrpc.ErrPermissionDenied, id.describe(), need)
}

// allowQueue checks the caller's level on one queue.
func (s *Server) allowQueue(ctx context.Context, method, queue string, want acl.Level) error {
	id := s.callerOf(ctx)
	if id.acl.AllowQueue(queue, want) {
		return nil
	}
	return denied(method, id, fmt.Sprintf("%s on queue %s", want, queue))
}

// canReadQueue reports whether the caller may see a queue and its apps.
func (s *Server) canReadQueue(ctx context.Context, queue string) bool {
	return s.callerOf(ctx).acl.AllowQueue(queue, acl.LevelRead)
}

// allowKill checks that the caller may kill app a: admin on its queue, or
// submit on it and the app is the caller's own.
func (s *Server) allowKill(ctx context.Context, a *scheduler.App) error {
	id := s.callerOf(ctx)
	switch lvl := id.acl.QueueLevel(a.Queue); {
	case lvl == acl.LevelAdmin:
		return nil
	case lvl == acl.LevelSubmit && (!s.config.ACLEnabled || a.Spec.User == id.name()):
		return nil
	}
	return denied("App.Kill", id, fmt.Sprintf("admin on queue %s (or submit there, for its own apps; app %s is %s's)", a.Queue, a.ID, a.Spec.User))
}
