package sim

import (
	"context"
	"fmt"

	wrpc "github.com/weft-sched/weft/rpc"
	"github.com/weft-sched/weft/scheduler"
)

// SetOpportunistic applies the default queue configuration with its
// opportunistic settings changed by set (the least-loaded list's length,
// ranking, windows, cap per Allocate): for servers the simulator started,
// whose configuration is the default. Servers given with -servers keep
// theirs.
func SetOpportunistic(ctx context.Context, servers []string, set func(*scheduler.OpportunisticConfig)) error {
	cfg := scheduler.DefaultQueueConfig()
	set(&cfg.Scheduler.Opportunistic)
	if errs := cfg.Validate(); len(errs) > 0 {
		return fmt.Errorf("sim: opportunistic settings: %v", errs[0])
	}
	c := wrpc.NewClient(servers, wrpc.NewPool(nil))
	defer c.Close()
	var resp wrpc.QueueApplyResponse
	if err := c.Call(ctx, "Queue.Apply", &wrpc.QueueApplyRequest{Config: cfg}, &resp); err != nil {
		return fmt.Errorf("sim: set the opportunistic settings: %w", err)
	}
	return nil
}
