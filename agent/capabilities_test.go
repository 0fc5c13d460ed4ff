package agent

import (
	"testing"

	"github.com/hashicorp/go-hclog"
	wrpc "github.com/weft-sched/weft/rpc"
)

// wantCapabilities is the capability of every method an agent serves
// (SPEC §15): the AM protocol and container management need a workload
// token, which the handlers verify; a node's load is for other agents; its
// gossip keyring is the servers' to list and change. A
// method added without an entry here fails this test.
var wantCapabilities = map[string]wrpc.Capability{
	"AM.Register":       wrpc.CapWorkload,
	"AM.Allocate":       wrpc.CapWorkload,
	"AM.Finish":         wrpc.CapWorkload,
	"Container.Start":   wrpc.CapWorkload,
	"Container.Stop":    wrpc.CapWorkload,
	"Container.Promote": wrpc.CapWorkload,
	"Container.Status":  wrpc.CapWorkload,
	"Container.Logs":    wrpc.CapWorkload,
	"Container.Output":  wrpc.CapWorkload,
	"Agent.Load":        wrpc.CapAgent,
	"Gossip.Keyring":    wrpc.CapServer,
}

func TestEveryMethodDeclaresItsCapability(t *testing.T) {
	a := &Agent{logger: hclog.NewNullLogger()}
	a.proxy = &amrmProxy{a: a}
	got := a.registerEndpoints().Capabilities()
	for name, c := range got {
		if want, ok := wantCapabilities[name]; !ok {
			t.Errorf("method %s (capability %s) is not in wantCapabilities: decide who may call it and add it", name, c)
		} else if c != want {
			t.Errorf("method %s has capability %s, want %s", name, c, want)
		}
	}
	for name := range wantCapabilities {
		if _, ok := got[name]; !ok {
			t.Errorf("method %s is expected but not registered", name)
		}
	}
}
