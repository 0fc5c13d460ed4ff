package agent

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/weft-sched/weft/internal/testutil"
	"github.com/weft-sched/weft/rpc"
	"github.com/weft-sched/weft/scheduler"
	"github.com/weft-sched/weft/server"
)

// amWorld is an in-process cluster running one app whose AM container
// holds a process that only sleeps: the test speaks the AM protocol in its
// place, with its identity, through the AMRMProxy of the AM's node.
type amWorld struct {
	t      testing.TB
	srv    *server.Server
	agents []*Agent
	c      *rpc.Client
	app    string
	home   *Agent // the agent running the AM container
	am     *rpc.AMClient
}

func startAMWorld(t testing.TB, n int, shape func(*Config)) *amWorld {
	t.Helper()
	return startAMWorldTLS(t, n, nil, shape)
}

// startAMWorldTLS is startAMWorld with mutual TLS on when pki is not nil;
// the test's AM client then holds the CA and no certificate, as an AM does.
func startAMWorldTLS(t testing.TB, n int, pki *testutil.PKI, shape func(*Config)) *amWorld {
	t.Helper()
	standIn := filepath.Join(t.TempDir(), "stand-in-am")
	if err := os.WriteFile(standIn, []byte("#!/bin/sh\nexec sleep 600\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	srv, agents, c := clusterTLS(t, n, pki, func(cfg *Config) {
		cfg.Executable = standIn
		if shape != nil {
			shape(cfg)
		}
	})
	w := &amWorld{t: t, srv: srv, agents: agents, c: c}
	var sub rpc.AppSubmitResponse
	spec := scheduler.AppSpec{User: "test", DShell: scheduler.DShell{NumContainers: 1, Command: []string{"true"}}}
	if err := c.Call(context.Background(), "App.Submit", &rpc.AppSubmitRequest{Spec: spec}, &sub); err != nil {
		t.Fatal(err)
	}
	w.app = sub.AppID
	var token string
	testutil.WaitFor(t, 15*time.Second, func() bool {
		for _, ci := range w.containers() {
			if ci.IsAM && ci.State == "RUNNING" {
				token, w.home = ci.ID, w.agent(ci.NodeID)
				return true
			}
		}
		return false
	})
	if pki != nil {
		w.am = rpc.NewAMClientTLS(w.app, 1, token, w.home.RPCAddr(), pki.Anonymous())
	} else {
		w.am = rpc.NewAMClient(w.app, 1, token, w.home.RPCAddr())
	}
	t.Cleanup(w.am.Close)
	if _, err := w.am.Register(context.Background()); err != nil {
		t.Fatal(err)
	}
	return w
}

// waitList waits until the AM's agent holds a list of n nodes computed
// after the AM started: the AM's node shows its vcore in use.
func (w *amWorld) waitList(n int) {
	w.t.Helper()
	testutil.WaitFor(w.t, 15*time.Second, func() bool {
		list, _ := w.home.sched.snapshot()
		seen := false
		for _, e := range list {
			if e.NodeID == w.home.NodeID() && e.Free.Vcores == w.home.config.Resources.Vcores-1 {
				seen = true
			}
		}
		return len(list) == n && seen
	})
}

func (w *amWorld) agent(id string) *Agent {
	for _, a := range w.agents {
		if a.NodeID() == id {
			return a
		}
	}
	w.t.Fatalf("no agent %s", id)
	return nil
}

// containers lists the app's containers as the servers know them.
func (w *amWorld) containers() []rpc.ContainerInfo {
	var list rpc.ContainerListResponse
	if err := w.c.Call(context.Background(), "Container.List", &rpc.ContainerListRequest{AppID: w.app}, &list); err != nil {
		w.t.Fatal(err)
	}
	return list.Containers
}

func (w *amWorld) container(id string) (rpc.ContainerInfo, bool) {
	for _, ci := range w.containers() {
		if ci.ID == id {
			return ci, true
		}
	}
	return rpc.ContainerInfo{}, false
}

// allocate calls AM.Allocate through the proxy, blocking at most a second.
func (w *amWorld) allocate(req rpc.AMAllocateRequest) *rpc.AMAllocateResponse {
	w.t.Helper()
	resp, err := w.am.Allocate(context.Background(), req, time.Second)
	if err != nil {
		w.t.Fatal(err)
	}
	return resp
}

// start runs `sleep 600` in an allocated container on its node.
func (w *amWorld) start(ci rpc.ContainerInfo) *rpc.ContainerStartResponse {
	w.t.Helper()
	resp, err := w.am.StartContainer(context.Background(), ci, rpc.LaunchSpec{Command: []string{"sleep", "600"}})
	if err != nil {
		w.t.Fatal(err)
	}
	return resp
}

// setOpportunistic applies the default queue configuration with the given
// opportunistic settings.
func (w *amWorld) setOpportunistic(o scheduler.OpportunisticConfig) {
	w.t.Helper()
	cfg := scheduler.DefaultQueueConfig()
	cfg.Scheduler.Opportunistic = o
	var resp rpc.WriteResponse
	if err := w.c.Call(context.Background(), "Queue.Apply", &rpc.QueueApplyRequest{Config: cfg}, &resp); err != nil {
		w.t.Fatal(err)
	}
}

var oneCore = scheduler.Resources{MemoryMB: 256, Vcores: 1}

func oppAsk(id uint64, n int, enforce bool) scheduler.Ask {
	return scheduler.Ask{AskID: id, Count: n, Resources: oneCore, ExecutionType: scheduler.Opportunistic, EnforceExecutionType: enforce}
}
