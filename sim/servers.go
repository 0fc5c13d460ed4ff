package sim

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/weft-sched/weft/internal/freeport"
	wrpc "github.com/weft-sched/weft/rpc"
)

// Servers is a quorum of `weft server` processes the simulator started:
// open (no TLS, gossip key or ACLs), on loopback, with their data and logs
// in a directory of their own. Halt and Start restart them on the same
// ports and data.
type Servers struct {
	Addrs []string
	Dir   string
	exe   string
	ids   []string   // node IDs; each logs to Dir/ID.log
	args  [][]string // each server's command line
	procs []*serverProc
}

// serverProc is one running server process; done is closed once it has
// exited, with err its exit status.
type serverProc struct {
	cmd  *exec.Cmd
	done chan struct{}
	err  error
}

// ServerOptions tunes the servers StartServers starts.
type ServerOptions struct {
	// Config is HCL added to every server's -config file: top-level
	// settings such as max_completed_apps. It must hold no limits block
	// (the simulator writes one).
	Config string
	// LogLevel is the servers' log level ("": warn). Restart figures
	// need "info": they come from the servers' logs.
	LogLevel string
}

// StartServers starts n `weft server` processes from exe on 127.0.0.1
// with data and logs under dir, and waits until they have a leader. They
// take up to a million connections, and 16 GiB of requests, from one IP
// (the limits block): every simulated node and AM connects from
// 127.0.0.1. They log JSON lines, which ServerLog reads.
func StartServers(ctx context.Context, exe string, n int, dir string, opts ServerOptions) (*Servers, error) {
	if n < 1 {
		return nil, fmt.Errorf("sim: need at least one server")
	}
	if opts.LogLevel == "" {
		opts.LogLevel = "warn"
	}
	s := &Servers{Dir: dir, exe: exe}
	rpcPorts, serfPorts := make([]int, n), make([]int, n)
	for i := range n {
		var err error
		if rpcPorts[i], err = freeport.Take(); err != nil {
			return nil, err
		}
		if serfPorts[i], err = freeport.Take(); err != nil {
			return nil, err
		}
		s.Addrs = append(s.Addrs, net.JoinHostPort("127.0.0.1", strconv.Itoa(rpcPorts[i])))
	}
	// Every simulated node and AM connects from 127.0.0.1: the servers
	// must take far more connections and requests from one IP than their
	// default.
	conf := filepath.Join(dir, "sim-server.hcl")
	hcl := "limits {\n  rpc_max_conns_per_client = 1000000\n  rpc_max_handshakes_per_client = 1000000\n" +
		"  rpc_request_memory_mb = 32768\n  rpc_request_memory_per_client_mb = 16384\n}\n" + opts.Config
	if err := os.WriteFile(conf, []byte(hcl), 0o644); err != nil {
		return nil, err
	}
	for i := range n {
		id := fmt.Sprintf("sim-s%d", i+1)
		args := []string{"server", "-node-id", id, "-data-dir", filepath.Join(dir, id), "-bind", "127.0.0.1",
			"-rpc-port", strconv.Itoa(rpcPorts[i]), "-serf-port", strconv.Itoa(serfPorts[i]), "-http-port", "0",
			"-bootstrap-expect", strconv.Itoa(n), "-log-level", opts.LogLevel, "-log-json", "-config", conf}
		for j := range n {
			if j != i {
				args = append(args, "-join", net.JoinHostPort("127.0.0.1", strconv.Itoa(serfPorts[j])))
			}
		}
		s.ids, s.args = append(s.ids, id), append(s.args, args)
	}
	if err := s.start(); err != nil {
		s.Stop()
		return nil, err
	}
	if err := s.waitLeader(ctx, time.Minute); err != nil {
		s.Stop()
		return nil, err
	}
	return s, nil
}

// start starts every server process, appending to its log.
func (s *Servers) start() error {
	for i, id := range s.ids {
		log, err := os.OpenFile(s.LogFile(i), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
		if err != nil {
			return err
		}
		cmd := exec.Command(s.exe, s.args[i]...)
		cmd.Stdout, cmd.Stderr = log, log
		err = cmd.Start()
		log.Close()
		if err != nil {
			return fmt.Errorf("start %s: %w", id, err)
		}
		p := &serverProc{cmd: cmd, done: make(chan struct{})}
		go func() { p.err = cmd.Wait(); close(p.done) }()
		s.procs = append(s.procs, p)
	}
	return nil
}

// exited returns an error naming a server that has exited, with the last
// line of its log, or nil while every one runs.
func (s *Servers) exited() error {
	for i, p := range s.procs {
		select {
		case <-p.done:
			return fmt.Errorf("sim: server %s exited (%v); its log ends: %s", s.ids[i], p.err, lastLine(s.LogFile(i)))
		default:
		}
	}
	return nil
}

// lastLine returns the last non-empty line of a file, at most 500 bytes.
func lastLine(path string) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return err.Error()
	}
	lines := strings.Split(strings.TrimSpace(string(b)), "\n")
	last := lines[len(lines)-1]
	if len(last) > 500 {
		last = last[len(last)-500:]
	}
	return last
}

// LogFile is the path of server i's log.
func (s *Servers) LogFile(i int) string { return filepath.Join(s.Dir, s.ids[i]+".log") }

// IDs returns the servers' node IDs, in the order of Addrs.
func (s *Servers) IDs() []string { return s.ids }

// Halt stops every server at once with sig — SIGKILL is a crash, SIGTERM
// a graceful leave — and waits until each has exited. Start starts them
// again.
func (s *Servers) Halt(sig syscall.Signal) { s.signalAndWait(sig) }

// Start starts the servers Halt stopped, with the same command lines:
// same ports, same data directories. It returns once they are started,
// not once they have a leader.
func (s *Servers) Start() error {
	if len(s.procs) > 0 {
		return fmt.Errorf("sim: the servers are running")
	}
	return s.start()
}

// waitLeader waits until a server names a leader.
func (s *Servers) waitLeader(ctx context.Context, timeout time.Duration) error {
	c := wrpc.NewClient(s.Addrs, nil)
	defer c.Close()
	deadline := time.Now().Add(timeout)
	for {
		var resp wrpc.LeaderResponse
		callCtx, cancel := context.WithTimeout(ctx, 2*time.Second)
		err := c.Call(callCtx, "Status.Leader", &wrpc.RequestHeader{}, &resp)
		cancel()
		if err == nil && resp.ID != "" {
			return nil
		}
		if exited := s.exited(); exited != nil {
			return exited // one that cannot start will not lead
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("sim: the servers elected no leader in %s (logs in %s): %v", timeout, s.Dir, err)
		}
		select {
		case <-time.After(200 * time.Millisecond):
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// Stop stops the servers (SIGTERM, then SIGKILL after 10 s) and waits.
func (s *Servers) Stop() { s.signalAndWait(syscall.SIGTERM) }

// signalAndWait sends sig to every server, then waits for each to exit,
// killing one still running after 10 s.
func (s *Servers) signalAndWait(sig syscall.Signal) {
	for _, p := range s.procs {
		p.cmd.Process.Signal(sig)
	}
	for _, p := range s.procs {
		select {
		case <-p.done:
		case <-time.After(10 * time.Second):
			p.cmd.Process.Kill()
			<-p.done
		}
	}
	s.procs = nil
}
