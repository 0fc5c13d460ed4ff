package server

import (
	"context"
	"fmt"
	"time"

	"github.com/weft-sched/weft/acl"
	"github.com/weft-sched/weft/fsm"
	"github.com/weft-sched/weft/internal/raftnode"
	wrpc "github.com/weft-sched/weft/rpc"
	"github.com/weft-sched/weft/scheduler"
)

// caller is who a request comes from, as its ACL token says: the ACL to
// check it against and the token's name (the user of the apps it submits).
type caller struct {
	acl *acl.ACL
	// token is nil for the anonymous caller, and when ACLs are off.
	token *acl.Token
	// partial is set when the token names a policy this server does not
	// hold (yet: one written a moment ago, on a follower): its ACL may
	// grant less here than the leader's would.
	partial bool
}

// name is the user the caller's apps run as when ACLs are on.
func (id *caller) name() string {
	if id.token == nil {
		return acl.AnonymousPolicy
	}
	return id.token.Name
}

// isManagement reports whether the caller gave a management token (not
// merely may do everything because ACLs are off).
func (id *caller) isManagement() bool { return id.token != nil && id.acl.IsManagement() }

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

// tokenLookupTimeout bounds how long a follower waits to catch up with the
// leader before it refuses a token it does not know: one created a moment
// ago may not have reached it yet.
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
		if st, err = s.catchUpWithLeader(ctx); err != nil {
			// Not known here, and no leader to catch up with (a server
			// that has just restarted, say, before it has replayed its
			// log): the client tries another server rather than hear
			// "not found".
			return nil, fmt.Errorf("cannot check the ACL token: %w", err)
		}
		tok, ok = st.ACLTokenBySecret(secret)
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
	partial := false
	for _, name := range tok.Policies {
		p, ok := st.ACLPolicy(name)
		if !ok {
			partial = true
			continue
		}
		if r, err := p.Parsed(); err == nil {
			rules = append(rules, r)
		}
	}
	return &caller{acl: acl.Compile(rules...), token: tok, partial: partial}, nil
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

// authorize is the RPC server's authorizer: it resolves the request's
// token, checks the part of the method's capability that does not depend
// on the request (allowWithoutRequest, as Authenticate does for the HTTP
// API), and hands the identity to the handler, which checks the rest
// (which queue, whose app). Before the handler runs, and so before
// anything is forwarded or waited for: a client's call is marked as one
// (its forwarding is bounded, raftnode.ClientCall); a caller whose token
// grants nothing a method could answer (no queue it may read, for the
// queue methods) is refused; and a blocking query past its caller's
// bounds is refused (admitBlocking).
func (s *Server) authorize(ctx context.Context, method string, c wrpc.Capability, args any) (context.Context, error) {
	ctx = raftnode.ClientCall(ctx, c)
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
	if err := s.allowWithoutRequest(method, id, c); err != nil {
		return ctx, err
	}
	return s.admitBlocking(context.WithValue(ctx, callerKey{}, id), method, id, args)
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
// for the queue capabilities that level on some queue (which queue is in
// the body, and the handler checks it: allowWithoutRequest). A caller it refuses is
// answered before its body is read; one it passes may send the method's
// whole body.
func (s *Server) authorizeHeader(ctx context.Context, method string, c wrpc.Capability, token string) (context.Context, error) {
	if c == wrpc.CapWorkload {
		if _, err := keyringOf(s.fsm.State()).VerifyCached(token, s.clock.Now().UnixNano(), s.sigs); err != nil {
			return ctx, wrpc.Errorf(wrpc.CodePermissionDenied, "%s: workload token: %v", method, err)
		}
		return ctx, nil
	}
	id, err := s.resolveToken(ctx, token)
	if err != nil {
		return ctx, fmt.Errorf("%s: %w", method, err)
	}
	if err := s.allowWithoutRequest(method, id, c); err != nil {
		return ctx, err
	}
	return context.WithValue(ctx, headerCallerKey{}, &headerCaller{secret: token, id: id}), nil
}

// allows reports whether id holds method-wide capability c; known is
// false for one that is not (the per-queue ones: allowWithoutRequest).
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
	case wrpc.CapToken:
		return id.token != nil || !s.config.ACLEnabled, true
	}
	return false, false
}

// Authenticate checks, before a request is read, what of capability c
// the secret grants without the request (package httpapi calls it for
// every route before it reads a byte of the body or takes a slot): a
// method-wide capability in full, queue:read and queue:submit as that
// level on some queue, token as a valid token. It reports whether the
// secret is a management token's. It resolves the token as the RPC
// authorizer does (resolveToken), and the method still checks everything
// once it has the request: Authenticate only refuses earlier, it never
// lets a request do more.
func (s *Server) Authenticate(ctx context.Context, method, secret string, c wrpc.Capability) (management bool, err error) {
	switch c {
	case wrpc.CapPublic:
		return false, nil
	case wrpc.CapAgent, wrpc.CapServer, wrpc.CapWorkload, wrpc.CapFederation:
		// Certificates and workload tokens, which no HTTP client holds.
		return false, fmt.Errorf("%s: %w: it needs a %s credential, which no HTTP client holds", method, wrpc.ErrPermissionDenied, c)
	}
	id, err := s.resolveToken(ctx, secret)
	if err != nil {
		return false, fmt.Errorf("%s: %w", method, err)
	}
	if err := s.allowWithoutRequest(method, id, c); err != nil {
		return false, err
	}
	return id.isManagement(), nil
}

// allowWithoutRequest checks what of capability c the caller holds
// before a request names a queue: a method-wide capability in full,
// queue:read and queue:submit as that level on some queue, token as a
// token.
func (s *Server) allowWithoutRequest(method string, id *caller, c wrpc.Capability) error {
	var allowed, known bool
	need := string(c)
	switch c {
	case wrpc.CapQueueRead:
		// And per queue, in the handler (on the leader, for what is
		// forwarded): a caller with a policy this server lacks yet is left
		// to it.
		allowed, known, need = id.partial || id.acl.AllowAnyQueue(acl.LevelRead), true, "read on any queue"
	case wrpc.CapQueueSubmit:
		allowed, known, need = id.partial || id.acl.AllowAnyQueue(acl.LevelSubmit), true, "submit on any queue"
	default:
		allowed, known = s.allows(id, c)
	}
	if !known {
		return fmt.Errorf("%s: %w: the method declares an unknown capability %q", method, wrpc.ErrInternal, c)
	}
	if !allowed {
		return denied(method, id, need)
	}
	return nil
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

// notFound answers a caller about what it names but may not read (an app,
// container or queue in a queue its token does not read) exactly as about
// a name nothing has: not_found, with the same message, so that no answer
// tells a caller whether something it may not see exists. what names it
// ("app app-7"); among says what the caller looks among ("apps"). With
// ACLs on, the message says whose view was searched, so that a caller who
// may not read it learns why without learning whether it exists.
func (s *Server) notFound(ctx context.Context, what, among string) error {
	return wrpc.Errorf(wrpc.CodeNotFound, "%s", s.notFoundText(ctx, what, among))
}

func (s *Server) notFoundText(ctx context.Context, what, among string) string {
	id := s.callerOf(ctx)
	switch {
	case !s.config.ACLEnabled || id.acl.IsManagement():
		return what + " not found"
	case id.token == nil:
		return fmt.Sprintf("%s not found among the %s the anonymous caller may read (no ACL token given: set -token or WEFT_TOKEN)", what, among)
	}
	return fmt.Sprintf("%s not found among the %s token %q may read", what, among, id.token.Name)
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
