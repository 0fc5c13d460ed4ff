package server

import (
	"context"
	"sync"
	"time"

	"github.com/weft-sched/weft/fsm"
	"github.com/weft-sched/weft/internal/identity"
	wrpc "github.com/weft-sched/weft/rpc"
	"github.com/weft-sched/weft/scheduler"
)

// Workload identity on servers: the leader creates the cluster's signing
// key; servers mint AM tokens (for AM launches), container tokens (for
// allocations handed to AMs, and to relay calls to agents) and node-join
// tokens, certify each node's own minting key, verify AM tokens on the AM
// protocol and check node secrets. Keys are Ed25519: agents are given only
// the public halves.

// keyrings caches the keyring of each key set: deriving an Ed25519 key
// costs tens of microseconds, and every Allocate answer signs. A key set is
// named by its newest key record, which the FSM replaces on every change.
var keyrings struct {
	sync.Mutex
	byNewest map[*fsm.WorkloadKey]*identity.Keyring
}

// maxCachedKeyrings bounds keyrings (one per key set a process has seen
// lately; several only when a test runs several clusters in one process).
const maxCachedKeyrings = 8

// sigCacheSize bounds Server.sigs: the AM tokens of the apps running, and
// the batches of opportunistic containers being recorded.
const sigCacheSize = 4096

// keyringOf returns the workload keyring the replicated state holds; nil
// (which verifies nothing and signs nothing) before the first key.
func keyringOf(st *fsm.State) *identity.Keyring {
	keys := st.WorkloadKeys()
	if len(keys) == 0 {
		return nil
	}
	newest := keys[len(keys)-1]
	keyrings.Lock()
	defer keyrings.Unlock()
	if r, ok := keyrings.byNewest[newest]; ok {
		return r
	}
	ks := make([]identity.Key, len(keys))
	for i, k := range keys {
		ks[i] = identity.Key{ID: k.ID, Secret: k.Secret}
	}
	r, err := identity.NewKeyring(ks, newest.ID)
	if err != nil {
		return nil // the FSM's invariants make this impossible
	}
	if len(keyrings.byNewest) >= maxCachedKeyrings || keyrings.byNewest == nil {
		keyrings.byNewest = make(map[*fsm.WorkloadKey]*identity.Keyring, maxCachedKeyrings)
	}
	keyrings.byNewest[newest] = r
	return r
}

// newestKeyID returns the ID of the active workload key (0: none), which
// names the whole key set.
func newestKeyID(st *fsm.State) uint32 {
	keys := st.WorkloadKeys()
	if len(keys) == 0 {
		return 0
	}
	return keys[len(keys)-1].ID
}

// wireKeys returns the public halves of the workload keys: what agents
// are given. No agent ever holds a key that signs in the servers' name.
func wireKeys(st *fsm.State) []wrpc.WorkloadKey {
	pub := keyringOf(st).PublicKeys()
	out := make([]wrpc.WorkloadKey, len(pub))
	for i, k := range pub {
		out[i] = wrpc.WorkloadKey{ID: k.ID, PublicKey: k.Key}
	}
	return out
}

// nodeCert certifies node n's minting key until NodeCertLifetime from now;
// "" for a node that registered no key.
func (s *Server) nodeCert(st *fsm.State, n *scheduler.Node, now time.Time) string {
	if len(n.MintKey) == 0 {
		return ""
	}
	cert, err := keyringOf(st).CertifyNode(n.ID, n.MintKey, now.Add(identity.NodeCertLifetime).UnixNano())
	if err != nil {
		s.logger.Warn("cannot certify a node's minting key yet", "node", n.ID, "error", err)
		return ""
	}
	return cert
}

// claimsOf are the claims of a token about container c of app (nil when
// the app is not known): its user, and the uid its containers run as.
func claimsOf(kind identity.Kind, c *scheduler.Container, app *scheduler.App, expiry int64) identity.Claims {
	cl := identity.Claims{Kind: kind, AppID: c.AppID, Attempt: c.Attempt, ContainerID: c.ID, NodeID: c.NodeID,
		Resources: c.Resources, ExecutionType: c.ExecutionType, Expiry: expiry}
	if app != nil {
		cl.User, cl.UID = app.Spec.User, app.UID
	}
	return cl
}

