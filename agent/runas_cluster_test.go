package agent

import (
	"context"
	"os"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"github.com/weft-sched/weft/rpc"
	"github.com/weft-sched/weft/scheduler"
)

// idScript prints the container's uid, gid, groups and HOME, and proves
// it can write its working directory.
const idScript = `id -u; id -g; id -G; echo "$HOME"; echo probe > probe && cat probe`

// expectedAccount is the account a container of appUser runs as under the
// policy on this host, from the host's own user database: what the test
// process is (root in CI, or not) decides which case is checked.
func expectedAccount(t *testing.T, p runAsPolicy, appUser string) (uid, gid int, changed bool) {
	t.Helper()
	acct, err := p.decide(appUser, 0, user.Lookup)
	if err != nil {
		t.Fatalf("this host cannot run the test's containers: %v", err)
	}
	if acct.cred == nil {
		return os.Geteuid(), os.Getegid(), false
	}
	return int(acct.cred.Uid), int(acct.cred.Gid), true
}

// runIDApp runs idScript in one container of an app of appUser on one
// agent configured by shape, and returns the task's output and directory.
func runIDApp(t *testing.T, appUser string, shape func(*Config)) (out []string, dir string) {
	t.Helper()
	data := filepath.Join(reachableTempDir(t), "data")
	_, agents, c := clusterWith(t, 1, func(cfg *Config) {
		cfg.DataDir = data
		shape(cfg)
	})
	var sub rpc.AppSubmitResponse
	spec := scheduler.AppSpec{User: appUser, DShell: scheduler.DShell{NumContainers: 1, Command: []string{"sh", "-c", idScript}}}
	if err := c.Call(context.Background(), "App.Submit", &rpc.AppSubmitRequest{Spec: spec}, &sub); err != nil {
		t.Fatal(err)
	}
	if app := waitApp(t, c, sub.AppID); app.State != "FINISHED" {
		t.Fatalf("app %+v", app)
	}
	var list rpc.ContainerListResponse
	if err := c.Call(context.Background(), "Container.List", &rpc.ContainerListRequest{AppID: sub.AppID}, &list); err != nil {
		t.Fatal(err)
	}
	for _, ci := range list.Containers {
		if ci.IsAM {
			continue
		}
		var logs rpc.ContainerLogsResponse
		if err := c.Call(context.Background(), "Container.Logs", &rpc.ContainerLogsRequest{ID: ci.ID}, &logs); err != nil {
			t.Fatal(err)
		}
		return strings.Split(strings.TrimSpace(string(logs.Data)), "\n"), filepath.Join(agents[0].mgr.dir, sub.AppID, ci.ID)
	}
	t.Fatalf("no task container in %+v", list.Containers)
	return nil, ""
}

// owner returns the uid and gid owning path.
func owner(t *testing.T, path string) (int, int) {
	t.Helper()
	fi, err := os.Lstat(path)
	if err != nil {
		t.Fatal(err)
	}
	st := fi.Sys().(*syscall.Stat_t)
	return int(st.Uid), int(st.Gid)
}

// checkRanAs checks a task's output and files against the account it
// must have run as.
func checkRanAs(t *testing.T, out []string, dir string, uid, gid int, changed bool) {
	t.Helper()
	if len(out) != 5 {
		t.Fatalf("task output %q: want uid, gid, groups, HOME and the probe", out)
	}
	t.Logf("the task ran as uid %s gid %s groups %q HOME %q", out[0], out[1], out[2], out[3])
	if out[0] != strconv.Itoa(uid) || out[1] != strconv.Itoa(gid) {
		t.Fatalf("the task ran as uid %s gid %s, want %d %d", out[0], out[1], uid, gid)
	}
	if out[4] != "probe" {
		t.Fatalf("the task could not write its working directory: %q", out[4])
	}
	agentUID := os.Geteuid()
	if u, _ := owner(t, dir); u != agentUID {
		t.Errorf("the container directory belongs to uid %d, want the agent's %d", u, agentUID)
	}
	if u, _ := owner(t, filepath.Join(dir, pidFile)); u != agentUID {
		t.Errorf("the pid file belongs to uid %d, want the agent's %d", u, agentUID)
	}
	for _, f := range []string{workDir, stdoutFile, stderrFile} {
		if u, g := owner(t, filepath.Join(dir, f)); u != uid || g != gid {
			t.Errorf("%s belongs to %d:%d, want the container's %d:%d", f, u, g, uid, gid)
		}
	}
	if !changed {
		return
	}
	if out[2] != strconv.Itoa(gid) {
		t.Errorf("the task's groups are %q, want only its primary group %d", out[2], gid)
	}
	if out[3] == os.Getenv("HOME") && out[3] != "" {
		t.Errorf("the task got the agent's HOME %q", out[3])
	}
}

