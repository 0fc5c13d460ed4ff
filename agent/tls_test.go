package agent

import (
	"context"
	"errors"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/weft-sched/weft/internal/testutil"
	"github.com/weft-sched/weft/internal/tlsutil"
	"github.com/weft-sched/weft/rpc"
	"github.com/weft-sched/weft/scheduler"
)

// TestAppRunsToCompletionOverTLS runs a real dshell AM in a cluster with
// mutual TLS on: the agents register with agent certificates, the AM
// (which has no certificate) reaches its AMRMProxy and the other agents
// over TLS with the CA its agent handed it, and the server relays logs
// from the agents with its server certificate. Every container gets its
// node's CA file, which a task dials agents with (a reduce fetching map
// output).
func TestAppRunsToCompletionOverTLS(t *testing.T) {
	pki := testutil.NewPKI(t)
	_, agents, c := clusterTLS(t, 2, pki, nil)
	var sub rpc.AppSubmitResponse
	spec := scheduler.AppSpec{User: "test", DShell: scheduler.DShell{NumContainers: 3, Command: []string{"sh", "-c", "echo ok $WEFT_CACERT"}}}
	if err := c.Call(context.Background(), "App.Submit", &rpc.AppSubmitRequest{Spec: spec}, &sub); err != nil {
		t.Fatal(err)
	}
	app := waitApp(t, c, sub.AppID)
	if app.State != "FINISHED" {
		t.Fatalf("app ended %+v", app)
	}
	var list rpc.ContainerListResponse
	if err := c.Call(context.Background(), "Container.List", &rpc.ContainerListRequest{AppID: sub.AppID}, &list); err != nil {
		t.Fatal(err)
	}
	tasks := 0
	for _, ci := range list.Containers {
		if ci.IsAM {
			continue
		}
		tasks++
		var logs rpc.ContainerLogsResponse
		if err := c.Call(context.Background(), "Container.Logs", &rpc.ContainerLogsRequest{ID: ci.ID}, &logs); err != nil {
			t.Fatal(err)
		}
		if want := "ok " + agents[0].config.TLS.CAFile() + "\n"; string(logs.Data) != want {
			t.Fatalf("logs of %s = %q, want %q", ci.ID, logs.Data, want)
		}
	}
	if tasks != 3 {
		t.Fatalf("%d tasks ran, want 3", tasks)
	}
	for _, a := range agents {
		if a.Epoch() == 0 {
			t.Fatalf("agent %s is not registered", a.NodeID())
		}
	}
}

func TestAgentPortOverTLS(t *testing.T) {
	pki := testutil.NewPKI(t)
	_, agents, _ := clusterTLS(t, 2, pki, nil)
	addr := agents[0].RPCAddr()
	call := func(tc *tlsutil.Configurator, method string, args, reply any) error {
		p := rpc.NewTLSPool(nil, tc, rpc.RoleAgent)
		defer p.Shutdown()
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		return p.Call(ctx, addr, method, args, reply)
	}
	// Another agent (or a server) may read the node's load.
	var load rpc.AgentLoadResponse
	if err := call(pki.Configurator(rpc.RoleAgent), "Agent.Load", &rpc.RequestHeader{}, &load); err != nil || load.NodeID != agents[0].NodeID() {
		t.Fatalf("Agent.Load with an agent certificate: %v, %+v", err, load)
	}
	denied := []struct {
		tc     *tlsutil.Configurator
		method string
		args   any
	}{
		{pki.Configurator(rpc.RoleClient), "Agent.Load", &rpc.RequestHeader{}},
		{pki.Configurator(rpc.RoleRouter), "Agent.Load", &rpc.RequestHeader{}},
		{pki.Anonymous(), "Agent.Load", &rpc.RequestHeader{}},
	}
	for _, d := range denied {
		var reply rpc.AgentLoadResponse
		if err := call(d.tc, d.method, d.args, &reply); !errors.Is(err, rpc.ErrPermissionDenied) {
			t.Fatalf("%s by a %q certificate: %v, want permission denied", d.method, d.tc.Role(), err)
		}
	}
	// A certificate of another CA does not get through at all.
	if err := call(testutil.NewPKI(t).Configurator(rpc.RoleAgent), "Agent.Load", &rpc.RequestHeader{}, &load); err == nil || rpc.IsServerError(err) {
		t.Fatalf("a certificate of another CA: %v", err)
	}
	// Plaintext is refused.
	conn, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	conn.SetDeadline(time.Now().Add(5 * time.Second))
	conn.Write([]byte{byte(rpc.ConnMultiplex)})
	if _, err := conn.Read(make([]byte, 8)); err == nil {
		t.Fatal("the agent answered a plaintext connection")
	} else if ne, ok := err.(net.Error); ok && ne.Timeout() {
		t.Fatal("the agent left a plaintext connection open")
	}
	p := rpc.NewPool(nil)
	defer p.Shutdown()
	if err := p.Call(context.Background(), addr, "Agent.Load", &rpc.RequestHeader{}, &load); err == nil {
		t.Fatal("a plaintext call was answered")
	}
}

func TestAgentRefusesANonAgentCertificate(t *testing.T) {
	pki := testutil.NewPKI(t)
	_, err := New(&Config{NodeID: "n1", DataDir: t.TempDir(), RPCPort: -1, SerfPort: -1, Join: []string{"127.0.0.1:1"},
		Executable: weftBin, TLS: pki.Configurator(rpc.RoleServer)})
	if err == nil || !strings.Contains(err.Error(), "needs a certificate of role agent") {
		t.Fatalf("an agent with a server certificate: %v", err)
	}
}
