package router

import (
	"testing"

	"github.com/weft-sched/weft/internal/testutil/rpcfuzz"
	wrpc "github.com/weft-sched/weft/rpc"
)

// Every request type a router decodes from the network is one the rpc
// fuzz targets decode arbitrary bytes as.
func TestEveryMethodsRequestTypeIsFuzzed(t *testing.T) {
	r := &Router{rpcServer: wrpc.NewServer(nil)}
	r.registerEndpoints()
	rpcfuzz.CheckRequestTypesFuzzed(t, r.rpcServer)
}
