package scheduler

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
}

// Copy returns a copy of n that may be modified.
func (n *Node) Copy() *Node {
	c := *n
	return &c
}

// FreeGuaranteed returns what a guaranteed placement may still use.
func (n *Node) FreeGuaranteed() Resources { return n.Capacity.Sub(n.AllocatedGuaranteed) }