// containerClaims are the claims of an allocation's container token: valid
// until its start deadline (with room for clock skew), after which the
// servers reclaim it anyway.
func containerClaims(c *scheduler.Container, app *scheduler.App) identity.Claims {
	return claimsOf(identity.KindContainer, c, app, c.AllocatedAt+int64(identity.ContainerTokenLifetime))
}

// amToken mints the AM token of the AM container c of app.
func amToken(ring *identity.Keyring, c *scheduler.Container, app *scheduler.App, now time.Time) (string, error) {
	return ring.Sign(claimsOf(identity.KindAM, c, app, now.Add(identity.AMTokenLifetime).UnixNano()))
}

// relayToken mints a short-lived container token for c that lets a server
// relay a call to c's agent (a log read, a promotion).
func (s *Server) relayToken(st *fsm.State, c *scheduler.Container) (string, error) {
	app, _ := st.App(c.AppID)
	return keyringOf(st).Sign(claimsOf(identity.KindContainer, c, app, s.clock.Now().Add(identity.RelayTokenLifetime).UnixNano()))
}

// noKey is the answer while the cluster has no signing key yet (the new
// leader creates one first thing).
func noKey(err error) error {
	return wrpc.Errorf(wrpc.CodeUnavailable, "cannot mint workload tokens yet: %v", err)
}

// amAttempt authenticates an AM protocol call: token must be a valid AM
// token of (appID, attempt); the attempt must be the app's current, placed
// one (ErrStale if not) and the token that of its AM container — or, for
// an unmanaged AM's app, whose attempts have none, a token naming no
// container. The app is returned with ErrStale too (it may have
// finished); the claims only when the call is allowed.
func (s *Server) amAttempt(st *fsm.State, appID string, attempt int, token string) (*scheduler.App, *identity.Claims, error) {
	claims, err := keyringOf(st).VerifyCached(token, s.clock.Now().UnixNano(), s.sigs)
	if err != nil {
		return nil, nil, wrpc.Errorf(wrpc.CodePermissionDenied, "app %s attempt %d: AM token: %v", appID, attempt, err)
	}
	if claims.Kind != identity.KindAM || claims.AppID != appID || claims.Attempt != attempt {
		return nil, nil, wrpc.Errorf(wrpc.CodePermissionDenied, "app %s attempt %d: the token is a %s token of app %s attempt %d",
			appID, attempt, claims.Kind, claims.AppID, claims.Attempt)
	}
	app, ok := st.App(appID)
	if !ok {
		return nil, nil, wrpc.Errorf(wrpc.CodeNotFound, "app %s not found", appID)
	}
	if app.AMPending || len(app.Attempts) == 0 || attempt != app.CurrentAttempt() {
		return app, nil, wrpc.Errorf(wrpc.CodeStale, "app %s attempt %d is not the app's current AM attempt (current is %d)", appID, attempt, app.CurrentAttempt())
	}
	switch am := app.Attempts[len(app.Attempts)-1].ContainerID; {
	case claims.ContainerID != am:
		return nil, nil, wrpc.Errorf(wrpc.CodePermissionDenied, "app %s attempt %d: the AM token is for container %q, not the attempt's AM container %q",
			appID, attempt, claims.ContainerID, am)
	case am == "" && app.Unmanaged == nil:
		// Only an unmanaged AM's attempt has no AM container: a token
		// naming none never speaks for a managed app's AM.
		return nil, nil, wrpc.Errorf(wrpc.CodePermissionDenied, "app %s attempt %d has no AM container: the token names none", appID, attempt)
	}
	return app, claims, nil
}

// renewAMToken returns a fresh AM token for claims when half its life has
// passed or a newer key signs now, else "".
func (s *Server) renewAMToken(st *fsm.State, claims *identity.Claims) string {
	ring := keyringOf(st)
	now := s.clock.Now()
	if claims.KeyID == ring.ActiveID() && time.Duration(claims.Expiry-now.UnixNano()) > identity.AMTokenLifetime/2 {
		return ""
	}
	renewed := *claims
	renewed.Expiry = now.Add(identity.AMTokenLifetime).UnixNano()
	tok, err := ring.Sign(renewed)
	if err != nil {
		s.logger.Warn("could not renew an AM token", "app", claims.AppID, "error", err)
		return ""
	}
	return tok
}

