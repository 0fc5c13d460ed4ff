package agent

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/weft-sched/weft/internal/containerinit"
)

// isolation is how an agent starts its containers: each through the
// container init (package containerinit, run as the weft executable) in a
// PID and mount namespace of its own, so that it sees only its own
// processes in /proc and has a /tmp of its own; or, where the kernel does
// not allow that, directly, sharing the agent's. The zero value starts
// containers directly.
type isolation struct {
	// init is the weft executable that runs `weft container-init`; ""
	// starts commands directly.
	init string
	// why says why containers start directly.
	why string
}

// namespaces are what each container gets of its own. Not the network:
// AMs reach their agent over TCP on the host's addresses.
const namespaces = syscall.CLONE_NEWPID | syscall.CLONE_NEWNS

// initStartTimeout bounds how long a start waits for the init to run the
// command (the manager waits holding its lock).
const initStartTimeout = 30 * time.Second

// detectIsolation tries once, with a probe that sets up everything a
// container gets but runs nothing, whether exe can start containers in
// namespaces of their own here. It needs root (CAP_SYS_ADMIN, which an
// agent in an unprivileged Docker container lacks).
func detectIsolation(exe string) isolation {
	if os.Geteuid() != 0 {
		return isolation{why: "the agent is not root"}
	}
	iso := isolation{init: exe}
	if err := iso.probe(); err != nil {
		return isolation{why: err.Error()}
	}
	return iso
}

// probe runs the init with a probe spec and checks that it reports a
// clean exit.
func (iso isolation) probe() error {
	p, err := iso.startInit("/", nil, nil, noCgroup, &containerinit.Spec{Probe: true})
	if err != nil {
		return err
	}
	<-p.done
	if p.exitCode == nil || *p.exitCode != 0 || p.waitErr != nil {
		return fmt.Errorf("the container init's probe ended with %s", describeExit(p))
	}
	return nil
}

// describe says, once at start, how containers run.
func (iso isolation) describe() string {
	if iso.init != "" {
		return "containers run in PID and mount namespaces of their own: each sees only its own processes in /proc and has a private /tmp and /dev/shm"
	}
	return "containers run in the agent's PID and mount namespaces: they can see every process on this host in /proc, other containers' included " +
		"(distinct uids still keep their environments and files apart), and share /tmp and /dev/shm"
}

// log says how containers run: a warning when they share the agent's
// namespaces.
func (iso isolation) log(logger hclog.Logger) {
	if iso.init != "" {
		logger.Info(iso.describe())
		return
	}
	logger.Warn(iso.describe(), "reason", iso.why, "fix", "run the agent as root with CAP_SYS_ADMIN (in Docker: --privileged, or --cap-add SYS_ADMIN and no seccomp or AppArmor profile that refuses unshare and mount)")
}

// containerSpec is what the init runs for cmd (its Path, Args and Env)
// as cred's account (nil: the agent's), keeping the container's directory
// dir and the command reachable at their paths.
func containerSpec(cmd *exec.Cmd, cred *syscall.Credential, dir string) *containerinit.Spec {
	spec := &containerinit.Spec{Path: cmd.Path, Args: cmd.Args, Env: cmd.Env}
	if abs, err := filepath.Abs(dir); err == nil {
		spec.Keep = append(spec.Keep, abs)
	}
	if filepath.IsAbs(cmd.Path) {
		spec.Keep = append(spec.Keep, cmd.Path)
	}
	if cred != nil {
		spec.Account = &containerinit.Account{UID: cred.Uid, GID: cred.Gid, Groups: cred.Groups}
	}
	return spec
}

// startInit starts iso.init as a container init that runs spec in the
// working directory wd, with stdout and stderr (nil: /dev/null). It
// returns once the command runs (or the probe is done), or with why it
// could not start.
func (iso isolation) startInit(wd string, stdout, stderr io.Writer, place cgroupPlacement, spec *containerinit.Spec) (*process, error) {
	specR, specW, err := os.Pipe()
	if err != nil {
		return nil, err
	}
	reportR, reportW, err := os.Pipe()
	if err != nil {
		specR.Close()
		specW.Close()
		return nil, err
	}
	initCmd := exec.Command(iso.init, containerinit.Command)
	initCmd.Dir, initCmd.Stdout, initCmd.Stderr = wd, stdout, stderr
	// Nothing of the container's environment reaches a process that is
	// still root: it comes in the spec.
	initCmd.Env = []string{}
	initCmd.ExtraFiles = []*os.File{specR, reportW} // containerinit.SpecFD, StatusFD
	initCmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL, Cloneflags: namespaces}
	if place.fd >= 0 {
		initCmd.SysProcAttr.UseCgroupFD = true
		initCmd.SysProcAttr.CgroupFD = place.fd
	}
	err = initCmd.Start()
	specR.Close()
	reportW.Close()
	if err != nil {
		specW.Close()
		reportR.Close()
		return nil, fmt.Errorf("start the container init: %w", err)
	}
	p := &process{cmd: initCmd, pgid: initCmd.Process.Pid, done: make(chan struct{}), report: bufio.NewReader(reportR), reportFile: reportR}
	deadline := time.Now().Add(initStartTimeout)
	specW.SetWriteDeadline(deadline)
	reportR.SetReadDeadline(deadline)
	// The init waits for its spec before it runs anything: attached now,
	// every process of the container starts inside its cgroup.
	if place.attach != nil {
		err = place.attach(p.pgid)
	}
	if err == nil {
		if err = containerinit.WriteSpec(specW, spec); err != nil {
			err = fmt.Errorf("give the container init its command: %w", err)
		}
	}
	specW.Close()
	if err == nil {
		err = containerinit.ReadStart(p.report)
	}
	if err != nil {
		syscall.Kill(-p.pgid, syscall.SIGKILL)
		initCmd.Wait()
		reportR.Close()
		return nil, err
	}
	reportR.SetReadDeadline(time.Time{})
	go p.wait()
	return p, nil
}
