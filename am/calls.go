package am

import (
	"context"
	"errors"
	"time"

	"github.com/hashicorp/go-hclog"
	wrpc "github.com/weft-sched/weft/rpc"
)

// allocate calls AM.Allocate until it is answered. A failure that may pass
// (a server failover behind the proxy, say) is tried again a second later;
// a stale attempt, or ctx ending, is returned.
func allocate(ctx context.Context, client *wrpc.AMClient, logger hclog.Logger, req wrpc.AMAllocateRequest, wait time.Duration) (*wrpc.AMAllocateResponse, error) {
	for {
		resp, err := client.Allocate(ctx, req, wait)
		switch {
		case err == nil:
			return resp, nil
		case errors.Is(err, wrpc.ErrStale) || ctx.Err() != nil:
			return nil, err
		}
		logger.Warn("allocate failed; retrying", "error", err)
		if !sleep(ctx, time.Second) {
			return nil, ctx.Err()
		}
	}
}

// finishApp calls AM.Finish, trying a retryable failure again up to five
// times, a second apart.
func finishApp(ctx context.Context, client *wrpc.AMClient, req wrpc.AMFinishRequest) error {
	for attempt := 0; ; attempt++ {
		err := client.FinishWith(ctx, req)
		if err == nil || attempt == 5 || !wrpc.IsRetryable(err) {
			return err
		}
		if !sleep(ctx, time.Second) {
			return ctx.Err()
		}
	}
}

// sleep waits d; it reports false if ctx ended first.
func sleep(ctx context.Context, d time.Duration) bool {
	select {
	case <-time.After(d):
		return true
	case <-ctx.Done():
		return false
	}
}
