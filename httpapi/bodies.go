package httpapi

import "github.com/weft-sched/weft/internal/config"

// Request body caps, one per route that reads a body: what the route
// carries at its realistic largest, far below the RPC transport's 8 MiB.
// The RPC methods these routes call (Queue.Apply, App.Submit, Node.Drain)
// take the same requests over msgpack, where the same caps belong.
const (
	// MaxQueueConfigBody caps PUT /v1/queues: a queue file of 1,000
	// queues with six settings each is 272 KB (config.MaxQueueConfigTokens
	// bounds what parsing one costs).
	MaxQueueConfigBody = 512 << 10
	// MaxAppSpecBody caps POST /v1/apps: a MapReduce job at the most
	// splits the scheduler takes (10,000), each with a path and three
	// nodes, is 1.9 MB as compact JSON and 2.8 MB indented.
	MaxAppSpecBody = 4 << 20
	// MaxDrainBody caps POST /v1/node/{id}/drain: {"deadline": "30m"}.
	MaxDrainBody = 1 << 10
)

// Costs of a body of n bytes: what reading and parsing it may allocate,
// reserved from Limits.BodyBudget before a byte of it is read.
func queueConfigCost(n int64) int64 { return config.QueueConfigBodyCost(n) }
func appSpecCost(n int64) int64     { return config.AppSpecBodyCost(n) }
func drainCost(n int64) int64       { return 16 * (n + 1) }
