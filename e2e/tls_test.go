package e2e

import (
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestMutualTLSEndToEnd builds a certificate set with `weft tls`, runs a
// server and an agent from config files with their tls blocks, and drives
// them with a client certificate: an app runs (its AM reaches its agent
// over TLS with the CA the agent hands it), a client without a certificate
// is refused, and SIGHUP reloads the server's certificates.
func TestMutualTLSEndToEnd(t *testing.T) {
	pki := t.TempDir()
	if _, errOut, code := cli(t, "tls", "ca", "create", "-dir", pki); code != 0 {
		t.Fatalf("tls ca create: %s", errOut)
	}
	for _, role := range []string{"-server", "-agent", "-client"} {
		if _, errOut, code := cli(t, "tls", "cert", "create", role, "-dir", pki); code != 0 {
			t.Fatalf("tls cert create %s: %s", role, errOut)
		}
	}
	file := func(name string) string { return filepath.Join(pki, name) }
	tlsBlock := func(role string) string {
		return fmt.Sprintf("tls {\n  ca_file = %q\n  cert_file = %q\n  key_file = %q\n}\n",
			file("weft-agent-ca.pem"), file("global-"+role+"-weft.pem"), file("global-"+role+"-weft-key.pem"))
	}
	writeConfig := func(name, body string) string {
		path := filepath.Join(t.TempDir(), name)
		if err := os.WriteFile(path, []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
		return path
	}

	rpcPort, serfPort := freePort(t, "127.0.0.1"), freePort(t, "127.0.0.1")
	srv := startProc(t, "s1", "server", "-node-id", "s1", "-data-dir", filepath.Join(t.TempDir(), "s1"), "-bind", "127.0.0.1",
		"-rpc-port", strconv.Itoa(rpcPort), "-serf-port", strconv.Itoa(serfPort), "-bootstrap-expect", "1",
		"-config", writeConfig("server.hcl", tlsBlock("server")))
	agentRPC, agentSerf := freePort(t, "127.0.0.2"), freePort(t, "127.0.0.2")
	startProc(t, "a1", "agent", "-node-id", "a1", "-data-dir", filepath.Join(t.TempDir(), "a1"), "-bind", "127.0.0.2",
		"-rpc-port", strconv.Itoa(agentRPC), "-serf-port", strconv.Itoa(agentSerf),
		"-join", net.JoinHostPort("127.0.0.1", strconv.Itoa(serfPort)), "-resources", "memory_mb=2048,vcores=4",
		"-allow-root", "-config", writeConfig("agent.hcl", tlsBlock("agent")))

	addr := net.JoinHostPort("127.0.0.1", strconv.Itoa(rpcPort))
	secure := []string{"-address", addr, "-ca-cert", file("weft-agent-ca.pem"),
		"-client-cert", file("global-client-weft.pem"), "-client-key", file("global-client-weft-key.pem")}
	waitFor(t, 30*time.Second, "the agent's node READY over TLS", func() error {
		var nodes []nodeInfo
		if err := cliJSON(t, &nodes, append([]string{"node", "list"}, secure...)...); err != nil {
			return err
		}
		if len(nodes) != 1 || nodes[0].Status != "READY" {
			return fmt.Errorf("nodes %+v", nodes)
		}
		return nil
	})

	var sub struct {
		AppID string `json:"app_id"`
	}
	if err := cliJSON(t, &sub, append(append([]string{"app", "submit", "-num-containers", "2"}, secure...), "--", "echo", "hello")...); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 60*time.Second, "the app to finish", func() error {
		var app appInfo
		if err := cliJSON(t, &app, append([]string{"app", "status", sub.AppID}, secure...)...); err != nil {
			return err
		}
		switch app.State {
		case "FINISHED":
			return nil
		case "FAILED", "KILLED":
			t.Fatalf("app %+v", app)
		}
		return fmt.Errorf("app is %s", app.State)
	})

	// Without a client certificate, or in plaintext, the server answers nothing.
	for _, args := range [][]string{
		{"node", "list", "-address", addr, "-ca-cert", file("weft-agent-ca.pem")},
		{"node", "list", "-address", addr},
	} {
		if _, errOut, code := cli(t, args...); code != 1 || !strings.Contains(errOut, "does it need TLS") {
			t.Fatalf("weft %s: exit %d, %q", strings.Join(args, " "), code, errOut)
		}
	}

	// SIGHUP reloads the certificates and the server goes on.
	if err := srv.cmd.Process.Signal(syscall.SIGHUP); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 10*time.Second, "the server to log the reload", func() error {
		b, _ := os.ReadFile(srv.log)
		if !strings.Contains(string(b), "TLS certificates reloaded") {
			return os.ErrNotExist
		}
		return nil
	})
	if _, errOut, code := cli(t, append([]string{"node", "list"}, secure...)...); code != 0 || !srv.running() {
		t.Fatalf("after SIGHUP: exit %d, %q, server running %v", code, errOut, srv.running())
	}
}
