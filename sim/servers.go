package sim

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"syscall"
	"time"

	wrpc "github.com/weft-sched/weft/rpc"
)

// Servers is a quorum of `weft server` processes the simulator started:
// open (no TLS, gossip key or ACLs), on loopback, with their data and logs
// in a directory of their own.
type Servers struct {
	Addrs []string
	Dir   string
	cmds  []*exec.Cmd
}

// StartServers starts n `weft server` processes from exe on 127.0.0.1
// with data and logs under dir, and waits until they have a leader. They
// take up to a million connections from one IP (limits
// rpc_max_conns_per_client): every simulated node and AM connects from
// 127.0.0.1.
func StartServers(ctx context.Context, exe string, n int, dir string) (*Servers, error) {
	if n < 1 {
		return nil, fmt.Errorf("sim: need at least one server")
	}
	s := &Servers{Dir: dir}
	rpcPorts, serfPorts := make([]int, n), make([]int, n)
	for i := range n {
		var err error
		if rpcPorts[i], err = freePort(); err != nil {
			return nil, err
		}
		if serfPorts[i], err = freePort(); err != nil {
			return nil, err
		}
		s.Addrs = append(s.Addrs, net.JoinHostPort("127.0.0.1", strconv.Itoa(rpcPorts[i])))
	}
	// Every simulated node and AM connects from 127.0.0.1: the servers
	// must take far more connections from one IP than their default.
	conf := filepath.Join(dir, "sim-server.hcl")
	if err := os.WriteFile(conf, []byte("limits {\n  rpc_max_conns_per_client = 1000000\n}\n"), 0o644); err != nil {
		return nil, err
	}
	for i := range n {
		id := fmt.Sprintf("sim-s%d", i+1)
		args := []string{"server", "-node-id", id, "-data-dir", filepath.Join(dir, id), "-bind", "127.0.0.1",
			"-rpc-port", strconv.Itoa(rpcPorts[i]), "-serf-port", strconv.Itoa(serfPorts[i]), "-http-port", "0",
			"-bootstrap-expect", strconv.Itoa(n), "-log-level", "warn", "-config", conf}
		for j := range n {
			if j != i {
				args = append(args, "-join", net.JoinHostPort("127.0.0.1", strconv.Itoa(serfPorts[j])))
			}
		}
		log, err := os.Create(filepath.Join(dir, id+".log"))
		if err != nil {
			s.Stop()
			return nil, err
		}
		cmd := exec.Command(exe, args...)
		cmd.Stdout, cmd.Stderr = log, log
		if err := cmd.Start(); err != nil {
			log.Close()
			s.Stop()
			return nil, fmt.Errorf("start %s: %w", id, err)
		}
		log.Close()
		s.cmds = append(s.cmds, cmd)
	}
	if err := s.waitLeader(ctx, time.Minute); err != nil {
		s.Stop()
		return nil, err
	}
	return s, nil
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
func (s *Servers) Stop() {
	for _, c := range s.cmds {
		c.Process.Signal(syscall.SIGTERM)
	}
	for _, c := range s.cmds {
		done := make(chan struct{})
		go func() { c.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			c.Process.Kill()
			<-done
		}
	}
	s.cmds = nil
}

// freePort returns a port free for TCP and UDP on 127.0.0.1.
func freePort() (int, error) {
	for range 50 {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return 0, err
		}
		port := ln.Addr().(*net.TCPAddr).Port
		u, err := net.ListenPacket("udp", net.JoinHostPort("127.0.0.1", strconv.Itoa(port)))
		ln.Close()
		if err == nil {
			u.Close()
			return port, nil
		}
	}
	return 0, fmt.Errorf("sim: no free port")
}
