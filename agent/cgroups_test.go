package agent

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

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
	cg, why := detectCgroups(root, "n1")
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
	dir := filepath.Join(root, "weft-n1", "c-5-1")
	mem, _ := os.ReadFile(filepath.Join(dir, "memory.max"))
	cpu, _ := os.ReadFile(filepath.Join(dir, "cpu.max"))
	if string(mem) != "536870912" || string(cpu) != "200000 100000" {
		t.Fatalf("memory.max %q cpu.max %q", mem, cpu)
	}
	// (remove is an rmdir, which only a real cgroupfs allows while the
	// control files exist; it is not checked against this fake.)
}

func TestCgroupsAccountingOnlyWithoutControllers(t *testing.T) {
	cg, why := detectCgroups(fakeCgroupFS(t, "pids\n"), "n1")
	if cg != nil || !strings.Contains(why, "lacks the memory and cpu controllers") {
		t.Fatalf("detected %v (%s) without memory and cpu controllers", cg, why)
	}
	cg, why = detectCgroups(filepath.Join(t.TempDir(), "missing"), "n1")
	if cg != nil || why == "" {
		t.Fatalf("detected a missing hierarchy")
	}
}

func TestCgroup2Mount(t *testing.T) {
	mounts := filepath.Join(t.TempDir(), "mounts")
	os.WriteFile(mounts, []byte("proc /proc proc rw 0 0\ncgroup2 /sys/fs/cgroup/unified cgroup2 rw 0 0\n"), 0o644)
	if got, err := cgroup2Mount(mounts); err != nil || got != "/sys/fs/cgroup/unified" {
		t.Fatalf("cgroup2Mount = %q, %v", got, err)
	}
	os.WriteFile(mounts, []byte("proc /proc proc rw 0 0\n"), 0o644)
	if _, err := cgroup2Mount(mounts); err == nil {
		t.Fatal("found cgroup2 where none is mounted")
	}
}

func TestCgroupsRefuseIDsThatLeaveTheirDirectory(t *testing.T) {
	root := fakeCgroupFS(t, "cpu memory\n")
	cg, why := detectCgroups(root, "n1")
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
	entries, _ := os.ReadDir(filepath.Join(root, "weft-n1"))
	for _, e := range entries {
		if e.IsDir() {
			t.Errorf("cgroup %s made for an invalid ID", e.Name())
		}
	}
	if cg, _ := detectCgroups(root, ".."); cg != nil {
		t.Fatalf("detectCgroups accepted node id \"..\" (cgroup %s)", cg.root)
	}
}
