package agent

import (
	"bytes"
	"errors"
	"fmt"
	"hash/fnv"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/weft-sched/weft/scheduler"
)

// cgroups enforces container limits with cgroups when the agent can write
// them: the unified (v2) hierarchy where it has the memory and cpu
// controllers, else the v1 memory and cpu hierarchies (and freezer, for
// pausing, where mounted). A nil *cgroups means accounting only.
//
// Each agent has a directory of its own in every hierarchy it uses, named
// by its node ID and its data directory, so that agents sharing a host
// (tests, a laptop cluster) never share a container's cgroup; a container's
// cgroup is that directory's child named by the container ID.
type cgroups struct {
	version int
	root    string // v2: the agent's directory, e.g. /sys/fs/cgroup/weft-n1-1a2b3c4d
	// v1: the agent's directory in each hierarchy; freezer is "" where
	// no freezer hierarchy is mounted (pausing then signals).
	memory, cpu, freezer string
}

// cgroupMount is one cgroup mount of /proc/self/mounts.
type cgroupMount struct {
	dir         string
	v2          bool
	controllers []string // v1: the mount options naming controllers
}

// detectCgroups finds where this agent can enforce limits: a writable
// cgroup v2 hierarchy with the memory and cpu controllers (fsRoot, if
// set, is that hierarchy: tests), else writable v1 memory and cpu
// hierarchies. It creates the agent's directories and sweeps out empty
// container cgroups a previous run left. It returns nil and the reasons
// when limits cannot be enforced.
func detectCgroups(fsRoot, nodeID, dataDir string) (*cgroups, string) {
	if err := scheduler.ValidateNodeID(nodeID); err != nil {
		return nil, err.Error()
	}
	name := agentCgroupName(nodeID, dataDir)
	if fsRoot != "" {
		return detectV2(fsRoot, name)
	}
	mounts, err := cgroupMounts("/proc/self/mounts")
	if err != nil {
		return nil, err.Error()
	}
	var why []string
	for _, m := range mounts {
		if m.v2 {
			cg, reason := detectV2(m.dir, name)
			if cg != nil {
				return cg, ""
			}
			why = append(why, reason)
		}
	}
	cg, reason := detectV1(mounts, name)
	if cg != nil {
		return cg, ""
	}
	return nil, strings.Join(append(why, reason), "; ")
}

// cgroupPrefix begins every agent's directory name; tests give their
// agents one of their own, to clean up after them.
var cgroupPrefix = "weft-"

// agentCgroupName is "weft-<node>-<hash of the data directory>".
func agentCgroupName(nodeID, dataDir string) string {
	if abs, err := filepath.Abs(dataDir); err == nil {
		dataDir = abs
	}
	h := fnv.New32a()
	h.Write([]byte(dataDir))
	return fmt.Sprintf("%s%s-%08x", cgroupPrefix, nodeID, h.Sum32())
}

func detectV2(fsRoot, name string) (*cgroups, string) {
	ctrl, err := os.ReadFile(filepath.Join(fsRoot, "cgroup.controllers"))
	if err != nil {
		return nil, "no cgroup v2 controllers file at " + fsRoot
	}
	have := strings.Fields(string(ctrl))
	if !contains(have, "memory") || !contains(have, "cpu") {
		return nil, fmt.Sprintf("cgroup v2 at %s lacks the memory and cpu controllers (has %q)", fsRoot, strings.TrimSpace(string(ctrl)))
	}
	if err := os.WriteFile(filepath.Join(fsRoot, "cgroup.subtree_control"), []byte("+memory +cpu"), 0o644); err != nil {
		return nil, fmt.Sprintf("cannot enable controllers at %s: %v", fsRoot, err)
	}
	dir := filepath.Join(fsRoot, name)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Sprintf("cannot create %s: %v", dir, err)
	}
	if err := os.WriteFile(filepath.Join(dir, "cgroup.subtree_control"), []byte("+memory +cpu"), 0o644); err != nil {
		return nil, fmt.Sprintf("cannot enable controllers in %s: %v", dir, err)
	}
	cg := &cgroups{version: 2, root: dir}
	cg.sweep()
	return cg, ""
}

func detectV1(mounts []cgroupMount, name string) (*cgroups, string) {
	at := func(controller string) string {
		for _, m := range mounts {
			if !m.v2 && contains(m.controllers, controller) {
				return m.dir
			}
		}
		return ""
	}
	memory, cpu, freezer := at("memory"), at("cpu"), at("freezer")
	if memory == "" || cpu == "" {
		return nil, "no cgroup v1 memory and cpu hierarchies are mounted"
	}
	cg := &cgroups{version: 1}
	for _, h := range []struct {
		mount string
		dir   *string
	}{{memory, &cg.memory}, {cpu, &cg.cpu}, {freezer, &cg.freezer}} {
		if h.mount == "" {
			continue
		}
		dir := filepath.Join(h.mount, name)
		if err := os.MkdirAll(dir, 0o755); err != nil {
			if h.dir == &cg.freezer {
				continue // pausing signals instead
			}
			return nil, fmt.Sprintf("cannot create %s: %v", dir, err)
		}
		*h.dir = dir
	}
	cg.sweep()
	return cg, ""
}

// cgroupMounts reads the cgroup and cgroup2 mounts of a mounts file.
func cgroupMounts(mounts string) ([]cgroupMount, error) {
	b, err := os.ReadFile(mounts)
	if err != nil {
		return nil, fmt.Errorf("cannot read %s", mounts)
	}
	var out []cgroupMount
	for _, line := range bytes.Split(b, []byte("\n")) {
		f := strings.Fields(string(line))
		if len(f) < 4 {
			continue
		}
		switch f[2] {
		case "cgroup2":
			out = append(out, cgroupMount{dir: f[1], v2: true})
		case "cgroup":
			out = append(out, cgroupMount{dir: f[1], controllers: strings.Split(f[3], ",")})
		}
	}
	if len(out) == 0 {
		return nil, errors.New("no cgroup hierarchy is mounted")
	}
	return out, nil
}

