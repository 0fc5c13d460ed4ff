package fsm

import (
	"bytes"
	"crypto/ed25519"
	"crypto/sha256"

	"github.com/weft-sched/weft/scheduler"
)

// applyNodeRegister registers a node at a new epoch. Containers of its
// previous registration are lost: the agent that held them is gone. A node
// with a secret hash is registered again only with the same hash, and
// nothing changes otherwise.
func (t *txn) applyNodeRegister(req *NodeRegisterRequest) (uint64, error) {
	if req.ID == "" {
		return 0, reject(ErrInvalid, "node id is empty")
	}
	if err := req.Capacity.Validate(); err != nil {
		return 0, reject(ErrInvalid, "node %s capacity: %v", req.ID, err)
	}
	if n := len(req.SecretHash); n != 0 && n != sha256.Size {
		return 0, reject(ErrInvalid, "node %s: secret_hash is %d bytes, want %d", req.ID, n, sha256.Size)
	}
	if n := len(req.MintKey); n != 0 && n != ed25519.PublicKeySize {
		return 0, reject(ErrInvalid, "node %s: mint_key is %d bytes, want %d", req.ID, n, ed25519.PublicKeySize)
	}
	epoch := uint64(1)
	if old, ok := t.node(req.ID); ok {
		if len(old.SecretHash) > 0 && !bytes.Equal(old.SecretHash, req.SecretHash) {
			return 0, reject(ErrConflict, "node %s is registered with another node secret", req.ID)
		}
		epoch = old.Epoch + 1
		for _, c := range t.liveOnNode(req.ID) {
			t.completeContainer(c, scheduler.ReasonLost, nil, "its node re-registered (the agent restarted)", req.Now)
		}
	}
	n := &scheduler.Node{
		ID:           req.ID,
		Address:      req.Address,
		Rack:         req.Rack,
		Capacity:     req.Capacity,
		Status:       scheduler.NodeReady,
		StatusAt:     req.Now,
		Epoch:        epoch,
		RegisteredAt: req.Now,
		SecretHash:   req.SecretHash,
		MintKey:      req.MintKey,
	}
	if old, ok := t.node(req.ID); ok && old.Status == scheduler.NodeDraining {
		// An agent that restarts keeps its operator's drain.
		n.Status, n.StatusReason, n.StatusAt, n.DrainDeadline = old.Status, old.StatusReason, old.StatusAt, old.DrainDeadline
	}
	t.putNode(n)
	return epoch, nil
}

// applyNodeStatus changes a node's status; DOWN loses its live containers.
func (t *txn) applyNodeStatus(req *NodeStatusRequest) error {
	n, ok := t.node(req.ID)
	if !ok {
		return reject(ErrNotFound, "node %s is not registered", req.ID)
	}
	if n.Epoch != req.Epoch || n.Status == req.Status {
		return nil // about an older registration, or nothing to change
	}
	switch req.Status {
	case scheduler.NodeReady, scheduler.NodeDraining, scheduler.NodeDown:
	default:
		return reject(ErrInvalid, "node status %q is not READY, DRAINING or DOWN", req.Status)
	}
	if req.Status == scheduler.NodeDown {
		for _, c := range t.liveOnNode(req.ID) {
			t.completeContainer(c, scheduler.ReasonLost, nil, "node "+req.ID+" is down: "+req.Reason, req.Now)
		}
		n, _ = t.node(req.ID) // accounting changed
	}
	n = n.Copy()
	n.Status = req.Status
	n.StatusReason = req.Reason
	n.StatusAt = req.Now
	if req.Status != scheduler.NodeDraining {
		n.DrainDeadline = 0
	}
	t.putNode(n)
	return nil
}
