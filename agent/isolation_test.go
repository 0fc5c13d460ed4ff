package agent

import (
	"bufio"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/weft-sched/weft/internal/containerinit"
	"github.com/weft-sched/weft/internal/testutil"
	"golang.org/x/sys/unix"
)

var namespacedOnce = sync.OnceValue(func() isolation { return detectIsolation(weftBin) })

// namespaced is how an agent of this test process starts containers,
// which must be in namespaces of their own: the agent's tests run as root.
func namespaced(t testing.TB) isolation {
	t.Helper()
	iso := namespacedOnce()
	if iso.init == "" {
		t.Fatalf("containers cannot run in namespaces of their own here (%s); the agent's tests run as root", iso.why)
	}
	return iso
}

// hostPID is the host's pid of the process that has pid nsPID in p's PID
// namespace (the same pid when p shares the host's).
func hostPID(t *testing.T, p *process, nsPID int) int {
	t.Helper()
	ns, err := os.Readlink(fmt.Sprintf("/proc/%d/ns/pid", p.pgid))
	if err != nil {
		t.Fatal(err)
	}
	if own, _ := os.Readlink("/proc/self/ns/pid"); own == ns {
		return nsPID
	}
	for _, pid := range hostPIDs(t) {
		if l, _ := os.Readlink(fmt.Sprintf("/proc/%d/ns/pid", pid)); l != ns {
			continue
		}
		status, _ := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
		for _, line := range strings.Split(string(status), "\n") {
			if f := strings.Fields(line); len(f) > 1 && f[0] == "NSpid:" && f[len(f)-1] == strconv.Itoa(nsPID) {
				return pid
			}
		}
	}
	t.Fatalf("no process has pid %d in the container's namespace", nsPID)
	return 0
}

// commandPID is the host's pid of p's command: the init's only child, or
// p itself when it was started directly.
func commandPID(t *testing.T, p *process) int {
	t.Helper()
	if p.report == nil {
		return p.pgid
	}
	tasks, _ := filepath.Glob(fmt.Sprintf("/proc/%d/task/*/children", p.pgid))
	for _, f := range tasks {
		b, _ := os.ReadFile(f)
		if f := strings.Fields(string(b)); len(f) == 1 {
			pid, _ := strconv.Atoi(f[0])
			return pid
		}
	}
	t.Fatalf("the init %d has no child", p.pgid)
	return 0
}

// hostPIDs lists the processes this test sees.
func hostPIDs(t *testing.T) []int {
	t.Helper()
	entries, err := os.ReadDir("/proc")
	if err != nil {
		t.Fatal(err)
	}
	var pids []int
	for _, e := range entries {
		if pid, err := strconv.Atoi(e.Name()); err == nil {
			pids = append(pids, pid)
		}
	}
	return pids
}

// withCmdline returns the host's processes whose command line is argv.
func withCmdline(t *testing.T, argv ...string) []int {
	t.Helper()
	want := strings.Join(argv, "\x00") + "\x00"
	var found []int
	for _, pid := range hostPIDs(t) {
		if b, _ := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid)); string(b) == want {
			found = append(found, pid)
		}
	}
	return found
}

func stdoutOf(t *testing.T, dir string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(dir, stdoutFile))
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// nobody is the account a root agent runs containers as by default: two
// containers under it share a uid, as two apps' containers do.
func nobody(t *testing.T) *syscall.Credential {
	t.Helper()
	cred, _, err := lookupAccount(nobodyUser, user.Lookup)
	if err != nil {
		t.Fatal(err)
	}
	return cred
}

// start starts argv as a container in a directory of its own under root
// (reachable by other accounts), and kills it when the test ends.
func start(t *testing.T, iso isolation, root string, argv []string, cred *syscall.Credential) (*process, string) {
	t.Helper()
	dir, err := os.MkdirTemp(root, "c-")
	if err != nil {
		t.Fatal(err)
	}
	os.Chmod(dir, 0o755)
	p, err := iso.startProcess(dir, argv, pathEnv, noCgroup, cred)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.kill(0) })
	return p, dir
}

