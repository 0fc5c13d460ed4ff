package server

import (
	"context"

	"github.com/weft-sched/weft/internal/inflight"
	"github.com/weft-sched/weft/internal/raftnode"
	wrpc "github.com/weft-sched/weft/rpc"
)

// BlockingLimits bound the blocking queries (reads with a min_query_index)
// that clients hold waiting on one server at once. A blocking query past a
// bound is answered rate_limited at once, before anything is read or
// forwarded for it: a flood of them costs the server a refusal each, never
// a waiting goroutine. Servers, agents and routers calling with their
// certificates, and calls a follower forwards (counted where they
// arrived), are not counted. Zero fields take DefaultBlockingLimits.
type BlockingLimits struct {
	// PerClient bounds the blocking queries of one client address (all
	// its connections, and HTTP requests from it, together).
	PerClient int
	// PerToken bounds the blocking queries made with one ACL token,
	// from any address. The anonymous caller has no token: only its
	// addresses bound it.
	PerToken int
	// Total bounds every client's together.
	Total int
}

// DefaultBlockingLimits are far above what a person's terminals and
// browser tabs hold (a page of the web UI watches a few reads at once):
// they bound what one client, or one stolen token, can make a server hold.
var DefaultBlockingLimits = BlockingLimits{PerClient: 256, PerToken: 512, Total: 4096}

func (l BlockingLimits) withDefaults() BlockingLimits {
	d := DefaultBlockingLimits
	if l.PerClient <= 0 {
		l.PerClient = d.PerClient
	}
	if l.PerToken <= 0 {
		l.PerToken = d.PerToken
	}
	if l.Total <= 0 {
		l.Total = d.Total
	}
	return l
}

// blockingCounts counts the blocking queries waiting on this server.
type blockingCounts struct {
	byClient *inflight.Counter // per client address, and in all
	byToken  *inflight.Counter // per token accessor
}

func newBlockingCounts(l BlockingLimits) *blockingCounts {
	l = l.withDefaults()
	return &blockingCounts{
		byClient: inflight.New(inflight.Limits{Total: l.Total, PerKey: l.PerClient}),
		byToken:  inflight.New(inflight.Limits{PerKey: l.PerToken}),
	}
}

// admitBlocking counts a client's blocking query, from its address and
// with its token, for as long as its call runs, or refuses it rate_limited
// at once. The RPC server ends a call's context when its handler returns
// (and when its connection closes), which gives the places back. Other
// calls pass as they are.
func (s *Server) admitBlocking(ctx context.Context, method string, id *caller, args any) (context.Context, error) {
	h, ok := args.(interface{ Header() *wrpc.RequestHeader })
	if !ok || h.Header().MinQueryIndex == 0 {
		return ctx, nil
	}
	client, ok := raftnode.ClientOf(ctx)
	if !ok {
		return ctx, nil
	}
	var token string
	if id.token != nil {
		token = id.token.AccessorID
	}
	c := s.blocking
	if !c.byClient.Acquire(client) {
		limits := c.byClient.Limits()
		if total, _ := c.byClient.InFlight(client); total >= limits.Total {
			return ctx, wrpc.Errorf(wrpc.CodeRateLimited, "%s: %w: %d blocking queries wait on this server, the most it holds; retry shortly",
				method, wrpc.ErrRateLimited, limits.Total)
		}
		return ctx, wrpc.Errorf(wrpc.CodeRateLimited, "%s: %w: %d blocking queries from %s wait on this server, the most one address may hold; retry when one has answered",
			method, wrpc.ErrRateLimited, limits.PerKey, client)
	}
	if !c.byToken.Acquire(token) {
		c.byClient.Release(client)
		return ctx, wrpc.Errorf(wrpc.CodeRateLimited, "%s: %w: %d blocking queries made with %s wait on this server, the most one token may hold; retry when one has answered",
			method, wrpc.ErrRateLimited, c.byToken.Limits().PerKey, id.describe())
	}
	context.AfterFunc(ctx, func() {
		c.byToken.Release(token)
		c.byClient.Release(client)
	})
	return ctx, nil
}

// blockingWaiting returns how many blocking queries of clients this server
// holds, and the most it ever held at once.
func (s *Server) blockingWaiting() (now, peak int) {
	now, _ = s.blocking.byClient.InFlight("")
	return now, s.blocking.byClient.Peak()
}
