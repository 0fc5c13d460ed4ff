package router

import (
	"context"
	"crypto/sha256"
	"fmt"
	"sync"
	"time"

	"github.com/weft-sched/weft/internal/raftnode"
	"github.com/weft-sched/weft/router/fedstate"
	wrpc "github.com/weft-sched/weft/rpc"
)

// ACLs through the routers. Routers hold no ACL store: the sub-clusters
// do, and the routers keep them alike by writing every ACL change to every
// sub-cluster with the same token IDs (acls.go). A call a router relays to
// a sub-cluster carries the caller's token, and the sub-cluster checks it
// as if called directly. A call a router answers itself — the federation's
// own methods, the routers' Raft and gossip — is checked, with ACLs on,
// against a RUNNING sub-cluster (ACL.Authorize), and so is every request
// to a router's HTTP API before it is read (Authenticate). A grant is
// remembered for aclGrantTTL, so a revoked token keeps the routers'
// methods that long; a refusal for aclRefusalTTL, so a flood of requests
// with one bad token (or none) asks a sub-cluster once; and at most
// maxACLChecks questions are in flight, so a flood of random tokens asks
// no more than that at once (the rest are answered 503 at once).

// aclGrantTTL is how long a router trusts a sub-cluster's grant, and
// aclRefusalTTL its refusal.
const (
	aclGrantTTL   = 30 * time.Second
	aclRefusalTTL = 5 * time.Second
)

// maxACLGrants bounds the grants and refusals a router remembers.
const maxACLGrants = 4096

// maxACLChecks bounds the questions a router asks sub-clusters about
// tokens at once.
const maxACLChecks = 16

// aclCheckTimeout bounds one sub-cluster's answer to ACL.Authorize.
const aclCheckTimeout = 3 * time.Second

// relayed lists the methods whose every answer comes from a sub-cluster
// asked with the caller's token: the sub-cluster checks it. Of these, the
// ones asking a method-wide capability (operator, node, acl) are checked
// here too, before the router looks at the request; the per-queue ones
// and the token's own are left to the sub-cluster, which knows the queue.
// App.Submit asks first (it writes the home mapping before any sub-cluster
// sees it).
var relayed = map[string]bool{
	"App.Submit": true, "App.Status": true, "App.List": true, "App.Kill": true,
	"Node.List": true, "Node.Status": true, "Node.Drain": true, "Node.ResetSecret": true,
	"Container.List": true, "Container.Logs": true,
	"Queue.Apply": true, "Queue.List": true, "Queue.Status": true,
	"Status.Cluster": true, "Operator.WorkloadKeyRotate": true,
	"ACL.Bootstrap": true, "ACL.TokenCreate": true, "ACL.TokenList": true, "ACL.TokenInfo": true, "ACL.TokenSelf": true,
	"ACL.TokenDelete": true, "ACL.PolicyApply": true, "ACL.PolicyList": true, "ACL.PolicyInfo": true, "ACL.PolicyDelete": true,
}

// grants remembers what sub-clusters answered about tokens.
type grants struct {
	mu sync.Mutex
	m  map[[sha256.Size]byte]grant
}

// grant is a sub-cluster's answer about a token and a capability, and
// until when it is trusted.
type grant struct {
	until      time.Time
	management bool
	refusal    error // the refusal, or nil for a grant
}

func grantKey(secret string, c wrpc.Capability, queue string) [sha256.Size]byte {
	return sha256.Sum256([]byte(secret + "\x00" + string(c) + "\x00" + queue))
}

func (g *grants) lookup(k [sha256.Size]byte, now time.Time) (grant, bool) {
	g.mu.Lock()
	defer g.mu.Unlock()
	gr, ok := g.m[k]
	return gr, ok && now.Before(gr.until)
}

func (g *grants) add(k [sha256.Size]byte, now time.Time, gr grant) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.m == nil {
		g.m = map[[sha256.Size]byte]grant{}
	}
	if len(g.m) >= maxACLGrants {
		for key, old := range g.m {
			if !now.Before(old.until) {
				delete(g.m, key)
			}
		}
		if len(g.m) >= maxACLGrants {
			clear(g.m)
		}
	}
	g.m[k] = gr
}

// authorize is the RPC server's authorizer (see above).
func (r *Router) authorize(ctx context.Context, method string, c wrpc.Capability, args any) (context.Context, error) {
	ctx = raftnode.ClientCall(ctx, c) // forwarded to the routers' leader, bounded
	switch c {
	case wrpc.CapPublic, wrpc.CapFederation, wrpc.CapAgent:
		return ctx, nil // certificates: checked by the transport
	}
	if !r.config.ACLEnabled {
		return ctx, nil
	}
	switch c {
	case wrpc.CapQueueRead, wrpc.CapQueueSubmit, wrpc.CapToken:
		if relayed[method] {
			return ctx, nil // per queue, or the token itself: where it is relayed
		}
	}
	var secret string
	if h, ok := args.(interface{ Header() *wrpc.RequestHeader }); ok {
		secret = h.Header().AuthToken
	}
	if err := r.checkToken(ctx, secret, c, ""); err != nil {
		return ctx, fmt.Errorf("%s: %w", method, err)
	}
	return ctx, nil
}