// listProcesses prints each process the container sees: its pid and its
// command line.
const listProcesses = `for d in /proc/[0-9]*; do printf '%s %s\n' "${d#/proc/}" "$(tr '\0' ' ' < $d/cmdline)"; done`

// A container sees its own processes in /proc and nothing else: neither
// the agent nor another container (the attack read other tenants'
// processes there).
func TestContainerSeesOnlyItsOwnProcesses(t *testing.T) {
	iso := namespaced(t)
	root := reachableTempDir(t)
	other, _ := start(t, iso, root, []string{"sleep", "271828"}, nil)
	_, dir := start(t, iso, root, []string{"sh", "-c", listProcesses}, nil)
	testutil.WaitFor(t, 10*time.Second, func() bool { return strings.Count(stdoutOf(t, dir), "\n") >= 2 })
	lines := strings.Split(strings.TrimSpace(stdoutOf(t, dir)), "\n")
	if len(lines) != 2 || !strings.HasPrefix(lines[0], "1 "+weftBin+" "+containerinit.Command+" ") || !strings.Contains(lines[1], " sh -c ") {
		t.Fatalf("the container sees these processes:\n%s\nwant only its init (1) and its command", strings.Join(lines, "\n"))
	}
	select {
	case <-other.done:
		t.Fatal("the other container ended while this one looked for it")
	default:
	}
}

// A container cannot signal another container's process, not even one
// that runs under the same uid: it cannot name it.
func TestContainerCannotSignalAnotherContainersProcess(t *testing.T) {
	iso := namespaced(t)
	root := reachableTempDir(t)
	victim, _ := start(t, iso, root, []string{"sleep", "314159"}, nobody(t))
	target := commandPID(t, victim)
	attacker, dir := start(t, iso, root, []string{"sh", "-c", fmt.Sprintf("test -e /proc/%d && echo sees; kill -KILL %d; echo kill $?", target, target)}, nobody(t))
	waitDone(t, attacker)
	if out := stdoutOf(t, dir); out != "kill 1\n" {
		t.Fatalf("the attacker printed %q, want a failed kill of a process it does not see", out)
	}
	if !alive(target) {
		t.Fatalf("the other container's process %d was killed", target)
	}
	select {
	case <-victim.done:
		t.Fatalf("the other container ended: %s", describeExit(victim))
	default:
	}
}

