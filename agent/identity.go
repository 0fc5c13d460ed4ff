package agent

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"

	"github.com/weft-sched/weft/internal/identity"
	wrpc "github.com/weft-sched/weft/rpc"
	"github.com/weft-sched/weft/scheduler"
)

// Workload identity on the agent (SPEC §15): the node secret that proves
// to the servers that this agent is the node it registered as, and the
// workload keys learned from the servers, with which the agent verifies
// container and AM tokens (and its AMRMProxy signs the container tokens of
// what it allocates).

// nodeSecretFile holds the node secret in the data dir.
const nodeSecretFile = "node-secret"

// loadNodeSecret returns the node secret kept in dir, creating one (mode
// 0600) the first time. An agent whose secret is lost (its data dir wiped)
// cannot register under its old name until an operator resets the node's
// secret on the servers (`weft node reset-secret`).
func loadNodeSecret(dir string) (secret string, created bool, err error) {
	path := filepath.Join(dir, nodeSecretFile)
	b, err := os.ReadFile(path)
	if err == nil {
		s := strings.TrimSpace(string(b))
		if err := identity.ValidateNodeSecret(s); err != nil {
			return "", false, fmt.Errorf("%s: %w (delete it only if the node must register as new: see `weft node reset-secret`)", path, err)
		}
		return s, false, nil
	}
	if !os.IsNotExist(err) {
		return "", false, fmt.Errorf("read the node secret: %w", err)
	}
	if secret, err = identity.NewNodeSecret(); err != nil {
		return "", false, err
	}
	tmp := path + ".tmp"
	f, err := os.OpenFile(tmp, os.O_CREATE|os.O_TRUNC|os.O_WRONLY, 0o600)
	if err != nil {
		return "", false, fmt.Errorf("write the node secret: %w", err)
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
		return "", false, fmt.Errorf("write the node secret: %w", err)
	}
	return secret, true, nil
}

// workloadKeys is what the agent holds of the servers' workload keys.
type workloadKeys struct {
	mu      sync.Mutex
	ring    *identity.Keyring
	newest  uint32
	changed chan struct{} // closed when the keys are replaced
}

func newWorkloadKeys() *workloadKeys { return &workloadKeys{changed: make(chan struct{})} }

// current returns the keyring, and a channel closed when it is replaced.
func (k *workloadKeys) current() (*identity.Keyring, <-chan struct{}) {
	k.mu.Lock()
	defer k.mu.Unlock()
	return k.ring, k.changed
}

// newestID returns the newest key the agent holds (0: none).
func (k *workloadKeys) newestID() uint32 {
	k.mu.Lock()
	defer k.mu.Unlock()
	return k.newest
}

// set replaces the keys with the servers' set; the newest is the active
// one. An empty set changes nothing.
func (k *workloadKeys) set(keys []wrpc.WorkloadKey) error {
	if len(keys) == 0 {
		return nil
	}
	ks := make([]identity.Key, len(keys))
	var newest uint32
	for i, w := range keys {
		ks[i] = identity.Key{ID: w.ID, Secret: w.Secret}
		newest = max(newest, w.ID)
	}
	ring, err := identity.NewKeyring(ks, newest)
	if err != nil {
		return err
	}
	k.mu.Lock()
	defer k.mu.Unlock()
	k.ring, k.newest = ring, newest
	close(k.changed)
	k.changed = make(chan struct{})
	return nil
}

// verifyToken checks a workload token with the agent's keys. A token
// signed by a key the agent has not learned yet (a rotation its heartbeat
// has not brought) waits for the keys to change, up to a heartbeat
// timeout; no caller can make the agent ask the servers sooner.
func (a *Agent) verifyToken(ctx context.Context, token string) (*identity.Claims, error) {
	var timeout <-chan struct{}
	for {
		ring, changed := a.keys.current()
		claims, err := ring.Verify(token, a.clock.Now().UnixNano())
		if !errors.Is(err, identity.ErrUnknownKey) {
			return claims, err
		}
		if timeout == nil {
			wait, cancel := context.WithTimeout(ctx, a.heartbeatTimeout())
			defer cancel()
			timeout = wait.Done()
		}
		select {
		case <-changed:
		case <-timeout:
			return nil, err
		}
	}
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
	return claims, nil
}

// mintContainerToken signs the token of a container this agent's
// AMRMProxy allocated on node (at now, Unix ns).
func (a *Agent) mintContainerToken(ring *identity.Keyring, app string, attempt int, id, node, user string, res scheduler.Resources, now int64) (string, error) {
	return ring.Sign(identity.Claims{Kind: identity.KindContainer, AppID: app, Attempt: attempt, ContainerID: id, NodeID: node,
		Resources: res, ExecutionType: scheduler.Opportunistic, User: user, Expiry: now + int64(identity.ContainerTokenLifetime)})
}
