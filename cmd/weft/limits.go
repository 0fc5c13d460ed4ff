package main

import (
	"github.com/weft-sched/weft/internal/config"
	"github.com/weft-sched/weft/rpc"
)

// rpcLimits is a config file's limits block (defaults applied) as the RPC
// listener takes it; what the block does not set (how fast a refused
// client is read) keeps rpc's defaults.
func rpcLimits(l *config.Limits) rpc.Limits {
	r := l.Resolve()
	return rpc.Limits{
		MaxConnsPerClient:      r.MaxConnsPerClient,
		MaxHandshakesPerClient: r.MaxHandshakesPerClient,
		HandshakeTimeout:       r.HandshakeTimeout,
		IdleTimeout:            r.IdleTimeout,
		MaxStreamsPerConn:      r.MaxStreamsPerConn,
		RequestMemory:          r.RequestMemory,
		RequestMemoryPerClient: r.RequestMemoryPerClient,
		RequestMemoryPerConn:   r.RequestMemoryPerConn,
	}.WithDefaults()
}
