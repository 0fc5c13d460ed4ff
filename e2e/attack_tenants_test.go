package e2e

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/weft-sched/weft/internal/tlsutil"
	wrpc "github.com/weft-sched/weft/rpc"
)

// tenants makes queues root.a and root.b and two tokens, alice (submit on
// root.a) and bob (submit on root.b), as the report's cluster had them.
func tenants(t *testing.T, w *world) (alice, bob string) {
	t.Helper()
	dir := t.TempDir()
	queues := filepath.Join(dir, "queues.hcl")
	if err := os.WriteFile(queues, []byte("queue \"root\" {\n  queue \"default\" {}\n  queue \"a\" {}\n  queue \"b\" {}\n}\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, stderr, code := cli(t, "queue", "apply", "-address", w.any(), queues); code != 0 {
		t.Fatalf("queue apply: %s", stderr)
	}
	token := func(name, queue string) string {
		rules := filepath.Join(dir, name+".hcl")
		if err := os.WriteFile(rules, []byte(fmt.Sprintf("queue %q { policy = \"submit\" }\n", queue)), 0o600); err != nil {
			t.Fatal(err)
		}
		if _, stderr, code := cli(t, "acl", "policy", "apply", "-address", w.any(), name, rules); code != 0 {
			t.Fatalf("acl policy apply %s: %s", name, stderr)
		}
		var tok struct {
			SecretID string `json:"secret_id"`
		}
		if err := cliJSON(t, &tok, "acl", "token", "create", "-address", w.any(), "-name", name, "-policy", name); err != nil || tok.SecretID == "" {
			t.Fatalf("acl token create %s: %v", name, err)
		}
		return tok.SecretID
	}
	return token("alice", "root.a"), token("bob", "root.b")
}

// reachableDir is a temporary directory other accounts may pass through
// (o+x), as an agent whose containers run as other uids needs its data
// directory to be.
func reachableDir(t *testing.T) string {
	t.Helper()
	dir, err := os.MkdirTemp("", "weft-e2e-tenants-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	return dir
}

// The report's cross-tenant attack, on a secure cluster set up as the
// README says (agents root, allow_root off): every container ran as
// nobody, so alice's container read bob's WEFT_AM_TOKEN from
// /proc/PID/environ and, with it, read his logs, ran her command inside
// his app and stopped his container. Now each app runs as a uid of its
// own and its token is a file only that uid reads: alice's container
// finds bob's token neither in any process's environment nor in his
// secrets, and bob's token, leaked, is refused to any process but his
// app's own (here the test's, root's); bob's app finishes untouched.
func TestTenantsCannotReachEachOther(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Fatal("this test runs containers as other uids: run it as root (CI does)")
	}
	data := reachableDir(t)
	w := startWorldOn(t, startQuorum(t), 1, map[string][]string{
		"a1": {"-data-dir", filepath.Join(data, "a1"), "-allow-root=false"},
	})
	alice, bob := tenants(t, w)

	var sub struct {
		AppID string `json:"app_id"`
	}
	if err := cliJSON(t, &sub, "app", "submit", "-token", bob, "-queue", "b", "-address", w.any(), "--", "sh", "-c", "until [ -e release ]; do sleep 0.1; done"); err != nil {
		t.Fatal(err)
	}
	bobsApp := sub.AppID
	var bobsAM, bobsTask containerInfo
	waitFor(t, 60*time.Second, "bob's task running", func() error {
		for _, c := range w.containers(bobsApp) {
			if c.IsAM {
				bobsAM = c
			} else if c.State == "RUNNING" {
				bobsTask = c
			}
		}
		if bobsTask.ID == "" {
			return fmt.Errorf("containers %+v", w.containers(bobsApp))
		}
		return nil
	})
	bobsDir := filepath.Join(data, "a1", "containers", bobsApp, bobsAM.ID)
	tokenFile := filepath.Join(bobsDir, "secrets", wrpc.SecretAMToken)
	bobsToken, err := os.ReadFile(tokenFile)
	if err != nil {
		t.Fatalf("bob's AM token (read as root): %v", err)
	}
	pid, err := os.ReadFile(filepath.Join(bobsDir, "pid"))
	if err != nil {
		t.Fatal(err)
	}
	if env, err := os.ReadFile("/proc/" + strings.TrimSpace(string(pid)) + "/environ"); err != nil || strings.Contains(string(env), string(bobsToken)) {
		t.Fatalf("bob's AM token is in his AM's environment (%v)", err)
	}

	// alice's container looks for bob's app in every process it can see,
	// and for his token where his AM keeps it.
	script := fmt.Sprintf(`id -u
for f in /proc/[0-9]*/environ; do grep -qs 'WEFT_APP_ID=%s' "$f" && echo "found bob's process: $f"; done
cat %q > /dev/null 2>&1 && echo "read bob's token" || echo "token refused"
ls %q > /dev/null 2>&1 && echo "listed bob's secrets" || echo "secrets refused"
`, bobsApp, tokenFile, filepath.Dir(tokenFile))
	if err := cliJSON(t, &sub, "app", "submit", "-token", alice, "-queue", "a", "-address", w.any(), "--", "sh", "-c", script); err != nil {
		t.Fatal(err)
	}
	alicesApp := sub.AppID
	if app := w.waitApp(alicesApp, 60*time.Second); app.State != "FINISHED" {
		t.Fatalf("alice's app %+v", app)
	}
	var out string
	for _, c := range w.containers(alicesApp) {
		if !c.IsAM {
			o, stderr, code := cli(t, "container", "logs", "-address", w.any(), c.ID)
			if code != 0 {
				t.Fatalf("alice's logs: %s", stderr)
			}
			out = o
		}
	}
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if len(lines) < 3 || lines[len(lines)-2] != "token refused" || lines[len(lines)-1] != "secrets refused" || strings.Contains(out, "found bob's") {
		t.Fatalf("alice's container saw:\n%s", out)
	}
	aliceUID, err := strconv.Atoi(lines[0])
	if err != nil || aliceUID < 70000 || aliceUID > 79999 {
		t.Fatalf("alice's container ran as uid %q, not one of dynamic_uid_range", lines[0])
	}
	if st, err := os.Stat(tokenFile); err != nil || int(st.Sys().(*syscall.Stat_t).Uid) == aliceUID {
		t.Fatalf("bob's token file belongs to alice's uid (%v)", err)
	}

	// bob's token, leaked, works only from his app's own containers: this
	// test's process (root, from the agent's own host) is refused.
	tc, err := tlsutil.New(w.sec.file("weft-agent-ca.pem"), "", "", "global")
	if err != nil {
		t.Fatal(err)
	}
	pool := wrpc.NewTLSPool(nil, tc, wrpc.RoleAgent)
	defer pool.Shutdown()
	agentAddr := ""
	for _, n := range w.nodes("s1") {
		if n.ID == "a1" {
			agentAddr = n.Address
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for method, args := range map[string]any{
		"Container.Stop":   &wrpc.ContainerIDRequest{ID: bobsTask.ID, Token: string(bobsToken)},
		"Container.Logs":   &wrpc.ContainerLogsRequest{ID: bobsTask.ID, Token: string(bobsToken)},
		"Container.Status": &wrpc.ContainerStatusRequest{IDs: []string{bobsTask.ID}, Token: string(bobsToken)},
	} {
		var reply any
		err := pool.Call(ctx, agentAddr, method, args, &reply)
		if wrpc.ErrorCode(err) != wrpc.CodePermissionDenied || !strings.Contains(err.Error(), "runs as uid 0") {
			t.Fatalf("%s with bob's leaked token from root: %v; want permission denied naming the caller's uid", method, err)
		}
	}
	// bob's task runs until told to end (a file in its work directory),
	// so it is running throughout the attack.
	if err := os.WriteFile(filepath.Join(data, "a1", "containers", bobsApp, bobsTask.ID, "work", "release"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if app := w.waitApp(bobsApp, 60*time.Second); app.State != "FINISHED" {
		t.Fatalf("bob's app after the attack: %+v", app)
	}
}
