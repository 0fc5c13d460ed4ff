package chaos

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
)

// The cluster under test: three servers and four agents, each in its own
// namespace, on the default ports of its own address.
var (
	serverNames = []string{"s1", "s2", "s3"}
	agentNames  = []string{"a1", "a2", "a3", "a4"}
	hostOctet   = map[string]int{"s1": 11, "s2": 12, "s3": 13, "a1": 21, "a2": 22, "a3": 23, "a4": 24}
)

const (
	rpcPort  = 8030
	serfPort = 8031
	// agentMemoryMB and agentVcores are every agent's -resources: small, so
	// that a few apps contend for them.
	agentMemoryMB = 1024
	agentVcores   = 3
	// serverDiskMB is the size of the tmpfs each server's data dir lives on.
	serverDiskMB = 256
)

// process is one weft server or agent, restartable on the same data dir.
type process struct {
	name    string
	host    *host
	args    []string
	logPath string
	dataDir string
	bin     string
	onExit  func(p *process, err error) // an exit the harness did not cause

	mu       sync.Mutex
	cmd      *exec.Cmd
	done     chan struct{}
	expected bool // the harness killed it
	stopped  bool // SIGSTOP-ed
	starts   int
}

// childEnv is the harness's environment without weft's own variables, so
// no process inherits the harness's WEFT_ADDR.
func childEnv() []string {
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "WEFT_") {
			env = append(env, kv)
		}
	}
	return env
}

// start runs the process in its namespace (ip netns exec execs the weft
// binary, so the child's pid is weft's). Its output is appended to its log,
// after a line that says which start this is.
func (p *process) start() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.cmd != nil && !p.exitedLocked() {
		return fmt.Errorf("%s is already running", p.name)
	}
	f, err := os.OpenFile(p.logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return err
	}
	p.starts++
	fmt.Fprintf(f, "==== chaos harness: start #%d of %s at %s: weft %s\n", p.starts, p.name, time.Now().UTC().Format(time.RFC3339Nano), strings.Join(p.args, " "))
	cmd := exec.Command("ip", append([]string{"netns", "exec", p.host.ns, p.bin}, p.args...)...)
	cmd.Stdout, cmd.Stderr = f, f
	cmd.Env = childEnv()
	// Its own process group keeps a Ctrl-C at the terminal away from it
	// (the harness tears down itself); the parent-death signal takes it
	// down with a harness that dies without tearing down.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		f.Close()
		return fmt.Errorf("start %s: %v", p.name, err)
	}
	done := make(chan struct{})
	p.cmd, p.done, p.expected, p.stopped = cmd, done, false, false
	go func() {
		err := cmd.Wait()
		f.Close()
		p.mu.Lock()
		expected := p.expected
		p.mu.Unlock()
		close(done)
		if !expected && p.onExit != nil {
			p.onExit(p, err)
		}
	}()
	return nil
}

func (p *process) exitedLocked() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

// running reports whether the process is alive (stopped counts as alive).
func (p *process) running() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.cmd != nil && !p.exitedLocked()
}

func (p *process) pid() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.cmd == nil || p.cmd.Process == nil {
		return 0
	}
	return p.cmd.Process.Pid
}

// kill SIGKILLs the process and waits until it is gone.
func (p *process) kill() {
	p.mu.Lock()
	if p.cmd == nil || p.exitedLocked() {
		p.mu.Unlock()
		return
	}
	p.expected = true
	p.cmd.Process.Signal(syscall.SIGKILL)
	done := p.done
	p.mu.Unlock()
	<-done
}

// signal sends SIGSTOP or SIGCONT.
func (p *process) signal(sig syscall.Signal) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.cmd == nil || p.exitedLocked() {
		return fmt.Errorf("%s is not running", p.name)
	}
	if err := p.cmd.Process.Signal(sig); err != nil {
		return err
	}
	p.stopped = sig == syscall.SIGSTOP
	return nil
}

// cluster is the run's processes.
type cluster struct {
	nw      *network
	dir     string
	bin     string
	servers map[string]*process
	agents  map[string]*process
}

func (c *cluster) all() []*process {
	var out []*process
	for _, n := range serverNames {
		out = append(out, c.servers[n])
	}
	for _, n := range agentNames {
		out = append(out, c.agents[n])
	}
	return out
}

func (c *cluster) proc(name string) *process {
	if p, ok := c.servers[name]; ok {
		return p
	}
	return c.agents[name]
}

