package agent

import (
	"testing"

	"github.com/hashicorp/go-hclog"
	"github.com/weft-sched/weft/internal/testutil/rpcfuzz"
)

func TestEveryMethodsRequestTypeIsFuzzed(t *testing.T) {
	a := &Agent{logger: hclog.NewNullLogger()}
	rpcfuzz.CheckRequestTypesFuzzed(t, a.registerEndpoints())
}