// A root agent runs containers as nobody unless told otherwise; an agent
// that is not root runs them as itself. Whichever this test process is,
// the container runs as the account the policy picks, with no
// supplementary groups, in a working directory and log files of its own.
func TestContainersRunAsNobodyByDefault(t *testing.T) {
	policy := runAsPolicy{agentIsRoot: os.Geteuid() == 0}
	uid, gid, changed := expectedAccount(t, policy, "test")
	if policy.agentIsRoot && !changed {
		t.Fatal("a root agent's default policy kept root")
	}
	out, dir := runIDApp(t, "test", func(cfg *Config) { cfg.AllowRoot = false })
	checkRanAs(t, out, dir, uid, gid, changed)
	if policy.agentIsRoot && out[0] == "0" {
		t.Fatal("the container ran as root")
	}
}

// With allow_root, containers run as the agent's own user: root when the
// agent is root.
func TestContainersRunAsTheAgentWithAllowRoot(t *testing.T) {
	out, dir := runIDApp(t, "test", func(cfg *Config) { cfg.AllowRoot = true })
	checkRanAs(t, out, dir, os.Geteuid(), os.Getegid(), false)
}

// With run_as_user, a root agent runs a container as its app's user when
// that account exists here: daemon, on most hosts (where it does not, the
// policy's fallback, nobody, is what is checked).
func TestContainersRunAsTheirUserWithRunAsUser(t *testing.T) {
	policy := runAsPolicy{agentIsRoot: os.Geteuid() == 0, runAsUser: true}
	uid, gid, changed := expectedAccount(t, policy, "daemon")
	out, dir := runIDApp(t, "daemon", func(cfg *Config) { cfg.AllowRoot, cfg.RunAsUser = false, true })
	checkRanAs(t, out, dir, uid, gid, changed)
	if d, err := user.Lookup("daemon"); err == nil && policy.agentIsRoot && out[0] != d.Uid {
		t.Fatalf("the container ran as uid %s, not daemon's %s", out[0], d.Uid)
	}
}

// The app's user reaches every container the AM is given, from the
// servers and from its AMRMProxy alike, so the nodes that start them
// know whose account to use.
func TestAllocatedContainersCarryTheAppsUser(t *testing.T) {
	w := startAMWorld(t, 1, nil)
	w.waitList(1)
	opp := w.allocate(rpc.AMAllocateRequest{Asks: []scheduler.Ask{oppAsk(1, 1, true)}}).Allocated
	if len(opp) != 1 || opp[0].User != "test" {
		t.Fatalf("the AMRMProxy allocated %+v; want one container of user test", opp)
	}
	// The answer to the ask itself may already carry the container (the
	// call waits for news): it counts too.
	got := w.allocate(rpc.AMAllocateRequest{Asks: []scheduler.Ask{{AskID: 2, Count: 1, Resources: oneCore, ExecutionType: scheduler.Guaranteed}}}).Allocated
	for i := 0; i < 30 && len(got) == 0; i++ {
		got = w.allocate(rpc.AMAllocateRequest{}).Allocated
	}
	if len(got) != 1 || got[0].User != "test" || got[0].ExecutionType != string(scheduler.Guaranteed) {
		t.Fatalf("the servers allocated %+v; want one guaranteed container of user test", got)
	}
	if u, _ := w.home.mgr.amUser(w.app, 1); u != "test" {
		t.Fatalf("the AM container runs for user %q, want test", u)
	}
}
