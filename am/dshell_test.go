package am

import (
	"reflect"
	"testing"

	"github.com/hashicorp/go-msgpack/v2/codec"
	wrpc "github.com/weft-sched/weft/rpc"
	"github.com/weft-sched/weft/scheduler"
)

// The task ask carries the locality of the spec the AM registered with,
// taken off the wire as the AM gets it: relaxed unless the spec says
// relax_locality = false, and anywhere when it names nothing.
func TestTaskAskCarriesTheSpecsLocality(t *testing.T) {
	no := false
	res := scheduler.Resources{MemoryMB: 128, Vcores: 1}
	for _, tc := range []struct {
		name  string
		shell scheduler.DShell
		want  scheduler.Locality
	}{
		{"anywhere", scheduler.DShell{}, scheduler.Locality{Relax: true}},
		{"nodes, relaxed by default", scheduler.DShell{Nodes: []string{"sc1-n1", "sc2-n4"}},
			scheduler.Locality{Nodes: []string{"sc1-n1", "sc2-n4"}, Relax: true}},
		{"nodes and racks, strict", scheduler.DShell{Nodes: []string{"n1"}, Racks: []string{"/r2"}, RelaxLocality: &no},
			scheduler.Locality{Nodes: []string{"n1"}, Racks: []string{"/r2"}}},
	} {
		tc.shell.NumContainers, tc.shell.Command, tc.shell.Resources = 3, []string{"true"}, res
		tc.shell.ExecutionType, tc.shell.EnforceExecutionType = scheduler.Opportunistic, true
		var b []byte
		if err := codec.NewEncoderBytes(&b, wrpc.MsgpackHandle).Encode(&wrpc.AMRegisterResponse{Spec: scheduler.AppSpec{DShell: tc.shell}}); err != nil {
			t.Fatal(err)
		}
		var reg wrpc.AMRegisterResponse
		if err := codec.NewDecoderBytes(b, wrpc.MsgpackHandle).Decode(&reg); err != nil {
			t.Fatal(err)
		}
		ask := taskAsk(reg.Spec.DShell, 2)
		if !reflect.DeepEqual(ask.Locality, tc.want) {
			t.Errorf("%s: ask locality %+v, want %+v", tc.name, ask.Locality, tc.want)
		}
		// The rest of the ask is what it was before locality.
		if ask.AskID != dshellAskID || ask.Count != 2 || ask.Resources.String() != res.String() ||
			ask.ExecutionType != scheduler.Opportunistic || !ask.EnforceExecutionType {
			t.Errorf("%s: ask %+v", tc.name, ask)
		}
		if err := ask.Validate(); err != nil {
			t.Errorf("%s: the servers would refuse the ask: %v", tc.name, err)
		}
	}
}
