package agent

import (
	"context"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/weft-sched/weft/internal/identity"
	wrpc "github.com/weft-sched/weft/rpc"
	"github.com/weft-sched/weft/scheduler"
)

// Workload identity on the agent: the node secret that proves to the
// servers that this agent is the node it registered as; the servers'
// public keys, with which the agent verifies container and AM tokens; and
// the node's own key, which the servers certify and with which its
// AMRMProxy signs the tokens of the opportunistic containers it allocates.

// Files in the data dir: the node secret (which proves to the servers that
// this agent is the node it registered as) and the node key (with which
// its AMRMProxy signs the tokens of the containers it allocates).
const (
	nodeSecretFile = "node-secret"
	nodeKeyFile    = "node-key"
)

// loadNodeSecret returns the node secret kept in dir, creating one (mode
// 0600) the first time. An agent whose secret is lost (its data dir wiped)
// cannot register under its old name until an operator resets the node's
// secret on the servers (`weft node reset-secret`).
func loadNodeSecret(dir string) (secret string, created bool, err error) {
	s, created, err := loadSecretFile(filepath.Join(dir, nodeSecretFile), identity.NewNodeSecret, identity.ValidateNodeSecret)
	if err != nil {
		return "", false, fmt.Errorf("%w (delete it only if the node must register as new: see `weft node reset-secret`)", err)
	}
	return s, created, nil
}

// loadNodeKey returns the node key kept in dir, creating one (mode 0600)
// the first time. A new key is registered with the node secret at the
// next registration, so losing it costs nothing but that.
func loadNodeKey(dir string) ([]byte, error) {
	newKey := func() (string, error) {
		k, err := identity.NewNodeKey()
		return hex.EncodeToString(k), err
	}
	validate := func(s string) error {
		if b, err := hex.DecodeString(s); err != nil || len(b) != identity.NodeKeySize {
			return fmt.Errorf("a node key is %d hex digits", 2*identity.NodeKeySize)
		}
		return nil
	}
	s, _, err := loadSecretFile(filepath.Join(dir, nodeKeyFile), newKey, validate)
	if err != nil {
		return nil, fmt.Errorf("%w (delete it and restart the agent to make a new one)", err)
	}
	return hex.DecodeString(s)
}

// loadSecretFile reads the secret in path, or makes one and writes it
// there (mode 0600, atomically) when there is none.
func loadSecretFile(path string, make func() (string, error), validate func(string) error) (secret string, created bool, err error) {
	b, err := os.ReadFile(path)
	if err == nil {
		s := strings.TrimSpace(string(b))
		if err := validate(s); err != nil {
			return "", false, fmt.Errorf("%s: %w", path, err)
		}
		return s, false, nil
	}
	if !os.IsNotExist(err) {
		return "", false, fmt.Errorf("read %s: %w", path, err)
	}
	if secret, err = make(); err != nil {
		return "", false, err
	}
	tmp := path + ".tmp"
	f, err := os.OpenFile(tmp, os.O_CREATE|os.O_TRUNC|os.O_WRONLY, 0o600)
	if err != nil {
		return "", false, fmt.Errorf("write %s: %w", path, err)
	}
	_, err = f.WriteString(secret + "\n")
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp, path)
	}
	if err != nil {
		os.Remove(tmp)
		return "", false, fmt.Errorf("write %s: %w", path, err)
	}
	return secret, true, nil
}

// workloadKeys is what the agent holds of the servers' workload keys (the
// public halves) and its own node's certified minting key.
type workloadKeys struct {
	node    string
	nodeKey []byte

	mu       sync.Mutex
	verifier *identity.Verifier
	signer   *identity.NodeSigner // nil until the servers certify the key
	cert     string               // the certificate signer holds
	changed  chan struct{}        // closed when the keys are replaced
	// waiting counts verifyToken calls waiting for a key not learned yet;
	// missing is the last key a wait ended without, at missingAt.
	waiting   int
	missing   uint32
	missingAt time.Time
}

func newWorkloadKeys(node string, nodeKey []byte) *workloadKeys {
	return &workloadKeys{node: node, nodeKey: nodeKey, changed: make(chan struct{})}
}

// current returns the verifier, and a channel closed when it is replaced.
func (k *workloadKeys) current() (*identity.Verifier, <-chan struct{}) {
	k.mu.Lock()
	defer k.mu.Unlock()
	return k.verifier, k.changed
}

// newestID returns the newest key the agent holds (0: none).
func (k *workloadKeys) newestID() uint32 {
	k.mu.Lock()
	defer k.mu.Unlock()
	return k.verifier.NewestID()
}

