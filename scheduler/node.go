package scheduler

import "fmt"

// NodeStatus is an agent node's state (SPEC §12).
type NodeStatus string

// Node states.
const (
	NodeReady    NodeStatus = "READY"
	NodeDraining NodeStatus = "DRAINING"
	NodeDown     NodeStatus = "DOWN"
)

// Node is an agent as the servers know it.
type Node struct {
	ID       string     `codec:"id"`
	Address  string     `codec:"address"` // the agent's RPC address
	Rack     string     `codec:"rack"`
	Capacity Resources  `codec:"capacity"`
	Status   NodeStatus `codec:"status"`
	// Epoch rises at each registration; IDs an agent mints embed it.
	Epoch        uint64 `codec:"epoch"`
	RegisteredAt int64  `codec:"registered_at"`
	StatusReason string `codec:"status_reason"`
	// StatusAt is when the status last changed (Unix ns): garbage
	// collection removes a node DOWN since long before (SPEC §20).
	StatusAt int64 `codec:"status_at"`
	// DrainDeadline is when a DRAINING node's remaining containers are
	// killed (Unix ns); 0 unless the node is DRAINING.
	DrainDeadline int64 `codec:"drain_deadline"`
	// SecretHash is the SHA-256 of the node secret its agent registered
	// with (SPEC §15); empty for a node that has none yet. Heartbeats,
	// deregistration and re-registration of the node must present the
	// secret. It is never shown to users.
	SecretHash []byte `codec:"secret_hash,omitempty"`
	// MintKey is the public half of the node's own Ed25519 key, which its
	// AMRMProxy signs opportunistic container tokens with; the servers
	// certify it in the node's registration and heartbeat answers. Empty
	// for a node registered before nodes had keys: it mints nothing.
	MintKey []byte `codec:"mint_key,omitempty"`
	// AllocatedGuaranteed is what live guaranteed containers hold on the
	// node; AllocatedOpportunistic what running opportunistic ones use
	// (queued ones hold nothing). The FSM keeps both, and the counts.
	AllocatedGuaranteed    Resources `codec:"allocated_guaranteed"`
	AllocatedOpportunistic Resources `codec:"allocated_opportunistic"`
	RunningGuaranteed      int       `codec:"running_guaranteed"`
	RunningOpportunistic   int       `codec:"running_opportunistic"`
	// Queued counts opportunistic containers waiting in the node's queue,
	// as its agent last reported them.
	Queued int `codec:"queued"`
	// Reservation is the container of a capacity queue the node is held
	// for (reservation.go): no other app's guaranteed container is placed
	// on it meanwhile. nil: none.
	Reservation *Reservation `codec:"reservation,omitempty"`
}

// Copy returns a copy of n that may be modified.
func (n *Node) Copy() *Node {
	c := *n
	return &c
}

// FreeGuaranteed returns what a guaranteed placement may still use.
func (n *Node) FreeGuaranteed() Resources { return n.Capacity.Sub(n.AllocatedGuaranteed) }

// MaxNodeIDLength bounds a node ID.
const MaxNodeIDLength = 128

// ValidateNodeID checks a node ID: 1 to MaxNodeIDLength letters, digits,
// '.', '-' and '_', neither "." nor ".." (it names directories and appears
// in container IDs; see ValidateID).
func ValidateNodeID(id string) error {
	if id == "" || len(id) > MaxNodeIDLength {
		return fmt.Errorf("node id %.64q must be 1 to %d characters", id, MaxNodeIDLength)
	}
	if id == "." || id == ".." {
		return fmt.Errorf("node id %q is not an ID", id)
	}
	for _, c := range id {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '.' || c == '-' || c == '_') {
			return fmt.Errorf("node id %q: use letters, digits, '.', '-' and '_'", id)
		}
	}
	return nil
}

// ValidateNodeCapacity checks what a node offers: valid resource names, no
// negative amount, and some memory and vcores.
func ValidateNodeCapacity(r Resources) error {
	if err := r.Validate(); err != nil {
		return fmt.Errorf("capacity: %w", err)
	}
	if r.MemoryMB <= 0 || r.Vcores <= 0 {
		return fmt.Errorf("capacity: memory_mb and vcores must be positive (got %s)", r)
	}
	return nil
}
