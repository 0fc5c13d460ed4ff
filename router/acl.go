package router

import (
	"context"
	"crypto/sha256"
	"fmt"
	"sync"
	"time"

	"github.com/weft-sched/weft/router/fedstate"
	wrpc "github.com/weft-sched/weft/rpc"
	"github.com/weft-sched/weft/scheduler/federation"
)

// ACLs through the routers. Routers hold no ACL store: the sub-clusters
// do, and the routers keep them alike by writing every ACL change to every
// sub-cluster with the same token IDs (acls.go). A call a router relays to
// a sub-cluster carries the caller's token, and the sub-cluster checks it
// as if called directly. A call a router answers itself — the federation's
// own methods, the routers' Raft and gossip — is checked, with ACLs on,
// against a RUNNING sub-cluster (ACL.Authorize); a grant is remembered for
// aclGrantTTL, so a revoked token keeps the routers' methods that long.

// aclGrantTTL is how long a router trusts a sub-cluster's grant.
const aclGrantTTL = 30 * time.Second

// maxACLGrants bounds the grants a router remembers.
const maxACLGrants = 4096

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

// grants remembers the capabilities sub-clusters granted tokens.
type grants struct {
	mu sync.Mutex
	m  map[[sha256.Size]byte]time.Time
}

func grantKey(secret string, c wrpc.Capability, queue string) [sha256.Size]byte {
	return sha256.Sum256([]byte(secret + "\x00" + string(c) + "\x00" + queue))
}

func (g *grants) valid(k [sha256.Size]byte, now time.Time) bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	exp, ok := g.m[k]
	return ok && now.Before(exp)
}

func (g *grants) add(k [sha256.Size]byte, now time.Time) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.m == nil {
		g.m = map[[sha256.Size]byte]time.Time{}
	}
	if len(g.m) >= maxACLGrants {
		for key, exp := range g.m {
			if !now.Before(exp) {
				delete(g.m, key)
			}
		}
		if len(g.m) >= maxACLGrants {
			clear(g.m)
		}
	}
	g.m[k] = now.Add(aclGrantTTL)
}

// authorize is the RPC server's authorizer (see above).
func (r *Router) authorize(ctx context.Context, method string, c wrpc.Capability, args any) (context.Context, error) {
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

// checkToken asks RUNNING sub-clusters, in turn until one answers,
// whether secret grants c (on queue, for the queue capabilities).
func (r *Router) checkToken(ctx context.Context, secret string, c wrpc.Capability, queue string) error {
	if !r.config.ACLEnabled {
		return nil
	}
	k := grantKey(secret, c, queue)
	if r.grants.valid(k, r.clock.Now()) {
		return nil
	}
	var tried []string
	for _, sc := range r.fsm.State().Subclusters() {
		if sc.State != federation.StateRunning {
			continue
		}
		err := r.askGrant(ctx, sc, secret, c, queue)
		switch {
		case err == nil:
			r.grants.add(k, r.clock.Now())
			return nil
		case wrpc.ErrorCode(err) == wrpc.CodePermissionDenied:
			return err
		case wrpc.ErrorCode(err) == wrpc.CodeBadRequest:
			return fmt.Errorf("%w: sub-cluster %s: %v", wrpc.ErrInternal, sc.ID, err)
		}
		tried = append(tried, fmt.Sprintf("%s (%s)", sc.ID, firstLine(err.Error())))
	}
	if len(tried) == 0 {
		return wrpc.Errorf(wrpc.CodeUnavailable, "no RUNNING sub-cluster to check the token against: the routers hold no ACLs of their own")
	}
	return wrpc.Errorf(wrpc.CodeUnavailable, "no sub-cluster answered to check the token: %v", tried)
}

func (r *Router) askGrant(ctx context.Context, sc *fedstate.Subcluster, secret string, c wrpc.Capability, queue string) error {
	ctx, cancel := context.WithTimeout(ctx, aclCheckTimeout)
	defer cancel()
	req := &wrpc.ACLAuthorizeRequest{RequestHeader: wrpc.RequestHeader{AuthToken: secret, AllowStale: true}, Capability: c, Queue: queue}
	return wrpc.NewClient(sc.Servers, r.serverPool).Call(ctx, "ACL.Authorize", req, &struct{}{})
}