// checkNodeSecret admits a call about node n only with n's secret. A node
// with no secret yet (registered before secrets existed, or reset by an
// operator) admits any.
func checkNodeSecret(n *scheduler.Node, secret string) error {
	if len(n.SecretHash) == 0 || identity.NodeSecretMatches(n.SecretHash, secret) {
		return nil
	}
	return wrpc.Errorf(wrpc.CodePermissionDenied, "node %s: the node secret does not match the one it registered with; "+
		"if its agent lost its data dir, stop the agent, wait until the node is DOWN and run `weft node reset-secret %s`", n.ID, n.ID)
}

// ensureWorkloadKey creates the cluster's first workload signing key, when
// the replicated state holds none, as a new leader's first write. It
// retries until it succeeds or leadership ends.
func (s *Server) ensureWorkloadKey(ctx context.Context) {
	for len(s.fsm.State().WorkloadKeys()) == 0 {
		secret, err := identity.NewKeySecret()
		if err == nil {
			_, _, err = s.raftApply(ctx, fsm.WorkloadKeyType, &fsm.WorkloadKeyRequest{Secret: secret, IfNone: true,
				RetainRetired: int64(identity.MaxTokenLifetime), Now: s.clock.Now().UnixNano()})
		}
		if err == nil {
			s.logger.Info("created the cluster's workload signing key", "key_id", newestKeyID(s.fsm.State()))
			return
		}
		s.logger.Error("could not create the workload signing key; retrying", "error", err)
		select {
		case <-s.clock.After(time.Second):
		case <-ctx.Done():
			return
		}
	}
}

// WorkloadKeyRotate installs a new workload signing key (`weft operator
// workload-key rotate`). Tokens signed by the previous keys stay valid
// until they expire; AMs get renewed tokens in their next AM.Allocate
// answers, and agents learn the new key from their next heartbeat.
func (e *Operator) WorkloadKeyRotate(ctx context.Context, args *wrpc.RequestHeader, reply *wrpc.WorkloadKeyRotateResponse) error {
	if done, err := e.srv.forwardWrite(ctx, "Operator.WorkloadKeyRotate", args, reply); done {
		return err
	}
	secret, err := identity.NewKeySecret()
	if err != nil {
		return err
	}
	res, index, err := e.srv.raftApplyRequest(ctx, args, fsm.WorkloadKeyType, &fsm.WorkloadKeyRequest{Secret: secret,
		RetainRetired: int64(identity.MaxTokenLifetime), Now: e.srv.clock.Now().UnixNano()})
	if err != nil {
		return err
	}
	reply.Index, reply.KeyID, reply.NumKeys = index, uint32(res.(uint64)), len(e.srv.fsm.State().WorkloadKeys())
	e.srv.logger.Info("rotated the workload signing key", "key_id", reply.KeyID, "keys_kept", reply.NumKeys)
	return nil
}

// ResetSecret forgets a DOWN node's secret, so that an agent that lost its
// data dir can register under the node's name again (`weft node
// reset-secret`). A node that is not DOWN is refused: its agent may still
// be running.
func (e *Node) ResetSecret(ctx context.Context, args *wrpc.NodeResetSecretRequest, reply *wrpc.WriteResponse) error {
	if done, err := e.srv.forwardWrite(ctx, "Node.ResetSecret", args, reply); done {
		return err
	}
	_, index, err := e.srv.raftApplyRequest(ctx, &args.RequestHeader, fsm.NodeSecretResetType,
		&fsm.NodeSecretResetRequest{ID: args.ID, Now: e.srv.clock.Now().UnixNano()})
	reply.Index = index
	if err == nil {
		e.srv.logger.Warn("node secret reset by an operator: the next registration under its name sets a new one", "node", args.ID)
	}
	return err
}

// Node-join tokens: with ACLs on, an agent registers a node name the
// servers do not know (or whose secret an operator reset) only with a
// join token an operator made (`weft node join-token create`, node:write).
// A join token is signed like any workload token and kept nowhere; it is
// valid until it expires (at most identity.MaxTokenLifetime), for any
// number of nodes, or for the one name it was made for.

