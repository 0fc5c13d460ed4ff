package chaos

import (
	"bufio"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// Every object a run creates carries its run number N, so a later run can
// find what a crashed one left behind and leave a live one alone:
//
//	network namespaces  weftc-N-s1 … weftc-N-a4
//	bridge              weftcNbr (10.77.N.1/24, the harness's address)
//	host-side veths     wcNs1 …  (the namespace side is eth0)
//	iptables rule       FORWARD … -m comment --comment weftc-N (root namespace)
//	tmpfs mounts        source "weftc-N" (the servers' data dirs)
//	lock                /run/weftc/N.lock, flock-ed for the life of the run
const (
	prefix  = "weftc-"
	lockDir = "/run/weftc"
)

// host is one network namespace with one address on the run's bridge.
type host struct {
	name  string // s1, a3, …
	ns    string // weftc-N-s1
	veth  string // wcNs1, in the root namespace
	ip    string
	inode uint64 // of the namespace, to tell which processes run in it
}

// network is a run's bridge and namespaces.
type network struct {
	run    int
	bridge string
	hostIP string
	hosts  map[string]*host
	lock   *os.File
}

// sh runs a command and returns its combined output, failing with it.
func sh(name string, args ...string) (string, error) {
	out, err := exec.Command(name, args...).CombinedOutput()
	if err != nil {
		return string(out), fmt.Errorf("%s %s: %v: %s", name, strings.Join(args, " "), err, strings.TrimSpace(string(out)))
	}
	return string(out), nil
}

// inNS runs a command inside a namespace.
func inNS(ns string, args ...string) (string, error) {
	return sh("ip", append([]string{"netns", "exec", ns}, args...)...)
}

// checkPrerequisites says in one line what is missing to run the suite.
func checkPrerequisites() error {
	if os.Geteuid() != 0 {
		return errors.New("the chaos suite must run as root (it makes network namespaces, iptables rules and tmpfs mounts): run it with sudo or as root")
	}
	var missing []string
	for _, c := range []struct{ bin, pkg string }{{"ip", "iproute2"}, {"iptables", "iptables"}, {"mount", "mount"}, {"umount", "mount"}} {
		if _, err := exec.LookPath(c.bin); err != nil && (len(missing) == 0 || missing[len(missing)-1] != c.pkg) {
			missing = append(missing, c.pkg)
		}
	}
	if len(missing) > 0 {
		return fmt.Errorf("the chaos suite needs the ip, iptables and mount commands: apt-get install %s", strings.Join(missing, " "))
	}
	if _, err := sh("ip", "netns", "list"); err != nil {
		return fmt.Errorf("the chaos suite needs network namespaces (ip netns): %v", err)
	}
	return nil
}

// lockRun takes run n's lock without waiting; it fails if a live run holds it.
func lockRun(n int) (*os.File, error) {
	if err := os.MkdirAll(lockDir, 0o755); err != nil {
		return nil, err
	}
	f, err := os.OpenFile(filepath.Join(lockDir, fmt.Sprintf("%d.lock", n)), os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		return nil, err
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		f.Close()
		return nil, err
	}
	f.Truncate(0)
	fmt.Fprintf(f, "%d\n", os.Getpid())
	return f, nil
}

// leftovers lists the run numbers that have any object on this machine.
func leftovers() map[int]bool {
	runs := map[int]bool{}
	nsRe := regexp.MustCompile(`^` + prefix + `(\d+)-`)
	if out, err := sh("ip", "netns", "list"); err == nil {
		for _, line := range strings.Split(out, "\n") {
			if m := nsRe.FindStringSubmatch(strings.TrimSpace(line)); m != nil {
				n, _ := strconv.Atoi(m[1])
				runs[n] = true
			}
		}
	}
	linkRe := regexp.MustCompile(`^(?:weftc(\d+)br|wc(\d+)[sa]\d+)\b`)
	if out, err := sh("ip", "-o", "link", "show"); err == nil {
		for _, line := range strings.Split(out, "\n") {
			f := strings.Fields(line)
			if len(f) < 2 {
				continue
			}
			name := strings.SplitN(strings.TrimSuffix(f[1], ":"), "@", 2)[0]
			if m := linkRe.FindStringSubmatch(name); m != nil {
				n, _ := strconv.Atoi(m[1] + m[2])
				runs[n] = true
			}
		}
	}
	ruleRe := regexp.MustCompile(`--comment "?` + prefix + `(\d+)"?`)
	if out, err := sh("iptables", "-w", "-S", "FORWARD"); err == nil {
		for _, m := range ruleRe.FindAllStringSubmatch(out, -1) {
			n, _ := strconv.Atoi(m[1])
			runs[n] = true
		}
	}
	for _, m := range mountsOf(-1) {
		runs[m.run] = true
	}
	if ents, err := os.ReadDir(lockDir); err == nil {
		for _, e := range ents {
			if n, err := strconv.Atoi(strings.TrimSuffix(e.Name(), ".lock")); err == nil {
				runs[n] = true
			}
		}
	}
	return runs
}

type mount struct {
	run  int
	path string
}

// mountsOf lists the tmpfs mounts of run n (every run's if n < 0), deepest first.
func mountsOf(n int) []mount {
	f, err := os.Open("/proc/self/mounts")
	if err != nil {
		return nil
	}
	defer f.Close()
	var out []mount
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) < 2 || !strings.HasPrefix(fields[0], prefix) {
			continue
		}
		run, err := strconv.Atoi(strings.TrimPrefix(fields[0], prefix))
		if err != nil || (n >= 0 && run != n) {
			continue
		}
		out = append(out, mount{run: run, path: unescapeMount(fields[1])})
	}
	sort.Slice(out, func(i, j int) bool { return len(out[i].path) > len(out[j].path) })
	return out
}

