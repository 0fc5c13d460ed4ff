package agent

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/weft-sched/weft/internal/containerinit"
	"github.com/weft-sched/weft/internal/testutil"
	"github.com/weft-sched/weft/rpc"
	"github.com/weft-sched/weft/scheduler"
	"github.com/weft-sched/weft/server"
)

// amWorld is an in-process cluster running one app whose AM container
// holds a process that only writes down its AM token and sleeps: the test
// speaks the AM protocol in its place, with its identity (the token the
// agent launched it with), through the AMRMProxy of the AM's node.
type amWorld struct {
	t      testing.TB
	srv    *server.Server
	agents []*Agent
	c      *rpc.Client
	app    string
	amID   string // the AM container
	home   *Agent // the agent running the AM container
	am     *rpc.AMClient
	tokens string        // where stand-in AMs write their tokens
	pki    *testutil.PKI // TLS on when set
}

func startAMWorld(t testing.TB, n int, shape func(*Config)) *amWorld {
	t.Helper()
	return startAMWorldTLS(t, n, nil, shape)
}

// startAMWorldTLS is startAMWorld with mutual TLS on when pki is not nil;
// the test's AM clients then hold the CA and no certificate, as AMs do.
func startAMWorldTLS(t testing.TB, n int, pki *testutil.PKI, shape func(*Config)) *amWorld {
	t.Helper()
	dir := t.TempDir()
	standIn := writeStandInAM(t, dir)
	srv, agents, c := clusterTLS(t, n, pki, func(cfg *Config) {
		cfg.Executable = standIn
		if shape != nil {
			shape(cfg)
		}
	})
	w := &amWorld{t: t, srv: srv, agents: agents, c: c, tokens: dir, pki: pki}
	w.app, w.amID, w.home, w.am = w.submitStandIn()
	return w
}

// writeStandInAM writes, in dir, an executable that stands in for an AM:
// it writes its AM token to dir/token-APP and sleeps, so that a test can
// speak the AM protocol with its identity. As the agent's executable, it
// also starts containers: it hands `container-init` to the weft binary.
func writeStandInAM(t testing.TB, dir string) string {
	t.Helper()
	standIn := filepath.Join(dir, "stand-in-am")
	script := "#!/bin/sh\n[ \"$1\" = " + containerinit.Command + " ] && exec " + weftBin + " \"$@\"\ncat \"$WEFT_SECRETS_DIR/am-token\" > \"" + dir + "/token-$WEFT_APP_ID.tmp\"\n" +
		"mv \"" + dir + "/token-$WEFT_APP_ID.tmp\" \"" + dir + "/token-$WEFT_APP_ID\"\nexec sleep 600\n"
	if err := os.WriteFile(standIn, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	return standIn
}

// submitStandIn submits an app whose AM is a stand-in, waits for the AM to
// run, and returns the app, its AM container, the AM's agent and a
// registered AM client with the AM's token.
func (w *amWorld) submitStandIn() (app, amID string, home *Agent, am *rpc.AMClient) {
	w.t.Helper()
	var sub rpc.AppSubmitResponse
	spec := scheduler.AppSpec{User: "test", DShell: scheduler.DShell{NumContainers: 1, Command: []string{"true"}}}
	if err := w.c.Call(context.Background(), "App.Submit", &rpc.AppSubmitRequest{Spec: spec}, &sub); err != nil {
		w.t.Fatal(err)
	}
	app = sub.AppID
	testutil.WaitFor(w.t, 15*time.Second, func() bool {
		for _, ci := range w.appContainers(app) {
			if ci.IsAM && ci.State == "RUNNING" {
				amID, home = ci.ID, w.agent(ci.NodeID)
				return true
			}
		}
		return false
	})
	var token []byte
	testutil.WaitFor(w.t, 15*time.Second, func() bool {
		var err error
		token, err = os.ReadFile(filepath.Join(w.tokens, "token-"+app))
		return err == nil
	})
	if w.pki != nil {
		am = rpc.NewAMClientTLS(app, 1, strings.TrimSpace(string(token)), home.RPCAddr(), w.pki.Anonymous())
	} else {
		am = rpc.NewAMClient(app, 1, strings.TrimSpace(string(token)), home.RPCAddr())
	}
	w.t.Cleanup(am.Close)
	if _, err := am.Register(context.Background()); err != nil {
		w.t.Fatal(err)
	}
	return app, amID, home, am
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
func (w *amWorld) containers() []rpc.ContainerInfo { return w.appContainers(w.app) }

func (w *amWorld) appContainers(app string) []rpc.ContainerInfo {
	var list rpc.ContainerListResponse
	if err := w.c.Call(context.Background(), "Container.List", &rpc.ContainerListRequest{AppID: app}, &list); err != nil {
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