// A container's /tmp is its own, empty at start, a bounded tmpfs, and
// gone with its mount namespace when the container ends: a later
// container under the same uid finds nothing of it, and the host's /tmp
// never sees it.
func TestContainerTmpIsPrivateAndGoesWithIt(t *testing.T) {
	iso := namespaced(t)
	root := reachableTempDir(t)
	hostFile, err := os.CreateTemp("/tmp", "weft-host-")
	if err != nil {
		t.Fatal(err)
	}
	hostFile.Close()
	t.Cleanup(func() { os.Remove(hostFile.Name()) })
	leftName := fmt.Sprintf("left-behind-%d", rand.Int())
	t.Cleanup(func() { os.Remove(filepath.Join("/tmp", leftName)) })

	writer, dir := start(t, iso, root, []string{"sh", "-c", "ls -A /tmp; stat -c %a /tmp; grep ' /tmp ' /proc/self/mounts; echo secret > /tmp/" + leftName + "; echo ready; exec sleep 600"}, nobody(t))
	testutil.WaitFor(t, 10*time.Second, func() bool { return strings.HasSuffix(stdoutOf(t, dir), "ready\n") })
	lines := strings.Split(strings.TrimSpace(stdoutOf(t, dir)), "\n")
	size := fmt.Sprintf("size=%dk", containerinit.PrivateDirBytes>>10)
	if len(lines) != 3 || lines[0] != "1777" || !isTmpfs(lines[1], "/tmp", "nosuid", "nodev", size) {
		t.Fatalf("the container's /tmp: %q; want it empty, mode 1777 and a tmpfs nosuid, nodev, %s", lines, size)
	}
	if _, err := os.Stat(filepath.Join("/tmp", leftName)); !os.IsNotExist(err) {
		t.Fatalf("the container's file is in the host's /tmp: %v", err)
	}
	// The file is there, in the container's own mount namespace.
	if b, err := os.ReadFile(fmt.Sprintf("/proc/%d/root/tmp/%s", writer.pgid, leftName)); err != nil || string(b) != "secret\n" {
		t.Fatalf("the container's /tmp/%s: %q, %v", leftName, b, err)
	}
	mountNS, err := os.Readlink(fmt.Sprintf("/proc/%d/ns/mnt", writer.pgid))
	if err != nil {
		t.Fatal(err)
	}

	look := "cat /tmp/" + leftName + " 2>&1; ls -A /tmp"
	reader, rdir := start(t, iso, root, []string{"sh", "-c", look}, nobody(t))
	waitDone(t, reader)
	if out := stdoutOf(t, rdir); strings.Contains(out, "secret") || strings.Contains(out, filepath.Base(hostFile.Name())) {
		t.Fatalf("a container running beside it sees %q", out)
	}

	writer.kill(time.Minute)
	for _, pid := range hostPIDs(t) {
		if ns, _ := os.Readlink(fmt.Sprintf("/proc/%d/ns/mnt", pid)); ns == mountNS {
			t.Fatalf("process %d is still in the ended container's mount namespace", pid)
		}
	}
	later, ldir := start(t, iso, root, []string{"sh", "-c", look}, nobody(t))
	waitDone(t, later)
	if out := stdoutOf(t, ldir); strings.Contains(out, "secret") || strings.Contains(out, leftName+"\n") {
		t.Fatalf("a later container under the same uid sees %q", out)
	}
}

// isTmpfs says whether a line of /proc/mounts mounts a tmpfs on dir with
// all of opts.
func isTmpfs(line, dir string, opts ...string) bool {
	f := strings.Fields(line)
	if len(f) < 4 || f[0] != "tmpfs" || f[1] != dir || f[2] != "tmpfs" {
		return false
	}
	have := strings.Split(f[3], ",")
	for _, o := range opts {
		if !slices.Contains(have, o) {
			return false
		}
	}
	return true
}

