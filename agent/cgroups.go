package agent

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/weft-sched/weft/scheduler"
)

// cgroups enforces container limits with cgroups v2 when the agent can
// write them. A nil *cgroups means accounting only.
type cgroups struct {
	root string // the agent's own cgroup directory, e.g. /sys/fs/cgroup/weft-n1
}

// detectCgroups looks for a writable cgroup v2 hierarchy under fsRoot (the
// cgroup2 mount) with the memory and cpu controllers, and creates the
// agent's directory there. It returns nil and the reason when limits cannot
// be enforced.
func detectCgroups(fsRoot, nodeID string) (*cgroups, string) {
	if fsRoot == "" {
		var err error
		if fsRoot, err = cgroup2Mount("/proc/self/mounts"); err != nil {
			return nil, err.Error()
		}
	}
	ctrl, err := os.ReadFile(filepath.Join(fsRoot, "cgroup.controllers"))
	if err != nil {
		return nil, "no cgroup v2 controllers file"
	}
	have := strings.Fields(string(ctrl))
	if !contains(have, "memory") || !contains(have, "cpu") {
		return nil, fmt.Sprintf("cgroup v2 at %s lacks the memory and cpu controllers (has %q)", fsRoot, strings.TrimSpace(string(ctrl)))
	}
	if err := os.WriteFile(filepath.Join(fsRoot, "cgroup.subtree_control"), []byte("+memory +cpu"), 0o644); err != nil {
		return nil, fmt.Sprintf("cannot enable controllers at %s: %v", fsRoot, err)
	}
	if err := scheduler.ValidateNodeID(nodeID); err != nil {
		return nil, err.Error()
	}
	dir := filepath.Join(fsRoot, "weft-"+nodeID)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Sprintf("cannot create %s: %v", dir, err)
	}
	if err := os.WriteFile(filepath.Join(dir, "cgroup.subtree_control"), []byte("+memory +cpu"), 0o644); err != nil {
		return nil, fmt.Sprintf("cannot enable controllers in %s: %v", dir, err)
	}
	return &cgroups{root: dir}, ""
}

func cgroup2Mount(mounts string) (string, error) {
	b, err := os.ReadFile(mounts)
	if err != nil {
		return "", fmt.Errorf("cannot read %s", mounts)
	}
	for _, line := range bytes.Split(b, []byte("\n")) {
		f := strings.Fields(string(line))
		if len(f) >= 3 && f[2] == "cgroup2" {
			return f[1], nil
		}
	}
	return "", errors.New("no cgroup v2 hierarchy is mounted")
}

// create makes a container's cgroup with its limits and returns an open
// directory file to start the process in (the caller closes it). It
// refuses an ID that is not scheduler.ValidateID's.
func (c *cgroups) create(id string, r scheduler.Resources) (*os.File, error) {
	if err := scheduler.ValidateID("container id", id); err != nil {
		return nil, err
	}
	dir := filepath.Join(c.root, id)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	if err := os.WriteFile(filepath.Join(dir, "memory.max"), []byte(fmt.Sprint(r.MemoryMB<<20)), 0o644); err != nil {
		return nil, fmt.Errorf("set memory.max: %w", err)
	}
	// cpu.max: quota and period in µs; a vcore is one full CPU.
	if err := os.WriteFile(filepath.Join(dir, "cpu.max"), []byte(fmt.Sprintf("%d 100000", r.Vcores*100000)), 0o644); err != nil {
		return nil, fmt.Errorf("set cpu.max: %w", err)
	}
	return os.Open(dir)
}

// freeze stops (or, with stop false, lets go on) every process of a
// container's cgroup (cgroup.freeze).
func (c *cgroups) freeze(id string, stop bool) error {
	if err := scheduler.ValidateID("container id", id); err != nil {
		return err
	}
	v := "0"
	if stop {
		v = "1"
	}
	return os.WriteFile(filepath.Join(c.root, id, "cgroup.freeze"), []byte(v), 0o644)
}

// remove deletes a container's cgroup once its processes are gone (there
// is none for an invalid ID: create refused it).
func (c *cgroups) remove(id string) {
	if scheduler.ValidateID("container id", id) == nil {
		os.Remove(filepath.Join(c.root, id))
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
