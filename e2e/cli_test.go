package e2e

import (
	"bufio"
	"encoding/json"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// startDev runs `weft dev` on free ports and waits until it prints that it
// is running; it returns the RPC address.
func startDev(t *testing.T) (*proc, string) {
	rpcPort, serfPort := freePort(t, "127.0.0.1"), freePort(t, "127.0.0.1")
	p := startProc(t, "dev", "dev", "-rpc-port", strconv.Itoa(rpcPort), "-serf-port", strconv.Itoa(serfPort))
	addr := "127.0.0.1:" + strconv.Itoa(rpcPort)
	waitFor(t, 20*time.Second, "weft dev to print its banner", func() error {
		b, _ := os.ReadFile(p.log)
		if !strings.Contains(string(b), "weft dev is running") {
			return os.ErrNotExist
		}
		return nil
	})
	waitFor(t, 20*time.Second, "weft dev to elect itself", func() error {
		_, errOut, code := cli(t, "queue", "list", "-address", addr)
		if code != 0 {
			return &exitErr{code, errOut}
		}
		return nil
	})
	return p, addr
}

type exitErr struct {
	code int
	msg  string
}

func (e *exitErr) Error() string { return strconv.Itoa(e.code) + ": " + e.msg }

func TestDevAndCommandLineContract(t *testing.T) {
	dev, addr := startDev(t)

	// The banner says what to try next.
	banner, _ := os.ReadFile(dev.log)
	for _, want := range []string{"weft members", "weft queue apply", "Ctrl-C"} {
		if !strings.Contains(string(banner), want) {
			t.Errorf("banner lacks %q:\n%s", want, banner)
		}
	}

	// status -json has the SPEC §14 shape.
	stdout, _, code := cli(t, "status", "-json", "-address", addr)
	if code != 0 {
		t.Fatalf("status exit %d", code)
	}
	var st map[string]json.RawMessage
	if err := json.Unmarshal([]byte(stdout), &st); err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{"leader", "servers", "nodes", "capacity", "used_guaranteed", "used_opportunistic", "apps"} {
		if _, ok := st[k]; !ok {
			t.Errorf("status -json lacks %q: %s", k, stdout)
		}
	}

	// queue list -json: the SPEC §14 fields.
	var queues []map[string]json.RawMessage
	if err := cliJSON(t, &queues, "queue", "list", "-address", addr); err != nil {
		t.Fatal(err)
	}
	if len(queues) != 2 {
		t.Fatalf("default queues: %d", len(queues))
	}
	for _, k := range []string{"name", "weight", "policy", "min_resources", "max_resources", "steady_fair_share",
		"instantaneous_fair_share", "used", "pending", "running_apps"} {
		if _, ok := queues[1][k]; !ok {
			t.Errorf("queue list -json lacks %q", k)
		}
	}

	// A bad file: exit 1, one line naming file, line and field; nothing changes.
	bad := filepath.Join(t.TempDir(), "bad.hcl")
	os.WriteFile(bad, []byte("queue \"root\" {\n  queue \"a\" {\n    weight = 0\n  }\n}\n"), 0o644)
	_, errOut, code := cli(t, "queue", "apply", "-address", addr, bad)
	if code != 1 || strings.Count(strings.TrimSpace(errOut), "\n") != 0 ||
		!strings.Contains(errOut, "bad.hcl:3,5") || !strings.Contains(errOut, "weight") || !strings.Contains(errOut, "nothing was changed") {
		t.Fatalf("bad file: exit %d, stderr %q", code, errOut)
	}
	var after []map[string]json.RawMessage
	if err := cliJSON(t, &after, "queue", "list", "-address", addr); err != nil || len(after) != 2 {
		t.Fatalf("a refused file changed the queues: %v %d", err, len(after))
	}

	// The example file from the README applies, and status shows it.
	out, errOut, code := cli(t, "queue", "apply", "-address", addr, "../examples/queues.hcl")
	if code != 0 || !strings.Contains(out, "root.prod, root.dev, root.default") {
		t.Fatalf("apply example: exit %d %s %s", code, out, errOut)
	}
	out, _, code = cli(t, "queue", "status", "root.prod", "-address", addr) // flags after the argument
	if code != 0 || !strings.Contains(out, "memory_mb=4096,vcores=4") || !strings.Contains(out, "threshold 0.8, timeout 5s") {
		t.Fatalf("queue status: exit %d\n%s", code, out)
	}
	// The text tree indents children under root.
	out, _, _ = cli(t, "queue", "list", "-address", addr)
	sc := bufio.NewScanner(strings.NewReader(out))
	var tree []string
	for sc.Scan() {
		if f := strings.Fields(sc.Text()); len(f) > 0 && (strings.HasPrefix(sc.Text(), "root") || strings.HasPrefix(sc.Text(), "  ")) {
			tree = append(tree, sc.Text())
		}
	}
	if len(tree) != 4 || !strings.HasPrefix(tree[1], "  prod") {
		t.Fatalf("queue list tree:\n%s", out)
	}

	// Usage errors exit 2; unknown queues and unreachable servers exit 1.
	for _, c := range []struct {
		args []string
		code int
		want string
	}{
		{[]string{"queue"}, 2, "needs a subcommand"},
		{[]string{"queue", "apply", "-address", addr}, 2, "usage: weft queue apply"},
		{[]string{"queue", "list", "-bogus"}, 2, "flag provided but not defined"},
		{[]string{"frobnicate"}, 2, "unknown command"},
		{[]string{"queue", "status", "nope", "-address", addr}, 1, "root.nope not found"},
		{[]string{"members", "-address", "127.0.0.1:1"}, 1, "cannot reach a weft server"},
		{[]string{"server"}, 2, "data_dir (-data-dir) is required"},
		{[]string{"agent", "-data-dir", "d", "-join", "x", "-resources", "memory_mb=0,vcores=8"}, 2, "memory_mb must be given and positive"},
		{[]string{"app", "list", "-state", "BOGUS", "-address", addr}, 2, "use one of SUBMITTED"},
		{[]string{"app", "list", "-address", "127.0.0.1"}, 2, "missing the port; use 127.0.0.1:8030"},
		{[]string{"app", "list", "-address", "http://" + addr}, 2, "without a scheme"},
	} {
		_, errOut, code := cli(t, c.args...)
		if code != c.code || !strings.Contains(errOut, c.want) || strings.Count(strings.TrimSpace(errOut), "\n") > 0 {
			t.Errorf("weft %v: exit %d, stderr %q; want exit %d mentioning %q", c.args, code, errOut, c.code, c.want)
		}
	}

	// Ctrl-C stops weft dev cleanly.
	if err := dev.stop(syscall.SIGINT, 20*time.Second); err != nil {
		t.Fatalf("weft dev exit: %v", err)
	}
}

// TestAppLogsLabelsEveryContainer reads an app's logs with `weft app logs`:
// every container's lines, each labelled with the container that wrote it;
// and -f on a running app follows it to its end and then exits.
func TestAppLogsLabelsEveryContainer(t *testing.T) {
	_, addr := startDev(t)
	var sub struct {
		AppID string `json:"app_id"` // app submit -json
		ID    string `json:"id"`     // app submit -wait -json: the app's status
	}
	if err := cliJSON(t, &sub, "app", "submit", "-address", addr, "-num-containers", "3", "-wait", "--",
		"sh", "-c", "echo first from $WEFT_CONTAINER_ID; echo second from $WEFT_CONTAINER_ID; echo err from $WEFT_CONTAINER_ID >&2"); err != nil {
		t.Fatal(err)
	}
	out, errOut, code := cli(t, "app", "logs", "-address", addr, sub.ID)
	if code != 0 {
		t.Fatalf("app logs: exit %d: %s", code, errOut)
	}
	checkLabelled := func(out, word string, want int) {
		t.Helper()
		seen := map[string]int{}
		for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
			label, text, ok := strings.Cut(line, " | ")
			if !ok {
				t.Fatalf("unlabelled line %q in:\n%s", line, out)
			}
			label = strings.TrimSpace(label)
			if strings.HasSuffix(text, " from "+label) && strings.HasPrefix(text, word) {
				seen[label]++
			}
		}
		if len(seen) != want {
			t.Fatalf("%d containers' %q lines labelled with their own ID, want %d:\n%s", len(seen), word, want, out)
		}
	}
	checkLabelled(out, "first", 3)
	checkLabelled(out, "second", 3)
	errLines, _, code := cli(t, "app", "logs", "-stderr", "-address", addr, sub.ID)
	if code != 0 || !strings.Contains(errLines, " | err from ") || !strings.Contains(errLines, "weft.dshell") {
		t.Fatalf("app logs -stderr: exit %d:\n%s", code, errLines)
	}

	// -f: the containers write after the command starts following.
	if err := cliJSON(t, &sub, "app", "submit", "-address", addr, "-num-containers", "2", "--",
		"sh", "-c", "sleep 2; echo first from $WEFT_CONTAINER_ID"); err != nil {
		t.Fatal(err)
	}
	out, errOut, code = cli(t, "app", "logs", "-f", "-address", addr, sub.AppID)
	if code != 0 {
		t.Fatalf("app logs -f: exit %d: %s", code, errOut)
	}
	checkLabelled(out, "first", 2)
	var st struct {
		State string `json:"state"`
	}
	if err := cliJSON(t, &st, "app", "status", "-address", addr, sub.AppID); err != nil || st.State != "FINISHED" {
		t.Fatalf("app logs -f returned with the app %s (%v)", st.State, err)
	}
}