func unescapeMount(s string) string {
	r := strings.NewReplacer(`\040`, " ", `\011`, "\t", `\012`, "\n", `\134`, `\`)
	return r.Replace(s)
}

// cleanStale removes everything of runs that no live process holds the lock
// of, and returns what it cleaned.
func cleanStale() []string {
	var cleaned []string
	for n := range leftovers() {
		lock, err := lockRun(n)
		if err != nil {
			continue // a live run
		}
		if errs := removeRun(n); len(errs) > 0 {
			cleaned = append(cleaned, fmt.Sprintf("run %d (incompletely: %v)", n, errs))
		} else {
			cleaned = append(cleaned, fmt.Sprintf("run %d", n))
		}
		os.Remove(lock.Name())
		lock.Close()
	}
	sort.Strings(cleaned)
	return cleaned
}

// removeRun kills every process in run n's namespaces and removes its
// namespaces, links, iptables rule and mounts. It returns what failed.
func removeRun(n int) []error {
	var errs []error
	nsPrefix := fmt.Sprintf("%s%d-", prefix, n)
	var names []string
	if out, err := sh("ip", "netns", "list"); err == nil {
		for _, line := range strings.Split(out, "\n") {
			if f := strings.Fields(line); len(f) > 0 && strings.HasPrefix(f[0], nsPrefix) {
				names = append(names, f[0])
			}
		}
	}
	for _, ns := range names {
		killNamespace(ns)
	}
	for _, ns := range names {
		if _, err := sh("ip", "netns", "del", ns); err != nil {
			errs = append(errs, err)
		}
	}
	if out, err := sh("ip", "-o", "link", "show"); err == nil {
		re := regexp.MustCompile(fmt.Sprintf(`^(?:weftc%dbr|wc%d[sa]\d+)$`, n, n))
		for _, line := range strings.Split(out, "\n") {
			f := strings.Fields(line)
			if len(f) < 2 {
				continue
			}
			name := strings.SplitN(strings.TrimSuffix(f[1], ":"), "@", 2)[0]
			if re.MatchString(name) {
				// A veth goes with its namespace, a moment later.
				if out, err := sh("ip", "link", "del", name); err != nil && !strings.Contains(out, "Cannot find device") {
					errs = append(errs, err)
				}
			}
		}
	}
	if out, err := sh("iptables", "-w", "-S", "FORWARD"); err == nil {
		tag := fmt.Sprintf("%s%d", prefix, n)
		for _, line := range strings.Split(out, "\n") {
			if !strings.HasPrefix(line, "-A ") || !strings.Contains(line, "--comment "+tag+" ") && !strings.Contains(line, `--comment "`+tag+`"`) {
				continue
			}
			args := append([]string{"-w", "-D"}, strings.Fields(strings.TrimPrefix(line, "-A "))...)
			for i := range args {
				args[i] = strings.Trim(args[i], `"`)
			}
			if _, err := sh("iptables", args...); err != nil {
				errs = append(errs, err)
			}
		}
	}
	for _, m := range mountsOf(n) {
		if _, err := sh("umount", m.path); err != nil {
			if _, err := sh("umount", "-l", m.path); err != nil {
				errs = append(errs, err)
			}
		}
	}
	return errs
}

// killNamespace SIGKILLs every process in a namespace (stopped ones too)
// until none is left.
func killNamespace(ns string) {
	for attempt := 0; attempt < 50; attempt++ {
		out, err := sh("ip", "netns", "pids", ns)
		if err != nil || strings.TrimSpace(out) == "" {
			return
		}
		for _, f := range strings.Fields(out) {
			if pid, err := strconv.Atoi(f); err == nil {
				syscall.Kill(pid, syscall.SIGKILL)
			}
		}
		time.Sleep(20 * time.Millisecond) // let the kernel reap them before looking again
	}
}