// rpcAddr is a server's RPC address.
func (c *cluster) rpcAddr(server string) string {
	return c.nw.hosts[server].ip + ":" + strconv.Itoa(rpcPort)
}

// serverAddrs lists every server's RPC address, in server order.
func (c *cluster) serverAddrs() []string {
	var out []string
	for _, n := range serverNames {
		out = append(out, c.rpcAddr(n))
	}
	return out
}

func (c *cluster) serverByAddr(addr string) string {
	for _, n := range serverNames {
		if c.rpcAddr(n) == addr || strings.HasPrefix(addr, c.nw.hosts[n].ip+":") {
			return n
		}
	}
	return ""
}

// newCluster lays out the processes: each server's data dir is a tmpfs of
// its own (so a full disk can be made on one), each agent's a directory.
func newCluster(nw *network, dir, bin string, onExit func(*process, error)) (*cluster, error) {
	c := &cluster{nw: nw, dir: dir, bin: bin, servers: map[string]*process{}, agents: map[string]*process{}}
	var joins []string
	for _, n := range serverNames {
		joins = append(joins, "-join", nw.hosts[n].ip+":"+strconv.Itoa(serfPort))
	}
	for _, n := range serverNames {
		data := filepath.Join(dir, n, "data")
		if err := os.MkdirAll(data, 0o755); err != nil {
			return nil, err
		}
		if _, err := sh("mount", "-t", "tmpfs", "-o", fmt.Sprintf("size=%dm,mode=0755", serverDiskMB), fmt.Sprintf("%s%d", prefix, nw.run), data); err != nil {
			return nil, err
		}
		args := append([]string{"server", "-insecure", "-node-id", n, "-bind", nw.hosts[n].ip, "-data-dir", data, "-bootstrap-expect", "3"}, joins...)
		c.servers[n] = &process{name: n, host: nw.hosts[n], args: args, dataDir: data, bin: bin,
			logPath: filepath.Join(dir, n+".log"), onExit: onExit}
	}
	for _, n := range agentNames {
		data := filepath.Join(dir, n, "data")
		if err := os.MkdirAll(data, 0o755); err != nil {
			return nil, err
		}
		// -allow-root: the run is root's (namespaces need it), and so are
		// its directories and the binary its AM containers run.
		args := append([]string{"agent", "-insecure", "-node-id", n, "-bind", nw.hosts[n].ip, "-data-dir", data,
			"-resources", fmt.Sprintf("memory_mb=%d,vcores=%d", agentMemoryMB, agentVcores), "-allow-root"}, joins...)
		c.agents[n] = &process{name: n, host: nw.hosts[n], args: args, dataDir: data, bin: bin,
			logPath: filepath.Join(dir, n+".log"), onExit: onExit}
	}
	return c, nil
}

// stopAll kills every process (continuing stopped ones first, so none is
// left frozen holding a port), then anything else left in the namespaces.
func (c *cluster) stopAll() {
	for _, p := range c.all() {
		p.mu.Lock()
		stopped := p.stopped && p.cmd != nil && !p.exitedLocked()
		p.mu.Unlock()
		if stopped {
			p.signal(syscall.SIGCONT)
		}
		p.kill()
	}
	for _, h := range c.nw.hosts {
		killNamespace(h.ns)
	}
}

// saveServerData copies each server's tmpfs data dir next to its mount
// point, so a failed run keeps it after the tmpfs is unmounted.
func (c *cluster) saveServerData() {
	for _, n := range serverNames {
		p := c.servers[n]
		dst := filepath.Join(c.dir, n, "data-saved")
		if _, err := sh("cp", "-a", p.dataDir, dst); err != nil {
			fmt.Fprintf(os.Stderr, "chaos: keep %s's data dir: %v\n", n, err)
		}
	}
}

// fillDisk writes a file into a server's data dir until its tmpfs is full.
func fillDisk(p *process) (string, error) {
	path := filepath.Join(p.dataDir, "chaos-fill")
	f, err := os.OpenFile(path, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, 0o644)
	if err != nil {
		return path, err
	}
	defer f.Close()
	buf := make([]byte, 1<<20)
	for {
		if _, err := f.Write(buf); err != nil {
			if errors.Is(err, syscall.ENOSPC) {
				return path, nil
			}
			return path, err
		}
	}
}
