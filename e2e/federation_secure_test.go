package e2e

import (
	"fmt"
	"net"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"
)

// TestSecureFederation runs a federation closed as SPEC §15 asks — mutual
// TLS, gossip keys and ACLs on routers and servers alike — with real
// processes: one router and two sub-clusters of one server and one agent.
// The ACLs bootstrapped through the router exist, with the same secret,
// in both sub-clusters; the routers' own methods refuse an unknown token
// and take the management one; an app submitted through the router runs
// and its logs are read through it.
func TestSecureFederation(t *testing.T) {
	sec := newSecurity(t)
	if _, errOut, code := cli(t, "tls", "cert", "create", "-router", "-dir", sec.pki); code != 0 {
		t.Fatalf("tls cert create -router: %s", errOut)
	}
	ip := "127.0.3.1"
	rpc, serf := freePort(t, ip), freePort(t, ip)
	router := net.JoinHostPort(ip, strconv.Itoa(rpc))
	startProc(t, "r1", "router", "-node-id", "r1", "-data-dir", filepath.Join(t.TempDir(), "r1"), "-bind", ip,
		"-rpc-port", strconv.Itoa(rpc), "-serf-port", strconv.Itoa(serf), "-bootstrap-expect", "1",
		"-config", sec.config("router", "r1"))
	servers := map[string]*proc{}
	addrs := map[string]string{}
	for i := 1; i <= 2; i++ {
		id := fmt.Sprint("sc", i)
		sip, aip := fmt.Sprintf("127.0.3.%d", 10+i), fmt.Sprintf("127.0.3.%d", 20+i)
		srpc, sserf := freePort(t, sip), freePort(t, sip)
		addrs[id] = net.JoinHostPort(sip, strconv.Itoa(srpc))
		servers[id] = startProc(t, id+"-s1", "server", "-node-id", id+"-s1", "-data-dir", filepath.Join(t.TempDir(), id), "-bind", sip,
			"-rpc-port", strconv.Itoa(srpc), "-serf-port", strconv.Itoa(sserf), "-bootstrap-expect", "1",
			"-subcluster-id", id, "-router", router, "-subcluster-heartbeat", "500ms", "-config", sec.config("server", id+"-s1"))
		arpc, aserf := freePort(t, aip), freePort(t, aip)
		startProc(t, id+"-a1", "agent", "-node-id", id+"-a1", "-data-dir", filepath.Join(t.TempDir(), id+"-a1"), "-bind", aip,
			"-rpc-port", strconv.Itoa(arpc), "-serf-port", strconv.Itoa(aserf), "-join", net.JoinHostPort(sip, strconv.Itoa(sserf)),
			"-resources", "memory_mb=2048,vcores=4", "-allow-root", "-config", sec.config("agent", id+"-a1"))
	}
	// Every sub-cluster known at the router before the ACLs are made: a
	// change through a router reaches the sub-clusters it knows. They are
	// NEW, with no node: their agents register only once introduced with
	// a join token, which needs a token to make.
	for id, p := range servers {
		waitFor(t, 60*time.Second, id+" known at the router", func() error {
			b, err := os.ReadFile(p.log)
			if err == nil && !regexp.MustCompile(`hold this sub-cluster: .*subcluster=`+id+` state=(NEW|RUNNING)`).Match(b) {
				err = fmt.Errorf("not yet")
			}
			return err
		})
	}

	// Before any token: the routers' own methods are refused.
	if _, errOut, code := cli(t, "federation", "subclusters", "-address", router); code != 1 || !strings.Contains(errOut, "permission denied") {
		t.Fatalf("federation subclusters without a token: exit %d, %q", code, errOut)
	}
	sec.bootstrap(router)
	for id, addr := range addrs {
		sec.join(addr, id+"-a1") // each sub-cluster introduces its own agent
	}
	for id, addr := range addrs {
		if out, errOut, code := cli(t, "acl", "token", "self", "-address", addr); code != 0 || !strings.Contains(out, "bootstrap") {
			t.Fatalf("the token bootstrapped through the router, at %s: exit %d\n%s%s", id, code, out, errOut)
		}
	}
	if _, errOut, code := cli(t, "federation", "subclusters", "-address", router, "-token", "00000000-0000-4000-8000-000000000000"); code != 1 || !strings.Contains(errOut, "permission denied") {
		t.Fatalf("federation subclusters with an unknown token: exit %d, %q", code, errOut)
	}
	var rows []subclusterRow
	if err := cliJSON(t, &rows, "federation", "subclusters", "-address", router); err != nil || len(rows) != 2 {
		t.Fatalf("federation subclusters with the management token: %+v, %v", rows, err)
	}

	out, errOut, code := cli(t, "app", "submit", "-address", router, "-num-containers", "2", "-wait", "--", "sh", "-c", "echo secure hello")
	if code != 0 {
		t.Fatalf("app submit through the secure router: exit %d\n%s%s", code, out, errOut)
	}
	app := strings.Fields(out)[1] // "Submitted app-f1 to root.default"
	if out, errOut, code := cli(t, "app", "logs", app, "-address", router); code != 0 || strings.Count(out, "secure hello") != 2 {
		t.Fatalf("app logs through the secure router: exit %d\n%s%s", code, out, errOut)
	}

	// An app spanning both sub-clusters: its AMRMProxy reaches the router
	// and the other sub-cluster's servers with its agent certificate, and
	// the AM the other's agent with the CA alone.
	policy := filepath.Join(t.TempDir(), "fed.hcl")
	if err := os.WriteFile(policy, []byte(`queue "root.default" {
  router    = "weighted"
  amrmproxy = "broadcast"
  weights   = { sc1 = 1, sc2 = 1 }
}
`), 0o644); err != nil {
		t.Fatal(err)
	}
	if out, errOut, code := cli(t, "federation", "policy", "apply", policy, "-address", router); code != 0 {
		t.Fatalf("policy apply: exit %d\n%s%s", code, out, errOut)
	}
	out, errOut, code = cli(t, "app", "submit", "-address", router, "-num-containers", "6", "-wait", "--", "sh", "-c", "echo spanning hello")
	if code != 0 {
		t.Fatalf("a spanning app through the secure router: exit %d\n%s%s", code, out, errOut)
	}
	app = strings.Fields(out)[1]
	var st spanStatus
	if err := cliJSON(t, &st, "app", "status", app, "-address", router); err != nil {
		t.Fatal(err)
	}
	if st.State != "FINISHED" || len(st.Spans) != 2 || st.Spans[0].Containers.Completed == 0 || st.Spans[1].Containers.Completed == 0 {
		t.Fatalf("a broadcast app over two secure sub-clusters: %+v, want it FINISHED with containers in each", st)
	}
	if out, errOut, code := cli(t, "app", "logs", app, "-address", router); code != 0 || strings.Count(out, "spanning hello") != 6 {
		t.Fatalf("app logs of the spanning app: exit %d\n%s%s", code, out, errOut)
	}
}
