package fsm

import (
	"github.com/weft-sched/weft/scheduler"
)

// WorkloadKeySize is the length of a workload signing key's secret.
const WorkloadKeySize = 32

// WorkloadKey is a key that signs workload tokens (SPEC §15), as the
// replicated state and snapshots hold it. The key with RetiredAt 0 is the
// active one: it is always the one with the highest ID.
type WorkloadKey struct {
	ID        uint32 `codec:"id"`
	Secret    []byte `codec:"secret"`
	CreatedAt int64  `codec:"created_at"`
	// RetiredAt is when a newer key replaced this one (Unix ns, leader
	// time); 0 while it is active.
	RetiredAt int64 `codec:"retired_at"`
}

// WorkloadKeyRequest installs a new active workload key (a rotation, or
// the first key of a cluster). The previous active key is retired at Now,
// and keys retired RetainRetired or longer before Now are dropped: no
// token they signed is still valid. Keys change only through this
// command, and each change adds a key, so the highest key ID names the
// whole set. With IfNone, the key is installed only if the state holds
// none (two leaders racing to create the first key install one). The
// result is the active key's ID (uint64).
type WorkloadKeyRequest struct {
	Secret        []byte `codec:"secret"`
	IfNone        bool   `codec:"if_none"`
	RetainRetired int64  `codec:"retain_retired"` // ns
	Now           int64  `codec:"now"`
}

// NodeSecretResetRequest forgets a DOWN node's secret hash, so that the
// next registration under its name sets a new one: the way back for an
// agent that lost its data dir.
type NodeSecretResetRequest struct {
	ID  string `codec:"id"`
	Now int64  `codec:"now"`
}

// WorkloadKeys returns the workload signing keys, oldest first; the last
// one is the active key. Callers must not modify them.
func (s *State) WorkloadKeys() []*WorkloadKey { return s.workloadKeys }

func (t *txn) applyWorkloadKey(req *WorkloadKeyRequest) (uint64, error) {
	keys := t.next.workloadKeys
	if req.IfNone && len(keys) > 0 {
		return uint64(keys[len(keys)-1].ID), nil
	}
	if len(req.Secret) != WorkloadKeySize {
		return 0, reject(ErrInvalid, "workload key secret is %d bytes, want %d", len(req.Secret), WorkloadKeySize)
	}
	if req.RetainRetired <= 0 {
		return 0, reject(ErrInvalid, "workload key retain_retired must be positive")
	}
	id := uint32(1)
	if len(keys) > 0 {
		id = keys[len(keys)-1].ID + 1
		if id == 0 {
			return 0, reject(ErrConflict, "workload key IDs are exhausted")
		}
	}
	next := make([]*WorkloadKey, 0, len(keys)+1)
	for _, k := range keys {
		if k.RetiredAt == 0 {
			retired := *k
			retired.RetiredAt = req.Now
			k = &retired
		}
		if req.Now-k.RetiredAt >= req.RetainRetired {
			continue // every token it signed has expired
		}
		next = append(next, k)
	}
	next = append(next, &WorkloadKey{ID: id, Secret: append([]byte(nil), req.Secret...), CreatedAt: req.Now})
	t.next.workloadKeys = next
	return uint64(id), nil
}

func (t *txn) applyNodeSecretReset(req *NodeSecretResetRequest) error {
	n, ok := t.node(req.ID)
	if !ok {
		return reject(ErrNotFound, "node %s is not registered", req.ID)
	}
	if n.Status != scheduler.NodeDown {
		return reject(ErrConflict, "node %s is %s: only a DOWN node's secret may be reset (stop its agent, or wait for the servers to mark it DOWN)", req.ID, n.Status)
	}
	if len(n.SecretHash) == 0 {
		return nil
	}
	n = n.Copy()
	n.SecretHash = nil
	t.putNode(n)
	return nil
}