// Label names the enforcement for heartbeats and `weft node status`.
func (c *cgroups) Label() string {
	if c == nil {
		return "accounted only"
	}
	return "cgroup v" + strconv.Itoa(c.version)
}

// dirs are the agent's directories, one per hierarchy it uses.
func (c *cgroups) dirs() []string {
	if c.version == 2 {
		return []string{c.root}
	}
	out := []string{c.memory, c.cpu}
	if c.freezer != "" {
		out = append(out, c.freezer)
	}
	return out
}

// create makes a container's cgroup with its limits. With v2 it returns
// an open directory file to start the process in (the caller closes it);
// with v1 it returns nil, and the process joins by attach. It refuses an
// ID that is not scheduler.ValidateID's.
func (c *cgroups) create(id string, r scheduler.Resources) (*os.File, error) {
	if err := scheduler.ValidateID("container id", id); err != nil {
		return nil, err
	}
	for _, d := range c.dirs() {
		if err := os.MkdirAll(filepath.Join(d, id), 0o755); err != nil {
			return nil, err
		}
	}
	// A vcore is one full CPU: a quota of one period per vcore.
	const period = 100000 // µs
	quota := fmt.Sprint(r.Vcores * period)
	mem := fmt.Sprint(r.MemoryMB << 20)
	write := func(dir, file, v string) error {
		if err := os.WriteFile(filepath.Join(dir, id, file), []byte(v), 0o644); err != nil {
			return fmt.Errorf("set %s: %w", file, err)
		}
		return nil
	}
	if c.version == 2 {
		if err := write(c.root, "memory.max", mem); err != nil {
			return nil, err
		}
		if err := write(c.root, "cpu.max", quota+" "+fmt.Sprint(period)); err != nil {
			return nil, err
		}
		return os.Open(filepath.Join(c.root, id))
	}
	if err := write(c.memory, "memory.limit_in_bytes", mem); err != nil {
		return nil, err
	}
	if err := write(c.cpu, "cpu.cfs_period_us", fmt.Sprint(period)); err != nil {
		return nil, err
	}
	if err := write(c.cpu, "cpu.cfs_quota_us", quota); err != nil {
		return nil, err
	}
	return nil, nil
}

// attach moves the process pid into container id's v1 cgroups (v2 places
// a process at its start instead). The caller attaches a container's first
// process before it runs the command, so every process of the container
// starts inside.
func (c *cgroups) attach(id string, pid int) error {
	if err := scheduler.ValidateID("container id", id); err != nil {
		return err
	}
	for _, d := range c.dirs() {
		if err := os.WriteFile(filepath.Join(d, id, "cgroup.procs"), []byte(strconv.Itoa(pid)), 0o644); err != nil {
			return fmt.Errorf("join the cgroup %s: %w", filepath.Join(d, id), err)
		}
	}
	return nil
}

// freeze stops (or, with stop false, lets go on) every process of a
// container's cgroup: cgroup.freeze (v2), freezer.state (v1). It fails
// where there is no freezer; the caller then signals.
func (c *cgroups) freeze(id string, stop bool) error {
	if err := scheduler.ValidateID("container id", id); err != nil {
		return err
	}
	if c.version == 2 {
		v := "0"
		if stop {
			v = "1"
		}
		return os.WriteFile(filepath.Join(c.root, id, "cgroup.freeze"), []byte(v), 0o644)
	}
	if c.freezer == "" {
		return errors.New("no freezer hierarchy")
	}
	v := "THAWED"
	if stop {
		v = "FROZEN"
	}
	return os.WriteFile(filepath.Join(c.freezer, id, "freezer.state"), []byte(v), 0o644)
}

// oomKilled reports whether the kernel killed a process of the container
// for passing its memory limit: the oom_kill count of memory.events (v2)
// or memory.oom_control (v1).
func (c *cgroups) oomKilled(id string) bool {
	if scheduler.ValidateID("container id", id) != nil {
		return false
	}
	file := filepath.Join(c.memory, id, "memory.oom_control")
	if c.version == 2 {
		file = filepath.Join(c.root, id, "memory.events")
	}
	b, err := os.ReadFile(file)
	if err != nil {
		return false
	}
	for _, line := range strings.Split(string(b), "\n") {
		if f := strings.Fields(line); len(f) == 2 && f[0] == "oom_kill" {
			n, err := strconv.Atoi(f[1])
			return err == nil && n > 0
		}
	}
	return false
}

// remove deletes a container's cgroup once its processes are gone (there
// is none for an invalid ID: create refused it).
func (c *cgroups) remove(id string) {
	if scheduler.ValidateID("container id", id) != nil {
		return
	}
	for _, d := range c.dirs() {
		os.Remove(filepath.Join(d, id))
	}
}

// sweep removes the container cgroups in the agent's directories that no
// process uses any more: those of a previous run (rmdir of a cgroup in use
// fails, and it stays).
func (c *cgroups) sweep() {
	for _, d := range c.dirs() {
		entries, _ := os.ReadDir(d)
		for _, e := range entries {
			if e.IsDir() && scheduler.ValidateID("container id", e.Name()) == nil {
				os.Remove(filepath.Join(d, e.Name()))
			}
		}
	}
}

// close removes the agent's directories once no container cgroup is left
// in them (a container still running keeps them: the next start sweeps).
func (c *cgroups) close() {
	if c == nil {
		return
	}
	c.sweep()
	for _, d := range c.dirs() {
		os.Remove(d)
	}
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}
