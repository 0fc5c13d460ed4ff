package main

import (
	"testing"
	"time"

	"github.com/weft-sched/weft/internal/config"
	"github.com/weft-sched/weft/rpc"
)

func TestLimitsBlockReachesTheListener(t *testing.T) {
	// No block: the config package's defaults are the listener's.
	if got, want := rpcLimits(nil), rpc.DefaultLimits(); got != want {
		t.Fatalf("defaults: config gives %+v, rpc has %+v", got, want)
	}
	got := rpcLimits(&config.Limits{RPCMaxConnsPerClient: 7, RPCMaxHandshakesPerClient: 3, RPCHandshakeTimeout: "2s", RPCIdleTimeout: "1m",
		RPCMaxStreamsPerConn: 9, RPCRequestMemoryMB: 100, RPCRequestMemoryPerClientMB: 20, RPCRequestMemoryPerConnMB: 10})
	want := rpc.Limits{MaxConnsPerClient: 7, MaxHandshakesPerClient: 3, HandshakeTimeout: 2 * time.Second, IdleTimeout: time.Minute,
		MaxStreamsPerConn: 9, RequestMemory: 100 << 20, RequestMemoryPerClient: 20 << 20, RequestMemoryPerConn: 10 << 20}.WithDefaults()
	if got != want {
		t.Fatalf("limits block: %+v, want %+v", got, want)
	}
}