// minter returns what signs this node's opportunistic container tokens
// (nil: nothing yet), and when its certificate ends (Unix ns; 0: none).
func (k *workloadKeys) minter() (*identity.NodeSigner, int64) {
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.signer == nil {
		return nil, 0
	}
	return k.signer, k.signer.Expiry()
}

// set replaces the public keys with the servers' set. An empty set
// changes nothing.
func (k *workloadKeys) set(keys []wrpc.WorkloadKey) error {
	if len(keys) == 0 {
		return nil
	}
	pub := make([]identity.PublicKey, len(keys))
	for i, w := range keys {
		pub[i] = identity.PublicKey{ID: w.ID, Key: w.PublicKey}
	}
	v, err := identity.NewVerifier(pub)
	if err != nil {
		return err
	}
	k.mu.Lock()
	defer k.mu.Unlock()
	k.verifier = v
	close(k.changed)
	k.changed = make(chan struct{})
	return nil
}

// setCert takes the certificate the servers made of the node's key ("":
// unchanged). Set the keys it was signed with first.
func (k *workloadKeys) setCert(cert string) error {
	if cert == "" {
		return nil
	}
	k.mu.Lock()
	defer k.mu.Unlock()
	s, err := identity.NewNodeSigner(k.node, k.nodeKey, cert, k.verifier)
	if err != nil {
		return err
	}
	k.signer, k.cert = s, cert
	return nil
}

// maxKeyWaiters bounds the calls that wait for a key the agent has not
// learned yet; more fail at once.
const maxKeyWaiters = 32

// verifyToken checks a workload token with the agent's keys. Only a token
// of the key right after the newest the agent holds (keys are numbered in
// order, and a rotation's next heartbeat brings its key) may be one it has
// not learned yet: such a call waits for the keys to change, up to two
// heartbeat intervals, at most maxKeyWaiters calls at once, and once a
// wait for a key ended without it, calls of that key fail at once for a
// heartbeat interval. Any other token of an unknown key fails at once: no
// caller can make the agent hold calls, or ask the servers sooner.
func (a *Agent) verifyToken(ctx context.Context, token string) (*identity.Claims, error) {
	v, changed := a.keys.current()
	claims, err := v.Verify(token, a.clock.Now().UnixNano())
	if !errors.Is(err, identity.ErrUnknownKey) {
		return claims, err
	}
	id, ok := identity.KeyIDOf(token)
	if !ok || v.NewestID() != 0 && id != v.NewestID()+1 {
		return nil, err
	}
	k := a.keys
	now := a.clock.Now()
	k.mu.Lock()
	if k.waiting >= maxKeyWaiters || id == k.missing && now.Sub(k.missingAt) < a.config.HeartbeatInterval {
		k.mu.Unlock()
		return nil, err
	}
	k.waiting++
	k.mu.Unlock()
	defer func() {
		k.mu.Lock()
		k.waiting--
		k.mu.Unlock()
	}()
	select {
	case <-changed:
	case <-ctx.Done():
		return nil, err
	case <-a.clock.After(min(a.heartbeatTimeout(), 2*a.config.HeartbeatInterval)):
		k.mu.Lock()
		k.missing, k.missingAt = id, a.clock.Now()
		k.mu.Unlock()
		return nil, err
	}
	v, _ = a.keys.current()
	return v.Verify(token, a.clock.Now().UnixNano())
}

// denied is a permission error about a token.
func denied(format string, args ...any) error {
	return wrpc.Errorf(wrpc.CodePermissionDenied, format, args...)
}

// checkContainerToken admits a Container.Start only with a valid container
// token for exactly c on this node; it returns the claims.
func (a *Agent) checkContainerToken(ctx context.Context, token string, c *wrpc.ContainerInfo) (*identity.Claims, error) {
	claims, err := a.verifyToken(ctx, token)
	if err != nil {
		return nil, denied("container %s: container token: %v", c.ID, err)
	}
	switch {
	case claims.Kind != identity.KindContainer:
		return nil, denied("container %s: the token is an %s token, not a container token", c.ID, claims.Kind)
	case claims.NodeID != a.config.NodeID:
		return nil, denied("container %s: the container token is for node %s, not %s", c.ID, claims.NodeID, a.config.NodeID)
	case claims.ContainerID != c.ID:
		return nil, denied("container %s: the container token is for container %s", c.ID, claims.ContainerID)
	case claims.AppID != c.AppID || claims.Attempt != c.Attempt:
		return nil, denied("container %s: the container token is for app %s attempt %d, not app %s attempt %d",
			c.ID, claims.AppID, claims.Attempt, c.AppID, c.Attempt)
	case !identity.SameResources(claims.Resources, c.Resources):
		return nil, denied("container %s: resources %s are not the %s allocated", c.ID, c.Resources, claims.Resources)
	case c.ExecutionType != "" && c.ExecutionType != string(claims.ExecutionType):
		return nil, denied("container %s: execution_type %s is not the %s allocated", c.ID, c.ExecutionType, claims.ExecutionType)
	}
	return claims, nil
}

