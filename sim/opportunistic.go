package sim

import (
	"context"
	"fmt"

	wrpc "github.com/weft-sched/weft/rpc"
	"github.com/weft-sched/weft/scheduler"
)

// SetNodesUsed applies the default queue configuration with
// opportunistic.nodes_used set to n (how many least-loaded nodes the
// leader's list holds, SPEC §10): for servers the simulator started, whose
// configuration is the default. Servers given with -servers keep theirs.
func SetNodesUsed(ctx context.Context, servers []string, n int) error {
	cfg := scheduler.DefaultQueueConfig()
	cfg.Scheduler.Opportunistic.NodesUsed = n
	c := wrpc.NewClient(servers, wrpc.NewPool(nil))
	defer c.Close()
	var resp wrpc.QueueApplyResponse
	if err := c.Call(ctx, "Queue.Apply", &wrpc.QueueApplyRequest{Config: cfg}, &resp); err != nil {
		return fmt.Errorf("sim: set opportunistic.nodes_used = %d: %w", n, err)
	}
	return nil
}
