package fedstate

// Bounds on the federation state, each enforced in Apply.
const (
	// MaxSubclusters is how many sub-clusters a federation holds.
	MaxSubclusters = 256
	// MaxQueueLoads is how many queues one heartbeat may report.
	MaxQueueLoads = 4096
	// MaxRacks is how many racks one heartbeat may report.
	MaxRacks = 1024
	// MaxServers is how many server addresses one heartbeat may report.
	MaxServers = 16
	// MaxPolicies is how many queue policies the federation holds.
	MaxPolicies = 4096
	// MaxAppHomes is how many app → home mappings are kept: past it the
	// oldest settled one (SUBMITTED or FAILED) goes, and with none to drop
	// a new submission is refused.
	MaxAppHomes = 250_000
	// MaxTries bounds the sub-clusters one submission tries.
	MaxTries = MaxSubclusters
	// MaxStringLen bounds any one string a command carries.
	MaxStringLen = 512
)
