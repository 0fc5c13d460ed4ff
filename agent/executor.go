package agent

import (
	"bufio"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"syscall"
	"time"

	"github.com/weft-sched/weft/internal/containerinit"
)

// process is one container's OS process, in its own process group so that
// a kill reaches everything it started. Started through the container
// init (isolation.go), it is the init's process and group: the init passes
// signals on to the command and reports how the command ended.
type process struct {
	cmd  *exec.Cmd
	pgid int
	done chan struct{}
	// report, when not nil, is the init's report pipe (and reportFile
	// the pipe itself): the command's wait status arrives there.
	report     *bufio.Reader
	reportFile *os.File
	// Set when done is closed.
	status   syscall.WaitStatus // how the command ended
	exitCode *int               // nil when the command was killed by a signal
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
// stderr appended to dir/stdout and dir/stderr: through the container init
// in a PID and mount namespace of its own when iso has an init, else
// directly. place puts the process in its container's cgroup (see
// cgroupPlacement). cred, if not nil, is the account it runs as:
// the work directory and the log files are that account's (and private to
// it), while dir itself and the pid file stay the agent's, so the
// container can neither swap its log files for links to files it may not
// read nor forge the pid a restarted agent kills.
func (iso isolation) startProcess(dir string, argv []string, env []string, place cgroupPlacement, cred *syscall.Credential) (*process, error) {
	if len(argv) == 0 {
		return nil, errors.New("empty command")
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	wd := filepath.Join(dir, workDir)
	if err := makeOwnedDir(wd, cred); err != nil {
		return nil, err
	}
	stdout, err := openLog(filepath.Join(dir, stdoutFile), cred)
	if err != nil {
		return nil, err
	}
	defer stdout.Close()
	stderr, err := openLog(filepath.Join(dir, stderrFile), cred)
	if err != nil {
		return nil, err
	}
	defer stderr.Close()

	// Resolved here as before, so a command that is not there fails to
	// start either way.
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Dir = wd
	cmd.Env = env
	cmd.Stdout, cmd.Stderr = stdout, stderr
	var p *process
	if iso.init == "" {
		p, err = startDirect(cmd, place, cred)
	} else {
		if cmd.Err != nil {
			return nil, cmd.Err
		}
		p, err = iso.startInit(wd, stdout, stderr, place, containerSpec(cmd, cred, dir))
	}
	if err != nil {
		return nil, err
	}
	os.WriteFile(filepath.Join(dir, pidFile), []byte(strconv.Itoa(p.pgid)), 0o644)
	return p, nil
}

// cgroupPlacement says how a new process joins its container's cgroup:
// with fd (not negative) from its first instruction (cgroup v2, clone3),
// or by attach with its pid once it exists (cgroup v1).
type cgroupPlacement struct {
	fd     int
	attach func(pid int) error
}

// noCgroup starts a process where the agent is.
var noCgroup = cgroupPlacement{fd: -1}

// startDirect starts cmd itself, in a process group of its own. With a
// v1 placement the command runs for the moment between its start and its
// attach outside the cgroup (the container init, where there is one,
// closes that gap); a process it forks in that moment escapes the limits.
func startDirect(cmd *exec.Cmd, place cgroupPlacement, cred *syscall.Credential) (*process, error) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL, Credential: cred}
	if place.fd >= 0 {
		cmd.SysProcAttr.UseCgroupFD = true
		cmd.SysProcAttr.CgroupFD = place.fd
	}
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	p := &process{cmd: cmd, pgid: cmd.Process.Pid, done: make(chan struct{})}
	if place.attach != nil {
		if err := place.attach(p.pgid); err != nil {
			syscall.Kill(-p.pgid, syscall.SIGKILL)
			cmd.Wait()
			return nil, err
		}
	}
	go p.wait()
	return p, nil
}

// makeOwnedDir makes the directory path (its parent exists and is the
// agent's), private to cred's account, or to the agent's when cred is nil.
func makeOwnedDir(path string, cred *syscall.Credential) error {
	if err := os.Mkdir(path, 0o700); err != nil && !os.IsExist(err) {
		return err
	}
	fi, err := os.Lstat(path)
	if err != nil {
		return err
	}
	if !fi.IsDir() {
		return fmt.Errorf("%s is not a directory", path)
	}
	if cred != nil {
		if err := os.Lchown(path, int(cred.Uid), int(cred.Gid)); err != nil {
			return fmt.Errorf("give %s to uid %d: %w", path, cred.Uid, err)
		}
	}
	return nil
}

// openLog opens a container's log file for appending, private to cred's
// account (the agent's when cred is nil); it never follows a link.
func openLog(path string, cred *syscall.Credential) (*os.File, error) {
	f, err := os.OpenFile(path, os.O_CREATE|os.O_WRONLY|os.O_APPEND|syscall.O_NOFOLLOW, 0o600)
	if err != nil {
		return nil, err
	}
	if cred != nil {
		if err := f.Chown(int(cred.Uid), int(cred.Gid)); err != nil {
			f.Close()
			return nil, fmt.Errorf("give %s to uid %d: %w", path, cred.Uid, err)
		}
	}
	return f, nil
}

func (p *process) wait() {
	err := p.cmd.Wait()
	// Whatever the container left behind in its group goes with it.
	syscall.Kill(-p.pgid, syscall.SIGKILL)
	ended := false
	if ps := p.cmd.ProcessState; ps != nil {
		p.status, ended = ps.Sys().(syscall.WaitStatus)
	}
	if p.report != nil {
		// The init's own status says how the command ended only when
		// the init was killed before it could report.
		if ws, ok := containerinit.ReadExit(p.report); ok {
			p.status, ended = ws, true
		}
		p.reportFile.Close()
	}
	if ended && p.status.Exited() {
		code := p.status.ExitStatus()
		p.exitCode = &code
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
		if p.status.Signaled() {
			return "killed by signal " + p.status.Signal().String()
		}
		return "killed by a signal"
	default:
		return fmt.Sprintf("exit code %d", *p.exitCode)
	}
}
