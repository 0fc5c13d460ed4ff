package server

import (
	"testing"

	"github.com/weft-sched/weft/internal/testutil/rpcfuzz"
	wrpc "github.com/weft-sched/weft/rpc"
)

func TestEveryMethodsRequestTypeIsFuzzed(t *testing.T) {
	s := &Server{rpcServer: wrpc.NewServer(nil)}
	s.registerEndpoints()
	rpcfuzz.CheckRequestTypesFuzzed(t, s.rpcServer)
}
