package agent

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"syscall"
	"time"
)

// process is one container's OS process, in its own process group so that
// a kill reaches everything it started.
type process struct {
	cmd  *exec.Cmd
	pgid int
	done chan struct{}
	// Set when done is closed.
	exitCode *int // nil when the process was killed by a signal
	waitErr  error
}

// Container directory layout.
const (
	stdoutFile = "stdout"
	stderrFile = "stderr"
	pidFile    = "pid"
	workDir    = "work"
)

// startProcess runs argv in dir/work with the given environment, stdout and
// stderr appended to dir/stdout and dir/stderr. cgroupFD, if not negative,
// places the process in that cgroup from its first instruction.
func startProcess(dir string, argv []string, env []string, cgroupFD int) (*process, error) {
	if len(argv) == 0 {
		return nil, errors.New("empty command")
	}
	wd := filepath.Join(dir, workDir)
	if err := os.MkdirAll(wd, 0o755); err != nil {
		return nil, err
	}
	stdout, err := os.OpenFile(filepath.Join(dir, stdoutFile), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, err
	}
	defer stdout.Close()
	stderr, err := os.OpenFile(filepath.Join(dir, stderrFile), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, err
	}
	defer stderr.Close()

	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Dir = wd
	cmd.Env = env
	cmd.Stdout, cmd.Stderr = stdout, stderr
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if cgroupFD >= 0 {
		cmd.SysProcAttr.UseCgroupFD = true
		cmd.SysProcAttr.CgroupFD = cgroupFD
	}
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	p := &process{cmd: cmd, pgid: cmd.Process.Pid, done: make(chan struct{})}
	os.WriteFile(filepath.Join(dir, pidFile), []byte(strconv.Itoa(p.pgid)), 0o644)
	go p.wait()
	return p, nil
}

func (p *process) wait() {
	err := p.cmd.Wait()
	// Whatever the container left behind in its group goes with it.
	syscall.Kill(-p.pgid, syscall.SIGKILL)
	if ps := p.cmd.ProcessState; ps != nil {
		if ws, ok := ps.Sys().(syscall.WaitStatus); ok && ws.Exited() {
			code := ws.ExitStatus()
			p.exitCode = &code
		}
	}
	var exitErr *exec.ExitError
	if err != nil && !errors.As(err, &exitErr) {
		p.waitErr = err
	}
	close(p.done)
}

// kill sends SIGTERM to the process group and SIGKILL after grace if it is
// still there. It returns when the process has exited.
func (p *process) kill(grace time.Duration) {
	syscall.Kill(-p.pgid, syscall.SIGTERM)
	select {
	case <-p.done:
		return
	case <-time.After(grace):
	}
	syscall.Kill(-p.pgid, syscall.SIGKILL)
	<-p.done
}

// killLeftovers kills the process groups recorded under root by an earlier
// run of the agent (which may have been SIGKILLed and left its containers
// running), and returns how many it found alive.
func killLeftovers(root string) int {
	pids, _ := filepath.Glob(filepath.Join(root, "*", "*", pidFile))
	n := 0
	for _, f := range pids {
		b, err := os.ReadFile(f)
		if err != nil {
			continue
		}
		pgid, err := strconv.Atoi(string(b))
		if err != nil || pgid <= 1 {
			continue
		}
		if syscall.Kill(-pgid, syscall.SIGKILL) == nil {
			n++
		}
		os.Remove(f)
	}
	return n
}

func describeExit(p *process) string {
	switch {
	case p.waitErr != nil:
		return fmt.Sprintf("wait failed: %v", p.waitErr)
	case p.exitCode == nil:
		if ws, ok := p.cmd.ProcessState.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
			return "killed by signal " + ws.Signal().String()
		}
		return "killed by a signal"
	default:
		return fmt.Sprintf("exit code %d", *p.exitCode)
	}
}
