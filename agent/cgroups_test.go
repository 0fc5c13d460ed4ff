package agent

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/weft-sched/weft/internal/clock"
	"github.com/weft-sched/weft/rpc"

	"github.com/weft-sched/weft/scheduler"
)

func fakeCgroupFS(t *testing.T, controllers string) string {
	root := t.TempDir()
	os.WriteFile(filepath.Join(root, "cgroup.controllers"), []byte(controllers), 0o644)
	os.WriteFile(filepath.Join(root, "cgroup.subtree_control"), nil, 0o644)
	return root
}

func TestCgroupsEnforceLimitsWhereWritable(t *testing.T) {
	root := fakeCgroupFS(t, "cpuset cpu io memory pids\n")
	cg, why := detectCgroups(root, "n1", "/data/a")
	if cg == nil {
		t.Fatalf("not detected: %s", why)
	}
	if b, _ := os.ReadFile(filepath.Join(root, "cgroup.subtree_control")); string(b) != "+memory +cpu" {
		t.Fatalf("controllers not enabled at the root: %q", b)
	}
	f, err := cg.create("c-5-1", scheduler.Resources{MemoryMB: 512, Vcores: 2})
	if err != nil {
		t.Fatal(err)
	}
	f.Close()
	dir := filepath.Join(root, agentCgroupName("n1", "/data/a"), "c-5-1")
	mem, _ := os.ReadFile(filepath.Join(dir, "memory.max"))
	cpu, _ := os.ReadFile(filepath.Join(dir, "cpu.max"))
	if string(mem) != "536870912" || string(cpu) != "200000 100000" {
		t.Fatalf("memory.max %q cpu.max %q", mem, cpu)
	}
	// (remove is an rmdir, which only a real cgroupfs allows while the
	// control files exist; it is not checked against this fake.)
}

func TestCgroupsAccountingOnlyWithoutControllers(t *testing.T) {
	cg, why := detectCgroups(fakeCgroupFS(t, "pids\n"), "n1", "/data/a")
	if cg != nil || !strings.Contains(why, "lacks the memory and cpu controllers") {
		t.Fatalf("detected %v (%s) without memory and cpu controllers", cg, why)
	}
	cg, why = detectCgroups(filepath.Join(t.TempDir(), "missing"), "n1", "/data/a")
	if cg != nil || why == "" {
		t.Fatalf("detected a missing hierarchy")
	}
}

func TestCgroupMounts(t *testing.T) {
	mounts := filepath.Join(t.TempDir(), "mounts")
	os.WriteFile(mounts, []byte("proc /proc proc rw 0 0\n"+
		"cgroup /sys/fs/cgroup/cpu,cpuacct cgroup rw,nosuid,cpu,cpuacct 0 0\n"+
		"cgroup2 /sys/fs/cgroup/unified cgroup2 rw 0 0\n"), 0o644)
	got, err := cgroupMounts(mounts)
	if err != nil || len(got) != 2 || got[0].dir != "/sys/fs/cgroup/cpu,cpuacct" || got[0].v2 || !contains(got[0].controllers, "cpu") ||
		got[1].dir != "/sys/fs/cgroup/unified" || !got[1].v2 {
		t.Fatalf("cgroupMounts = %+v, %v", got, err)
	}
	os.WriteFile(mounts, []byte("proc /proc proc rw 0 0\n"), 0o644)
	if _, err := cgroupMounts(mounts); err == nil {
		t.Fatal("found a cgroup hierarchy where none is mounted")
	}
}

