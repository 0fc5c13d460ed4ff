package agent

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/weft-sched/weft/fsm"
	"github.com/weft-sched/weft/internal/testutil"
	"github.com/weft-sched/weft/rpc"
	"github.com/weft-sched/weft/scheduler"
	"github.com/weft-sched/weft/server"
)

// childEnv makes the test binary a small client instead of a test run
// (tenantChild): a process the test starts as another uid, standing in
// for a container of that uid's app.
const childEnv = "WEFT_AGENT_TEST_CHILD"

func init() {
	if os.Getenv(childEnv) != "" {
		os.Exit(tenantChild(strings.Fields(os.Getenv(childEnv))))
	}
}

// tenantChild does one thing and says how it went on stdout ("ok", or the
// error): read FILE, or status ADDR TOKEN ID (Container.Status with an AM
// token).
func tenantChild(args []string) int {
	var err error
	switch {
	case len(args) == 2 && args[0] == "read":
		_, err = os.ReadFile(args[1])
	case len(args) == 4 && args[0] == "status":
		pool := rpc.NewPool(nil)
		defer pool.Shutdown()
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		var resp rpc.ContainerStatusResponse
		err = pool.Call(ctx, args[1], "Container.Status", &rpc.ContainerStatusRequest{Token: args[2], IDs: []string{args[3]}}, &resp)
	default:
		err = fmt.Errorf("bad child arguments %q", args)
	}
	if err != nil {
		fmt.Println(rpc.ErrorCode(err), err)
	} else {
		fmt.Println("ok")
	}
	return 0
}

// asUID runs the test binary as uid (and gid) doing args, and returns
// what it said.
func asUID(t *testing.T, bin string, uid uint32, args ...string) string {
	t.Helper()
	cmd := exec.Command(bin)
	cmd.Env = append(os.Environ(), childEnv+"="+strings.Join(args, " "))
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: uid, Gid: uid, Groups: []uint32{}}}
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("child as uid %d: %v: %s", uid, err, out)
	}
	return strings.TrimSpace(string(out))
}