// accountOf returns the user and uid a container of claims (its verified
// container token) runs as. The servers sign those of the containers they
// allocate. A node that minted an opportunistic container's token is
// trusted with neither: the caller must also give the app attempt's AM
// token, which the servers signed for the AM on that very node, and the
// user and uid are the AM token's.
func (a *Agent) accountOf(ctx context.Context, claims *identity.Claims, amToken string) (string, uint32, error) {
	if claims.Minter == "" {
		return claims.User, claims.UID, nil
	}
	am, err := a.verifyToken(ctx, amToken)
	switch {
	case err != nil:
		return "", 0, denied("container %s was allocated by node %s's AMRMProxy: give its app's AM token too (am_token): %v", claims.ContainerID, claims.Minter, err)
	case am.Kind != identity.KindAM || am.Minter != "":
		return "", 0, denied("container %s: am_token is not an AM token the servers signed", claims.ContainerID)
	case am.AppID != claims.AppID || am.Attempt != claims.Attempt:
		return "", 0, denied("container %s: am_token is app %s attempt %d's, not app %s attempt %d's", claims.ContainerID, am.AppID, am.Attempt, claims.AppID, claims.Attempt)
	case am.NodeID != claims.Minter:
		return "", 0, denied("container %s was allocated by node %s, which does not run app %s's AM (node %s does)", claims.ContainerID, claims.Minter, am.AppID, am.NodeID)
	case claims.User != am.User || claims.UID != am.UID:
		return "", 0, denied("container %s: the token node %s minted names another user or uid than the app's", claims.ContainerID, claims.Minter)
	}
	return am.User, am.UID, nil
}

// checkCaller admits a call a token of app user's (uid) authorised only
// from one of that app's containers, not just from whoever holds the
// token: a peer with a certificate (a server relaying a call, another
// agent) answers for itself; one without, from this host, must run as the
// account this agent runs the app's containers as (peeruid.go). A caller
// from another host is judged by its token alone.
func (a *Agent) checkCaller(ctx context.Context, what, user string, uid uint32) error {
	ci := wrpc.ConnInfoFrom(ctx)
	if ci == nil || ci.Role != "" {
		return nil
	}
	got, local := ci.PeerUID(peerUID)
	if !local {
		return nil
	}
	acct, err := a.mgr.runAs.decide(user, uid, a.mgr.lookup)
	if err != nil {
		return denied("%s: %v", what, err)
	}
	want := uint32(os.Geteuid())
	if acct.cred != nil {
		want = acct.cred.Uid
	}
	if got != want {
		return denied("%s: the calling process runs as uid %d, not as the app's containers (uid %d): a token is used only by its own app's containers", what, got, want)
	}
	return nil
}

// checkAppToken admits a call about containers of app only with a valid AM
// token of that app (the AM may run on any node), or a container token of
// exactly the container id (on this node). It returns the claims.
func (a *Agent) checkAppToken(ctx context.Context, token, app, id string) (*identity.Claims, error) {
	claims, err := a.verifyToken(ctx, token)
	if err != nil {
		return nil, denied("container %s: token: %v", id, err)
	}
	switch claims.Kind {
	case identity.KindAM:
		if app != "" && claims.AppID != app {
			return nil, denied("container %s belongs to app %s; the AM token is app %s's", id, app, claims.AppID)
		}
	case identity.KindContainer:
		if claims.ContainerID != id || claims.NodeID != a.config.NodeID || app != "" && claims.AppID != app {
			return nil, denied("container %s: the container token is for container %s on node %s", id, claims.ContainerID, claims.NodeID)
		}
	}
	if claims.Kind == identity.KindAM {
		// An AM token is what an app's containers hold: only they may use
		// it. (A container token is the AM's, or a server's relaying a
		// call; Container.Start checks its caller itself.)
		what := "container " + id
		if id == "" {
			what = "app " + claims.AppID
		}
		if err := a.checkCaller(ctx, what, claims.User, claims.UID); err != nil {
			return nil, err
		}
	}
	return claims, nil
}

// containerClaims are the claims of the token of an opportunistic
// container this agent's AMRMProxy allocates on node at now (Unix ns).
func containerClaims(app string, attempt int, id, node, user string, res scheduler.Resources, now int64) identity.Claims {
	return identity.Claims{Kind: identity.KindContainer, AppID: app, Attempt: attempt, ContainerID: id, NodeID: node,
		Resources: res, ExecutionType: scheduler.Opportunistic, User: user, Expiry: now + int64(identity.ContainerTokenLifetime)}
}