// On a host that mounts the v1 controllers (and no usable v2), the agent
// enforces with memory.limit_in_bytes and the CFS quota, pauses with the
// freezer, and reads an OOM kill from memory.oom_control.
func TestCgroupsV1(t *testing.T) {
	root := t.TempDir()
	mount := func(name string) cgroupMount {
		dir := filepath.Join(root, name)
		os.Mkdir(dir, 0o755)
		return cgroupMount{dir: dir, controllers: []string{"rw", name}}
	}
	cpu := mount("cpu")
	cpu.controllers = append(cpu.controllers, "cpuacct")
	mounts := []cgroupMount{mount("memory"), cpu, mount("freezer"), {dir: filepath.Join(root, "unified"), v2: true}}
	if cg, why := detectV1(mounts[2:], "weft-n1-x"); cg != nil || !strings.Contains(why, "memory and cpu") {
		t.Fatalf("detected v1 without memory and cpu: %+v (%s)", cg, why)
	}
	cg, why := detectV1(mounts, "weft-n1-x")
	if cg == nil {
		t.Fatalf("not detected: %s", why)
	}
	if cg.Label() != "cgroup v1" {
		t.Fatalf("label %q", cg.Label())
	}
	f, err := cg.create("c-5-1", scheduler.Resources{MemoryMB: 512, Vcores: 2})
	if err != nil || f != nil {
		t.Fatalf("create: %v, %v (v1 joins by attach, not by a directory)", f, err)
	}
	read := func(path ...string) string {
		b, _ := os.ReadFile(filepath.Join(append([]string{root}, path...)...))
		return string(b)
	}
	if m, q, p := read("memory", "weft-n1-x", "c-5-1", "memory.limit_in_bytes"), read("cpu", "weft-n1-x", "c-5-1", "cpu.cfs_quota_us"),
		read("cpu", "weft-n1-x", "c-5-1", "cpu.cfs_period_us"); m != "536870912" || q != "200000" || p != "100000" {
		t.Fatalf("memory.limit_in_bytes %q, cpu.cfs_quota_us %q, cpu.cfs_period_us %q", m, q, p)
	}
	if err := cg.attach("c-5-1", 4242); err != nil {
		t.Fatal(err)
	}
	for _, h := range []string{"memory", "cpu", "freezer"} {
		if got := read(h, "weft-n1-x", "c-5-1", "cgroup.procs"); got != "4242" {
			t.Fatalf("%s cgroup.procs %q after attach", h, got)
		}
	}
	if err := cg.freeze("c-5-1", true); err != nil || read("freezer", "weft-n1-x", "c-5-1", "freezer.state") != "FROZEN" {
		t.Fatalf("freeze: %v", err)
	}
	if err := cg.freeze("c-5-1", false); err != nil || read("freezer", "weft-n1-x", "c-5-1", "freezer.state") != "THAWED" {
		t.Fatalf("thaw: %v", err)
	}
	oom := filepath.Join(root, "memory", "weft-n1-x", "c-5-1", "memory.oom_control")
	os.WriteFile(oom, []byte("oom_kill_disable 0\nunder_oom 0\noom_kill 0\n"), 0o644)
	if cg.oomKilled("c-5-1") {
		t.Fatal("an OOM kill read from oom_kill 0")
	}
	os.WriteFile(oom, []byte("oom_kill_disable 0\nunder_oom 0\noom_kill 1\n"), 0o644)
	if !cg.oomKilled("c-5-1") {
		t.Fatal("no OOM kill read from oom_kill 1")
	}
	if err := cg.attach("../x", 1); err == nil {
		t.Fatal("attach to an ID that leaves its directory")
	}

	// Without a freezer the agent still enforces; pausing signals.
	nf, why := detectV1(mounts[:2], "weft-n1-y")
	if nf == nil || nf.freezer != "" || nf.freeze("c-5-1", true) == nil {
		t.Fatalf("without a freezer: %+v (%s)", nf, why)
	}
}