// Two apps of a root agent run as two uids the servers gave them; each
// one's AM token is a file only its own uid may read, never in its
// environment; another app's container reads neither that file nor the
// AM's /proc environment; and a leaked AM token works only from a process
// of its own app's uid — not from another app's, nor from root.
func TestTenantsRunApartAndTokensStayWithTheirApp(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Fatal("this test runs containers as other uids: run it as root (make test does, in CI)")
	}
	base := reachableTempDir(t)
	logger := hclog.New(&hclog.LoggerOptions{Output: &testLog{t: t, done: make(chan struct{})}, Level: hclog.Warn})
	srv, err := server.New(&server.Config{NodeID: "s1", DataDir: t.TempDir(), RPCPort: -1, SerfPort: -1, BootstrapExpect: 1,
		SerfFastGossip: true, Logger: logger.Named("s1"), DynamicUIDs: fsm.UIDRange{First: 70100, Last: 70199}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { srv.Shutdown() })
	a, err := New(&Config{NodeID: "n1", DataDir: filepath.Join(base, "data"), RPCPort: -1, SerfPort: -1,
		Join: []string{srv.SerfAddr()}, Resources: scheduler.Resources{MemoryMB: 4096, Vcores: 8},
		OpportunisticQueueLength: -1, SerfFastGossip: true, Executable: weftBin, KillGrace: time.Second,
		DynamicUIDs: [2]uint32{70000, 79999}, Logger: logger.Named("n1")})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { a.Shutdown() })
	c := rpc.NewClient([]string{srv.RPCAddr()}, rpc.NewPool(nil))
	// The child: this test binary, where other uids can run it.
	bin := filepath.Join(base, "child")
	copyFile(t, os.Args[0], bin, 0o755)

	submit := func(user string) (app *scheduler.App, amDir string) {
		t.Helper()
		var sub rpc.AppSubmitResponse
		spec := scheduler.AppSpec{User: user, DShell: scheduler.DShell{NumContainers: 1, Command: []string{"sleep", "60"}}}
		testutil.WaitForNoError(t, 20*time.Second, "submit", func() error {
			return c.Call(context.Background(), "App.Submit", &rpc.AppSubmitRequest{Spec: spec}, &sub)
		})
		testutil.WaitFor(t, 30*time.Second, func() bool {
			got, ok := srv.State().App(sub.AppID)
			if !ok || got.State != scheduler.AppRunning || len(got.Attempts) == 0 {
				return false
			}
			app = got
			amDir = filepath.Join(base, "data", "containers", got.ID, got.Attempts[0].ContainerID)
			_, err := os.Stat(filepath.Join(amDir, secretsDir, rpc.SecretAMToken))
			return err == nil
		})
		return app, amDir
	}
	alice, aliceDir := submit("alice")
	bob, _ := submit("bob")
	if alice.UID == bob.UID || alice.UID < 70100 || alice.UID > 70199 || bob.UID < 70100 || bob.UID > 70199 {
		t.Fatalf("apps got uids %d and %d, want two of 70100-70199", alice.UID, bob.UID)
	}

	// alice's AM token is a file of hers alone, and not in her AM's
	// environment.
	tokenFile := filepath.Join(aliceDir, secretsDir, rpc.SecretAMToken)
	fi, err := os.Stat(tokenFile)
	if err != nil {
		t.Fatal(err)
	}
	st := fi.Sys().(*syscall.Stat_t)
	if st.Uid != alice.UID || fi.Mode().Perm() != 0o400 {
		t.Fatalf("alice's token file is uid %d mode %s, want uid %d mode 0400", st.Uid, fi.Mode().Perm(), alice.UID)
	}
	tokenBytes, err := os.ReadFile(tokenFile)
	if err != nil {
		t.Fatal(err)
	}
	token := string(tokenBytes)
	pid, err := os.ReadFile(filepath.Join(aliceDir, pidFile))
	if err != nil {
		t.Fatal(err)
	}
	environ := fmt.Sprintf("/proc/%s/environ", strings.TrimSpace(string(pid)))
	env, err := os.ReadFile(environ)
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(env), token) || strings.Contains(string(env), "AM_TOKEN=") {
		t.Fatal("alice's AM token is in her AM's environment")
	}
	amOwner, _ := owner(t, "/proc/"+strings.TrimSpace(string(pid)))
	if amOwner != int(alice.UID) {
		t.Fatalf("alice's AM runs as uid %d, want %d", amOwner, alice.UID)
	}

	// bob's uid can read neither.
	for _, f := range []string{tokenFile, environ} {
		if got := asUID(t, bin, bob.UID, "read", f); !strings.Contains(got, "permission denied") { // the kernel's word
			t.Fatalf("bob's uid reading %s: %s, want permission denied", f, got)
		}
	}
	// alice's token, leaked, works from alice's uid only.
	amID := alice.Attempts[0].ContainerID
	if got := asUID(t, bin, alice.UID, "status", a.RPCAddr(), token, amID); got != "ok" {
		t.Fatalf("alice's uid with her token: %s", got)
	}
	for who, uid := range map[string]uint32{"bob's uid": bob.UID, "root": 0} {
		got := asUID(t, bin, uid, "status", a.RPCAddr(), token, amID)
		if !strings.HasPrefix(got, string(rpc.CodePermissionDenied)) || !strings.Contains(got, "runs as uid "+strconv.Itoa(int(uid))) {
			t.Fatalf("%s with alice's token: %s, want permission denied naming uid %d", who, got, uid)
		}
	}
}

func copyFile(t *testing.T, from, to string, mode os.FileMode) {
	t.Helper()
	src, err := os.Open(from)
	if err != nil {
		t.Fatal(err)
	}
	defer src.Close()
	dst, err := os.OpenFile(to, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, mode)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := io.Copy(dst, src); err != nil {
		t.Fatal(err)
	}
	if err := dst.Close(); err != nil {
		t.Fatal(err)
	}
}