// pickRun chooses a free run number and takes its lock.
func pickRun(start int) (int, *os.File, error) {
	busy := leftovers()
	for i := 0; i < 250; i++ {
		n := (start+i)%250 + 1
		if busy[n] {
			continue
		}
		if f, err := lockRun(n); err == nil {
			return n, f, nil
		}
	}
	return 0, nil, errors.New("no free run number: every weftc-N from 1 to 250 is in use")
}

// setupNetwork makes the bridge, one namespace per host and the root
// namespace's FORWARD rule that lets bridged traffic through (this machine
// has br_netfilter loaded and a FORWARD policy of DROP).
func setupNetwork(n int, lock *os.File, names []string, octet map[string]int) (*network, error) {
	nw := &network{run: n, bridge: fmt.Sprintf("weftc%dbr", n), hostIP: fmt.Sprintf("10.77.%d.1", n), hosts: map[string]*host{}, lock: lock}
	tag := fmt.Sprintf("%s%d", prefix, n)
	steps := [][]string{
		{"ip", "link", "add", nw.bridge, "type", "bridge"},
		{"ip", "addr", "add", nw.hostIP + "/24", "dev", nw.bridge},
		{"ip", "link", "set", nw.bridge, "up"},
		{"iptables", "-w", "-I", "FORWARD", "1", "-i", nw.bridge, "-o", nw.bridge, "-m", "comment", "--comment", tag, "-j", "ACCEPT"},
	}
	for _, name := range names {
		h := &host{name: name, ns: fmt.Sprintf("%s%d-%s", prefix, n, name), veth: fmt.Sprintf("wc%d%s", n, name),
			ip: fmt.Sprintf("10.77.%d.%d", n, octet[name])}
		nw.hosts[name] = h
		steps = append(steps,
			[]string{"ip", "netns", "add", h.ns},
			[]string{"ip", "link", "add", h.veth, "type", "veth", "peer", "name", "eth0", "netns", h.ns},
			[]string{"ip", "link", "set", h.veth, "master", nw.bridge, "up"},
			[]string{"ip", "-n", h.ns, "link", "set", "lo", "up"},
			[]string{"ip", "-n", h.ns, "addr", "add", h.ip + "/24", "dev", "eth0"},
			[]string{"ip", "-n", h.ns, "link", "set", "eth0", "up"},
		)
	}
	for _, s := range steps {
		if _, err := sh(s[0], s[1:]...); err != nil {
			return nw, err
		}
	}
	for _, h := range nw.hosts {
		var st syscall.Stat_t
		if err := syscall.Stat("/run/netns/"+h.ns, &st); err != nil {
			return nw, fmt.Errorf("stat namespace %s: %v", h.ns, err)
		}
		h.inode = st.Ino
	}
	return nw, nil
}

// teardown removes everything of the run and releases its lock.
func (nw *network) teardown() []error {
	errs := removeRun(nw.run)
	if nw.lock != nil {
		os.Remove(nw.lock.Name())
		nw.lock.Close()
		nw.lock = nil
	}
	return errs
}

// The partitions. Rules go into the namespace's own filter table (nothing
// else uses it), so healing is flushing it.

// dropPeers drops, in h's namespace, what h receives from (in) and/or
// sends to (out) the given addresses.
func dropPeers(h *host, peers []string, in, out bool) error {
	for _, p := range peers {
		if in {
			if _, err := inNS(h.ns, "iptables", "-w", "-A", "INPUT", "-s", p, "-j", "DROP"); err != nil {
				return err
			}
		}
		if out {
			if _, err := inNS(h.ns, "iptables", "-w", "-A", "OUTPUT", "-d", p, "-j", "DROP"); err != nil {
				return err
			}
		}
	}
	return nil
}

// isolate drops everything h sends or receives on its link.
func isolate(h *host) error {
	if _, err := inNS(h.ns, "iptables", "-w", "-A", "INPUT", "-i", "eth0", "-j", "DROP"); err != nil {
		return err
	}
	_, err := inNS(h.ns, "iptables", "-w", "-A", "OUTPUT", "-o", "eth0", "-j", "DROP")
	return err
}

// heal removes every rule in h's namespace.
func heal(h *host) error {
	if _, err := inNS(h.ns, "iptables", "-w", "-F", "INPUT"); err != nil {
		return err
	}
	_, err := inNS(h.ns, "iptables", "-w", "-F", "OUTPUT")
	return err
}