// An agent whose data directory is under /tmp (weft dev's is) still runs
// its containers: the container's directory and its command stay at
// their paths, and nothing else of the host's /tmp is there.
func TestContainerUnderTmpKeepsItsDirectoryAndCommand(t *testing.T) {
	iso := namespaced(t)
	dataDir, err := os.MkdirTemp("/tmp", "weft-data-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dataDir) })
	binDir, err := os.MkdirTemp("/tmp", "weft-bin-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(binDir) })
	script := filepath.Join(binDir, "task")
	dir := filepath.Join(dataDir, "containers", "app-1", "c-1-0")
	body := fmt.Sprintf("#!/bin/sh\npwd\necho by-path > %s/work/made\nls -A /tmp\n", dir)
	if err := os.WriteFile(script, []byte(body), 0o755); err != nil {
		t.Fatal(err)
	}
	p, err := iso.startProcess(dir, []string{script}, pathEnv, noCgroup, nil)
	if err != nil {
		t.Fatal(err)
	}
	waitDone(t, p)
	want := []string{filepath.Join(dir, workDir), filepath.Base(binDir), filepath.Base(dataDir)}
	slices.Sort(want[1:])
	got := strings.Split(strings.TrimSpace(stdoutOf(t, dir)), "\n")
	slices.Sort(got[1:])
	if p.exitCode == nil || *p.exitCode != 0 || !slices.Equal(got, want) {
		t.Fatalf("the task ended with %s and printed %q; want %q", describeExit(p), got, want)
	}
	if b, err := os.ReadFile(filepath.Join(dir, workDir, "made")); err != nil || string(b) != "by-path\n" {
		t.Fatalf("the task's file, written by its path: %q, %v", b, err)
	}
}

// The agent's SIGTERM reaches the command through its init at once: a
// command that handles it ends cleanly, long before the kill grace.
func TestSIGTERMReachesTheCommand(t *testing.T) {
	eachStart(t, func(t *testing.T, iso isolation) {
		dir := t.TempDir()
		p, err := iso.startProcess(dir, []string{"sh", "-c", "trap 'echo term > got-term; exit 0' TERM; echo ready; while :; do sleep 1; done"}, pathEnv, noCgroup, nil)
		if err != nil {
			t.Fatal(err)
		}
		waitForOutput(t, dir, "ready\n")
		p.kill(time.Minute) // a lost SIGTERM ends in SIGKILL, with no marker
		if b, err := os.ReadFile(filepath.Join(dir, workDir, "got-term")); err != nil || string(b) != "term\n" {
			t.Fatalf("the command's TERM handler did not run (%q, %v); it ended with %s", b, err, describeExit(p))
		}
		if p.exitCode == nil || *p.exitCode != 0 {
			t.Fatalf("the command ended with %s, want exit code 0 from its handler", describeExit(p))
		}
	})
}

// A daemon the command leaves behind, even in a session of its own, ends
// with its container.
func TestLeftoverDaemonDiesWithItsContainer(t *testing.T) {
	iso := namespaced(t)
	secs := strconv.Itoa(400000 + rand.IntN(100000))
	t.Cleanup(func() {
		for _, pid := range withCmdline(t, "sleep", secs) {
			syscall.Kill(pid, syscall.SIGKILL)
		}
	})
	dir := t.TempDir()
	// It waits until its daemon runs sleep (not setsid any more).
	script := fmt.Sprintf(`setsid sleep %s & d=$!; i=0
until [ "$(tr '\0' ' ' < /proc/$d/cmdline 2>/dev/null)" = "sleep %s " ]; do i=$((i+1)); [ $i -lt 20000 ] || exit 9; done
echo daemon $d`, secs, secs)
	p, err := iso.startProcess(dir, []string{"sh", "-c", script}, pathEnv, noCgroup, nil)
	if err != nil {
		t.Fatal(err)
	}
	waitDone(t, p)
	if p.exitCode == nil || *p.exitCode != 0 || !strings.HasPrefix(stdoutOf(t, dir), "daemon ") {
		t.Fatalf("the command ended with %s and printed %q; want it to start its daemon", describeExit(p), stdoutOf(t, dir))
	}
	if left := withCmdline(t, "sleep", secs); len(left) > 0 {
		t.Fatalf("the container's daemon outlived it: pids %v", left)
	}
}

// The init, as PID 1, reaps the orphans the namespace hands it: none
// stays a zombie.
func TestInitReapsOrphans(t *testing.T) {
	iso := namespaced(t)
	dir := t.TempDir()
	script := `for i in 1 2 3 4 5; do sh -c 'sleep 0 & exit 0'; done
n=0; while :; do z=$(cat /proc/[0-9]*/stat 2>/dev/null | awk '$3 == "Z"' | wc -l)
[ "$z" -eq 0 ] || [ $n -ge 2000 ] && break; n=$((n+1)); done; echo zombies $z`
	p, err := iso.startProcess(dir, []string{"sh", "-c", script}, pathEnv, noCgroup, nil)
	if err != nil {
		t.Fatal(err)
	}
	waitDone(t, p)
	if out := stdoutOf(t, dir); out != "zombies 0\n" {
		t.Fatalf("the container printed %q; its orphans were not reaped", out)
	}
}

// The command runs as the container's account with no way to gain
// privileges, and so does its init, which keeps its report pipe from
// the command: no pipe among the command's files, and the init's files
// out of the account's reach.
func TestContainerInitDropsPrivileges(t *testing.T) {
	iso := namespaced(t)
	cred := nobody(t)
	_, dir := start(t, iso, reachableTempDir(t), []string{"sh", "-c", `grep -E '^(Uid|Gid|Groups|NoNewPrivs|CapEff):' /proc/self/status
grep '^Uid:' /proc/1/status
ls -l /proc/$$/fd > fds; grep -c pipe: fds
ls /proc/1/fd >/dev/null 2>&1 && echo init-files-readable || echo init-files-private`}, cred)
	testutil.WaitFor(t, 10*time.Second, func() bool { return strings.Contains(stdoutOf(t, dir), "init-files-") })
	uid, gid := strconv.Itoa(int(cred.Uid)), strconv.Itoa(int(cred.Gid))
	want := strings.Join([]string{
		"Uid:\t" + uid + "\t" + uid + "\t" + uid + "\t" + uid,
		"Gid:\t" + gid + "\t" + gid + "\t" + gid + "\t" + gid,
		"Groups:\t",
		"CapEff:\t0000000000000000",
		"NoNewPrivs:\t1",
		"Uid:\t" + uid + "\t" + uid + "\t" + uid + "\t" + uid,
		"0",
		"init-files-private",
	}, "\n")
	var out []string
	for _, line := range strings.Split(strings.TrimSpace(stdoutOf(t, dir)), "\n") {
		out = append(out, strings.TrimRight(line, " "))
	}
	if strings.Join(out, "\n") != want {
		t.Fatalf("the container printed:\n%s\nwant:\n%s", strings.Join(out, "\n"), want)
	}
}

// The init refuses to touch any mount outside the namespaces an agent
// gives it: run by hand, or with a PID namespace but the host's mounts.
func TestContainerInitRefusesOutsideItsNamespaces(t *testing.T) {
	mounts, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		t.Fatal(err)
	}
	t.Run("by hand", func(t *testing.T) {
		out, err := exec.Command(weftBin, containerinit.Command).CombinedOutput()
		if code := exitCodeOf(err); code != 2 || !strings.Contains(string(out), "not a command to run by hand") {
			t.Fatalf("exit code %d, output %q", code, out)
		}
	})
	for _, c := range []struct {
		name   string
		clone  uintptr
		report string
	}{
		{"in the agent's namespaces", 0, "not PID 1 of a PID namespace of its own"},
		{"in a PID namespace with the host's mounts", syscall.CLONE_NEWPID, "not in a mount namespace of its own"},
	} {
		t.Run(c.name, func(t *testing.T) {
			specR, specW, _ := os.Pipe()
			reportR, reportW, _ := os.Pipe()
			cmd := exec.Command(weftBin, containerinit.Command)
			cmd.ExtraFiles = []*os.File{specR, reportW}
			cmd.SysProcAttr = &syscall.SysProcAttr{Cloneflags: c.clone}
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			specR.Close()
			reportW.Close()
			containerinit.WriteSpec(specW, &containerinit.Spec{Path: "/bin/true", Args: []string{"true"}})
			specW.Close()
			err := containerinit.ReadStart(bufio.NewReader(reportR))
			cmd.Wait()
			if err == nil || !strings.Contains(err.Error(), c.report) {
				t.Fatalf("the init reported %v, want %q", err, c.report)
			}
		})
	}
	if after, _ := os.ReadFile("/proc/self/mountinfo"); string(after) != string(mounts) {
		t.Fatalf("the host's mounts changed:\n%s\nthen:\n%s", mounts, after)
	}
}

func exitCodeOf(err error) int {
	if ee, ok := err.(*exec.ExitError); ok {
		return ee.ExitCode()
	}
	if err != nil {
		return -1
	}
	return 0
}

// isolationHelperEnv runs this test binary as a helper of
// TestFallbackWhenNamespacesAreRefused (see TestMain): "drop" drops
// CAP_SYS_ADMIN from the bounding set and runs itself again as "run",
// which is then root without CAP_SYS_ADMIN, as an agent in an
// unprivileged Docker container is.
const isolationHelperEnv = "WEFT_AGENT_TEST_ISOLATION_HELPER"

// fallbackReport is what the helper found.
type fallbackReport struct {
	Init, Why, Describe string
	ExitCode            *int
	Output              string
}

// runIsolationHelper is the helper's main; it returns the exit code.
func runIsolationHelper(mode string) int {
	switch mode {
	case "drop":
		// The bounding set is a thread's; exec from this one.
		runtime.LockOSThread()
		if err := unix.Prctl(unix.PR_CAPBSET_DROP, unix.CAP_SYS_ADMIN, 0, 0, 0); err != nil {
			fmt.Fprintln(os.Stderr, "drop CAP_SYS_ADMIN:", err)
			return 1
		}
		env := slices.DeleteFunc(os.Environ(), func(kv string) bool { return strings.HasPrefix(kv, isolationHelperEnv+"=") })
		env = append(env, isolationHelperEnv+"=run")
		fmt.Fprintln(os.Stderr, syscall.Exec("/proc/self/exe", os.Args, env))
		return 1
	case "run":
		iso := detectIsolation(os.Getenv("WEFT_TEST_BINARY"))
		dir, err := os.MkdirTemp("", "weft-fallback-")
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
		defer os.RemoveAll(dir)
		// The container looks for the process that started this helper.
		cmd := fmt.Sprintf("test -e /proc/%d && echo sees-the-host; exit 3", os.Getppid())
		p, err := iso.startProcess(dir, []string{"sh", "-c", cmd}, []string{"PATH=" + os.Getenv("PATH")}, noCgroup, nil)
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
		<-p.done
		out, _ := os.ReadFile(filepath.Join(dir, stdoutFile))
		json.NewEncoder(os.Stdout).Encode(fallbackReport{Init: iso.init, Why: iso.why, Describe: iso.describe(), ExitCode: p.exitCode, Output: string(out)})
		return 0
	}
	return 2
}

// Where the kernel refuses new namespaces (no CAP_SYS_ADMIN), an agent
// starts containers directly, as before, and says what that leaves open.
// The refusal is the kernel's: the agent runs as root without
// CAP_SYS_ADMIN.
func TestFallbackWhenNamespacesAreRefused(t *testing.T) {
	cmd := exec.Command(os.Args[0], "-test.run", "^$")
	cmd.Env = append(os.Environ(), isolationHelperEnv+"=drop", "WEFT_TEST_BINARY="+weftBin)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("helper: %v\n%s", err, stderr.String())
	}
	var r fallbackReport
	if err := json.Unmarshal(out, &r); err != nil {
		t.Fatalf("helper printed %q: %v", out, err)
	}
	if r.Init != "" || !strings.Contains(r.Why, "operation not permitted") {
		t.Fatalf("without CAP_SYS_ADMIN: init %q, why %q; want a direct start because the kernel refused", r.Init, r.Why)
	}
	if !strings.Contains(r.Describe, "they can see every process on this host in /proc, other containers' included") {
		t.Fatalf("the agent would log %q", r.Describe)
	}
	if r.ExitCode == nil || *r.ExitCode != 3 || r.Output != "sees-the-host\n" {
		t.Fatalf("the container started directly ended with %v and printed %q; want exit code 3, seeing the host's processes", r.ExitCode, r.Output)
	}
}

// BenchmarkContainerStart starts trivial containers (`true`) one after
// another, each way an agent starts them, and waits for each to end:
// ns/op is a container's whole life; start-ns/op the part of it the
// manager waits for, holding its lock (until the command runs).
func BenchmarkContainerStart(b *testing.B) {
	for _, mode := range []struct {
		name string
		iso  isolation
	}{{"direct", isolation{}}, {"namespaces", namespaced(b)}} {
		b.Run(mode.name, func(b *testing.B) {
			root := b.TempDir()
			var starting time.Duration
			for i := 0; b.Loop(); i++ {
				t0 := time.Now()
				p, err := mode.iso.startProcess(filepath.Join(root, strconv.Itoa(i)), []string{"true"}, pathEnv, noCgroup, nil)
				starting += time.Since(t0)
				if err != nil {
					b.Fatal(err)
				}
				<-p.done
				if p.exitCode == nil || *p.exitCode != 0 {
					b.Fatalf("ended with %s", describeExit(p))
				}
			}
			b.ReportMetric(float64(starting.Nanoseconds())/float64(b.N), "start-ns/op")
		})
	}
}