// Authenticate checks, before a request to the HTTP API is read, what of
// capability c the secret grants without the request, as a sub-cluster
// answers it (ACL.Authorize; queue:read and queue:submit on some queue),
// and whether it is a management token's. The method checks again, where
// it is answered.
func (r *Router) Authenticate(ctx context.Context, method, secret string, c wrpc.Capability) (management bool, err error) {
	switch c {
	case wrpc.CapPublic:
		return false, nil
	case wrpc.CapAgent, wrpc.CapServer, wrpc.CapWorkload, wrpc.CapFederation:
		return false, fmt.Errorf("%s: %w: it needs a %s credential, which no HTTP client holds", method, wrpc.ErrPermissionDenied, c)
	}
	if !r.config.ACLEnabled {
		return false, nil
	}
	management, err = r.tokenGrant(ctx, secret, c, "")
	if err != nil {
		return false, fmt.Errorf("%s: %w", method, err)
	}
	return management, nil
}

// authorizeHeader checks the token a request's header carries before its
// body is read (wrpc.Server.AuthorizeHeader): as authorize does for the
// capabilities a router checks itself; for those its sub-clusters check
// (relayed), a caller with a token may send the whole body, which goes on
// to be checked where it is relayed, and one without, DefaultMaxBody.
func (r *Router) authorizeHeader(ctx context.Context, method string, c wrpc.Capability, token string) (context.Context, error) {
	if !r.config.ACLEnabled {
		return ctx, nil
	}
	if relayed[method] {
		if token == "" {
			return ctx, fmt.Errorf("%s: %w: no ACL token", method, wrpc.ErrPermissionDenied)
		}
		return ctx, nil
	}
	if err := r.checkToken(ctx, token, c, ""); err != nil {
		return ctx, fmt.Errorf("%s: %w", method, err)
	}
	return ctx, nil
}

// checkToken asks the reachable sub-clusters (NEW, RUNNING or UNHEALTHY:
// their ACLs do not depend on their nodes), in turn until one answers,
// whether secret grants c (on queue, for the queue capabilities).
func (r *Router) checkToken(ctx context.Context, secret string, c wrpc.Capability, queue string) error {
	_, err := r.tokenGrant(ctx, secret, c, queue)
	return err
}

// tokenGrant is checkToken, also reporting whether the token is a
// management token's.
func (r *Router) tokenGrant(ctx context.Context, secret string, c wrpc.Capability, queue string) (management bool, err error) {
	if !r.config.ACLEnabled {
		return false, nil
	}
	k := grantKey(secret, c, queue)
	if g, ok := r.grants.lookup(k, r.clock.Now()); ok {
		return g.management, g.refusal
	}
	select {
	case r.aclChecks <- struct{}{}:
		defer func() { <-r.aclChecks }()
	default:
		return false, wrpc.Errorf(wrpc.CodeUnavailable, "this router is checking %d tokens with the sub-clusters already; retry shortly", maxACLChecks)
	}
	var tried []string
	for _, sc := range r.fsm.State().Subclusters() {
		if !sc.State.Reachable() {
			continue
		}
		management, err := r.askGrant(ctx, sc, secret, c, queue)
		switch {
		case err == nil:
			r.grants.add(k, r.clock.Now(), grant{until: r.clock.Now().Add(aclGrantTTL), management: management})
			return management, nil
		case wrpc.ErrorCode(err) == wrpc.CodePermissionDenied:
			r.grants.add(k, r.clock.Now(), grant{until: r.clock.Now().Add(aclRefusalTTL), refusal: err})
			return false, err
		case wrpc.ErrorCode(err) == wrpc.CodeBadRequest:
			return false, fmt.Errorf("%w: sub-cluster %s: %v", wrpc.ErrInternal, sc.ID, err)
		}
		tried = append(tried, fmt.Sprintf("%s (%s)", sc.ID, firstLine(err.Error())))
	}
	if len(tried) == 0 {
		return false, wrpc.Errorf(wrpc.CodeUnavailable, "no RUNNING sub-cluster to check the token against: the routers hold no ACLs of their own")
	}
	return false, wrpc.Errorf(wrpc.CodeUnavailable, "no sub-cluster answered to check the token: %v", tried)
}

func (r *Router) askGrant(ctx context.Context, sc *fedstate.Subcluster, secret string, c wrpc.Capability, queue string) (management bool, err error) {
	ctx, cancel := context.WithTimeout(ctx, aclCheckTimeout)
	defer cancel()
	req := &wrpc.ACLAuthorizeRequest{RequestHeader: wrpc.RequestHeader{AuthToken: secret, AllowStale: true}, Capability: c, Queue: queue}
	var resp wrpc.ACLAuthorizeResponse
	err = wrpc.NewClient(sc.Servers, r.serverPool).Call(ctx, "ACL.Authorize", req, &resp)
	return resp.Management, err
}