// On this host, if it lets the agent write cgroups (root, with v2 or the
// v1 controllers mounted): a container over its memory limit ends with
// reason oom, and a paused one is frozen with its cgroup.
func TestCgroupsOnThisHost(t *testing.T) {
	cg, why := detectCgroups("", "n1", t.TempDir())
	if cg == nil {
		t.Skipf("this host does not let the agent enforce limits: %s", why)
	}
	t.Cleanup(cg.close)
	m := newManager(hclog.NewNullLogger(), clock.Real{}, "n1", t.TempDir(), scheduler.Resources{MemoryMB: 1000, Vcores: 1}, 10,
		scheduler.LocalPolicy{Pause: true, MaxPause: time.Minute}, 2*time.Second, cg, func() {})
	// Through the container init, as agents run as root: it joins the
	// cgroups before it runs the command.
	m.isolation = namespaced(t)
	t.Cleanup(func() { m.stopAll(scheduler.ReasonKilled) })

	// dd reads into one 200 MB buffer: against a limit of 48.
	hog := info("hog", 48, scheduler.Guaranteed)
	if r := m.start(hog, rpc.LaunchSpec{Command: []string{"sh", "-c", "dd if=/dev/zero of=/dev/null bs=200M count=1"}}); r.State != "RUNNING" {
		t.Fatalf("hog %+v", r)
	}
	if r := waitState(t, m, "hog", scheduler.ContainerCompleted); r.Reason != scheduler.ReasonOOM || !strings.Contains(r.Diagnostics, "memory limit of 48 MB") {
		t.Fatalf("hog ended %s (%s), want oom", r.Reason, r.Diagnostics)
	}

	if r := m.start(info("o1", 100, scheduler.Opportunistic), sleepLong); r.State != "RUNNING" {
		t.Fatalf("o1 %+v", r)
	}
	m.mu.Lock()
	pid := m.byID["o1"].proc.pgid
	m.mu.Unlock()
	if got := cgroupOf(pid, cg); !strings.HasSuffix(got, "/o1") {
		t.Fatalf("o1's process %d is in cgroup %q, want its container's", pid, got)
	}
	if r := m.start(info("g1", 100, scheduler.Guaranteed), rpc.LaunchSpec{Command: []string{"sh", "-c", "sleep 0.5"}}); r.State != "RUNNING" {
		t.Fatalf("g1 %+v", r)
	}
	waitState(t, m, "o1", scheduler.ContainerPaused)
	if cg.version == 1 && cg.freezer != "" {
		if b, _ := os.ReadFile(filepath.Join(cg.freezer, "o1", "freezer.state")); !strings.HasPrefix(string(b), "FROZEN") {
			t.Fatalf("o1's freezer.state %q while paused", b)
		}
	}
	waitState(t, m, "o1", scheduler.ContainerRunning)
	m.stop("o1", scheduler.ReasonKilled)
	waitState(t, m, "o1", scheduler.ContainerCompleted)
	for _, d := range cg.dirs() {
		if _, err := os.Stat(filepath.Join(d, "o1")); !os.IsNotExist(err) {
			t.Fatalf("o1's cgroup in %s outlived it: %v", d, err)
		}
	}
}

// cgroupOf is the cgroup path of pid in the hierarchy that holds memory.
func cgroupOf(pid int, cg *cgroups) string {
	b, _ := os.ReadFile(fmt.Sprintf("/proc/%d/cgroup", pid))
	for _, line := range strings.Split(string(b), "\n") {
		f := strings.SplitN(line, ":", 3)
		if len(f) == 3 && ((cg.version == 2 && f[0] == "0") || contains(strings.Split(f[1], ","), "memory")) {
			return f[2]
		}
	}
	return ""
}

func TestCgroupsRefuseIDsThatLeaveTheirDirectory(t *testing.T) {
	root := fakeCgroupFS(t, "cpu memory\n")
	cg, why := detectCgroups(root, "n1", "/data/a")
	if cg == nil {
		t.Fatalf("not detected: %s", why)
	}
	for _, id := range []string{"..", ".", "../x", "a/b", "*", ""} {
		if f, err := cg.create(id, scheduler.Resources{MemoryMB: 64, Vcores: 1}); err == nil {
			f.Close()
			t.Errorf("create(%q) made a cgroup", id)
		}
	}
	// Nothing was written outside the agent's own directory, nor in it.
	if _, err := os.Stat(filepath.Join(root, "memory.max")); !os.IsNotExist(err) {
		t.Fatalf("memory.max written at the hierarchy's root: %v", err)
	}
	if _, err := os.Stat(filepath.Join(root, "x")); !os.IsNotExist(err) {
		t.Fatalf("a cgroup was made beside the agent's: %v", err)
	}
	entries, _ := os.ReadDir(filepath.Join(root, agentCgroupName("n1", "/data/a")))
	for _, e := range entries {
		if e.IsDir() {
			t.Errorf("cgroup %s made for an invalid ID", e.Name())
		}
	}
	if cg, _ := detectCgroups(root, "..", "/data/a"); cg != nil {
		t.Fatalf("detectCgroups accepted node id \"..\" (cgroup %s)", cg.root)
	}
}
