package containerinit

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

// PrivateDirs are the directories every container gets a fresh, empty
// tmpfs on, of at most PrivateDirBytes each. Their files live in memory,
// are charged to the container's memory cgroup where the agent enforces
// one, and are freed by the kernel when the container's last process ends,
// so nothing a container leaves there reaches a later container, even one
// that runs under the same uid.
var PrivateDirs = []string{"/tmp", "/dev/shm"}

// PrivateDirBytes bounds each private directory.
const PrivateDirBytes = 1 << 30

// checkNamespaces refuses to touch any mount unless this process is PID 1
// of its PID namespace and has a mount namespace other than its parent's
// (the agent's): run by hand, or by a start that did not get its
// namespaces, Main would otherwise remount the host's /proc and /tmp.
func checkNamespaces() error {
	if os.Getpid() != 1 {
		return errors.New("not PID 1 of a PID namespace of its own")
	}
	// /proc is still the one the init inherited, which names processes
	// as the agent's PID namespace does: there the init has a parent.
	status, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return fmt.Errorf("read the init's status: %w", err)
	}
	parent := ""
	for _, line := range strings.Split(string(status), "\n") {
		if f := strings.Fields(line); len(f) == 2 && f[0] == "PPid:" {
			parent = f[1]
		}
	}
	self, err := os.Readlink("/proc/self/ns/mnt")
	if err != nil {
		return fmt.Errorf("read the mount namespace: %w", err)
	}
	outer, err := os.Readlink("/proc/" + parent + "/ns/mnt")
	if err != nil {
		return fmt.Errorf("read the agent's mount namespace: %w", err)
	}
	if self == outer {
		return errors.New("not in a mount namespace of its own")
	}
	return nil
}

// setUpMounts makes every mount in the namespace private (nothing mounted
// here reaches the host, nothing mounted there later reaches here), mounts
// a proc of the new PID namespace on /proc, and a fresh tmpfs on each of
// PrivateDirs. What keep names under a private directory is bound back at
// its path, and the working directory is entered again, so that a
// container whose own directory is under /tmp still finds it.
func setUpMounts(keep []string) error {
	if err := unix.Mount("", "/", "", unix.MS_REC|unix.MS_PRIVATE, ""); err != nil {
		return fmt.Errorf("make mounts private: %w", err)
	}
	wd, err := os.Getwd()
	if err != nil {
		return fmt.Errorf("find the working directory: %w", err)
	}
	kept, err := openKept(append([]string{wd}, keep...))
	if err != nil {
		return err
	}
	defer func() {
		for _, k := range kept {
			unix.Close(k.fd)
		}
	}()
	if err := unix.Mount("proc", "/proc", "proc", unix.MS_NOSUID|unix.MS_NODEV|unix.MS_NOEXEC, ""); err != nil {
		return fmt.Errorf("mount /proc: %w", err)
	}
	for _, dir := range PrivateDirs {
		if fi, err := os.Lstat(dir); err != nil || !fi.IsDir() {
			continue // nothing to hide
		}
		opts := "mode=1777,size=" + strconv.Itoa(PrivateDirBytes)
		if err := unix.Mount("tmpfs", dir, "tmpfs", unix.MS_NOSUID|unix.MS_NODEV, opts); err != nil {
			return fmt.Errorf("mount a private %s: %w", dir, err)
		}
	}
	for _, k := range kept {
		if err := k.bind(); err != nil {
			return err
		}
	}
	if err := os.Chdir(wd); err != nil {
		return fmt.Errorf("enter %s again: %w", wd, err)
	}
	return nil
}

// keptPath is a path under a private directory, held open (O_PATH) before
// the directory is replaced, to be bound back at its place.
type keptPath struct {
	path string // resolved, absolute
	fd   int
	dir  bool
}

// openKept resolves each path and opens those that lie under one of
// PrivateDirs, but not under another kept directory. Paths that do not
// exist or lie elsewhere need nothing.
func openKept(paths []string) ([]keptPath, error) {
	var resolved []string
	for _, p := range paths {
		if !filepath.IsAbs(p) {
			continue
		}
		if real, err := filepath.EvalSymlinks(p); err == nil && underPrivateDir(real) {
			resolved = append(resolved, real)
		}
	}
	// Parents first, so that what lies inside a kept directory comes with it.
	sort.Slice(resolved, func(i, j int) bool { return len(resolved[i]) < len(resolved[j]) })
	var kept []keptPath
	for _, real := range resolved {
		if slices.ContainsFunc(kept, func(k keptPath) bool { return real == k.path || k.dir && strings.HasPrefix(real, k.path+"/") }) {
			continue
		}
		fd, err := unix.Open(real, unix.O_PATH|unix.O_CLOEXEC|unix.O_NOFOLLOW, 0)
		if err != nil {
			return nil, fmt.Errorf("open %s: %w", real, err)
		}
		var st unix.Stat_t
		if err := unix.Fstat(fd, &st); err != nil {
			unix.Close(fd)
			return nil, fmt.Errorf("stat %s: %w", real, err)
		}
		kept = append(kept, keptPath{path: real, fd: fd, dir: st.Mode&unix.S_IFMT == unix.S_IFDIR})
	}
	return kept, nil
}

func underPrivateDir(path string) bool {
	for _, dir := range PrivateDirs {
		if strings.HasPrefix(path, dir+"/") {
			return true
		}
	}
	return false
}

// bind makes k's path on the fresh tmpfs (its parents root's, 0755, as
// the host's usually are) and binds what it named there.
func (k keptPath) bind() error {
	if err := os.MkdirAll(filepath.Dir(k.path), 0o755); err != nil {
		return fmt.Errorf("keep %s: %w", k.path, err)
	}
	if k.dir {
		if err := os.Mkdir(k.path, 0o755); err != nil && !os.IsExist(err) {
			return fmt.Errorf("keep %s: %w", k.path, err)
		}
	} else if f, err := os.OpenFile(k.path, os.O_CREATE|os.O_RDONLY, 0o644); err != nil {
		return fmt.Errorf("keep %s: %w", k.path, err)
	} else {
		f.Close()
	}
	source := "/proc/self/fd/" + strconv.Itoa(k.fd)
	if err := unix.Mount(source, k.path, "", unix.MS_BIND, ""); err != nil {
		return fmt.Errorf("keep %s: %w", k.path, err)
	}
	return nil
}