// DefaultJoinTokenTTL is a join token's life unless its creator says.
const DefaultJoinTokenTTL = time.Hour

// checkJoinToken admits the first registration of node with token. With
// ACLs off anyone may register a new node, as before.
func (s *Server) checkJoinToken(st *fsm.State, token, node string, now time.Time) error {
	if !s.config.ACLEnabled {
		return nil
	}
	if token == "" {
		return wrpc.Errorf(wrpc.CodePermissionDenied, "node %s is not registered: a new node needs a join token "+
			"(an operator makes one with `weft node join-token create`; give it to the agent as join_token, join_token_file or WEFT_JOIN_TOKEN)", node)
	}
	claims, err := keyringOf(st).Verify(token, now.UnixNano())
	if err != nil {
		return wrpc.Errorf(wrpc.CodePermissionDenied, "node %s: join token: %v", node, err)
	}
	switch {
	case claims.Kind != identity.KindJoin:
		return wrpc.Errorf(wrpc.CodePermissionDenied, "node %s: the join token is an %s token, not a join token", node, claims.Kind)
	case claims.NodeID != "" && claims.NodeID != node:
		return wrpc.Errorf(wrpc.CodePermissionDenied, "node %s: the join token is for node %s only", node, claims.NodeID)
	}
	return nil
}

// JoinTokenCreate makes a node-join token (`weft node join-token create`).
// Any server answers: the token is a signature, not a write.
func (e *Node) JoinTokenCreate(ctx context.Context, args *wrpc.JoinTokenCreateRequest, reply *wrpc.JoinTokenCreateResponse) error {
	ttl := args.TTL
	switch {
	case ttl == 0:
		ttl = DefaultJoinTokenTTL
	case ttl < time.Minute || ttl > identity.MaxTokenLifetime:
		return wrpc.Errorf(wrpc.CodeBadRequest, "ttl: %s is out of range; give from 1m to %s", ttl, identity.MaxTokenLifetime)
	}
	if args.Node != "" {
		if err := scheduler.ValidateNodeID(args.Node); err != nil {
			return wrpc.Errorf(wrpc.CodeBadRequest, "node: %v", err)
		}
	}
	st := e.srv.fsm.State()
	expiry := e.srv.clock.Now().Add(ttl).UnixNano()
	tok, err := keyringOf(st).Sign(identity.Claims{Kind: identity.KindJoin, NodeID: args.Node, Expiry: expiry})
	if err != nil {
		return noKey(err)
	}
	reply.Token, reply.Node, reply.ExpiresAt = tok, args.Node, expiry
	e.srv.logger.Info("node-join token created", "node", args.Node, "expires", time.Unix(0, expiry).UTC().Format(time.RFC3339))
	return nil
}

// checkNodeCapacity refuses a node that declares more than
// max_node_resources: a node that claims a thousand times a real machine
// would draw every placement to itself.
func (s *Server) checkNodeCapacity(node string, capacity scheduler.Resources) error {
	limit := s.config.MaxNodeResources
	if err := scheduler.ValidateNodeCapacity(capacity); err != nil {
		return wrpc.Errorf(wrpc.CodeBadRequest, "node %s: %v", node, err)
	}
	over := func(name string, have, most int64) error {
		return wrpc.Errorf(wrpc.CodeBadRequest, "node %s: capacity %s=%d is more than max_node_resources allows (%d); "+
			"if the machine really is that large, raise max_node_resources on the servers", node, name, have, most)
	}
	if capacity.MemoryMB > limit.MemoryMB {
		return over(scheduler.ResourceMemoryMB, capacity.MemoryMB, limit.MemoryMB)
	}
	if capacity.Vcores > limit.Vcores {
		return over(scheduler.ResourceVcores, capacity.Vcores, limit.Vcores)
	}
	for name, v := range capacity.Extended {
		most, ok := limit.Extended[name]
		if !ok {
			most = DefaultMaxExtendedResource
		}
		if v > most {
			return over(name, v, most)
		}
	}
	return nil
}
