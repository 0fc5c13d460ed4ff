package containerinit

import (
	"bufio"
	"errors"
	"fmt"
	"math"
	"os"
	"os/signal"
	"runtime"
	"strconv"
	"syscall"

	"golang.org/x/sys/unix"
)

// forwarded are the signals the init passes on to the command's process
// group. An agent stops a container with SIGTERM to the init's group: a
// PID 1 that did not pass it on would ignore it, and every graceful stop
// would wait out the kill grace.
var forwarded = []os.Signal{syscall.SIGTERM, syscall.SIGINT, syscall.SIGHUP, syscall.SIGUSR1, syscall.SIGUSR2, syscall.SIGQUIT}

// Main is `weft container-init`: it reads its Spec on SpecFD, sets up the
// container's namespaces, runs the command and returns the init's exit
// code once the command has ended (the command's code, or 128 plus the
// signal that killed it). The agent reads how the command ended on
// StatusFD, not from this code.
func Main() int {
	// no_new_privs and the parent-death signal belong to a thread; the
	// command is forked from this one.
	runtime.LockOSThread()
	status := os.NewFile(StatusFD, "status")
	specFile := os.NewFile(SpecFD, "spec")
	if err := checkFDs(); err != nil {
		fmt.Fprintf(os.Stderr, "weft %s: %v; it is the first process of a container, started by a weft agent, not a command to run by hand\n", Command, err)
		return 2
	}
	code, err := run(specFile, status)
	if err != nil {
		writeReport(status, reportFailed, err.Error())
		return 1
	}
	return code
}

// checkFDs makes sure the agent's pipes are there: without them, these
// descriptors may be the Go runtime's own.
func checkFDs() error {
	for _, fd := range []int{SpecFD, StatusFD} {
		var st unix.Stat_t
		if err := unix.Fstat(fd, &st); err != nil || st.Mode&unix.S_IFMT != unix.S_IFIFO {
			return fmt.Errorf("file descriptor %d is not a pipe from an agent", fd)
		}
	}
	return nil
}

// closeOnExec keeps every file but stdin, stdout and stderr from the
// command: the report pipe, and whatever the agent itself inherited.
func closeOnExec() error {
	err := unix.CloseRange(3, math.MaxUint32, unix.CLOSE_RANGE_CLOEXEC)
	if err == nil {
		return nil
	}
	// Kernels before 5.11.
	fds, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		return fmt.Errorf("list open files: %w", err)
	}
	for _, e := range fds {
		if fd, err := strconv.Atoi(e.Name()); err == nil && fd > 2 {
			syscall.CloseOnExec(fd)
		}
	}
	return nil
}

func run(specFile, status *os.File) (int, error) {
	spec, err := readSpec(bufio.NewReader(specFile))
	specFile.Close()
	if err != nil {
		return 0, err
	}
	if err := checkNamespaces(); err != nil {
		return 0, err
	}
	// Signals wait in their channels until the command runs: none is lost
	// and none kills the init.
	signals := make(chan os.Signal, 32)
	signal.Notify(signals, forwarded...)
	// One pending SIGCHLD is enough: each one reaps every child that has
	// ended.
	children := make(chan os.Signal, 1)
	signal.Notify(children, syscall.SIGCHLD)
	if err := setUpMounts(spec.Keep); err != nil {
		return 0, err
	}
	// Before the uid changes: that makes /proc/self/fd root's.
	if err := closeOnExec(); err != nil {
		return 0, err
	}
	if err := becomeAccount(spec.Account); err != nil {
		return 0, err
	}
	if spec.Probe {
		writeReport(status, reportStarted, "")
		writeReport(status, reportExited, "0")
		return 0, nil
	}
	pid, err := syscall.ForkExec(spec.Path, spec.Args, &syscall.ProcAttr{
		Env:   spec.Env,
		Files: []uintptr{0, 1, 2},
		// Its own group, so that forwarding a signal reaches what it
		// started and never the init.
		Sys: &syscall.SysProcAttr{Setpgid: true},
	})
	if err != nil {
		return 0, fmt.Errorf("start %s: %w", spec.Path, err)
	}
	writeReport(status, reportStarted, "")
	ws := supervise(pid, signals, children)
	writeReport(status, reportExited, strconv.FormatUint(uint64(ws), 10))
	if ws.Signaled() {
		return 128 + int(ws.Signal()), nil
	}
	return ws.ExitStatus(), nil
}

// supervise forwards signals to the command's process group and reaps
// every child (the command and the orphans the namespace hands to its PID
// 1) until the command has ended, and returns its wait status. When the
// init returns, the kernel kills every process left in the namespace.
func supervise(pid int, signals, children <-chan os.Signal) syscall.WaitStatus {
	for {
		select {
		case s := <-signals:
			sig := s.(syscall.Signal)
			// The command may have left its group (setsid): then the
			// signal goes to it alone.
			if err := syscall.Kill(-pid, sig); errors.Is(err, syscall.ESRCH) {
				syscall.Kill(pid, sig)
			}
		case <-children:
			if ws, done := reap(pid); done {
				return ws
			}
		}
	}
}

// reap collects every child that has ended and reports the command's wait
// status once it is among them.
func reap(pid int) (syscall.WaitStatus, bool) {
	for {
		var ws syscall.WaitStatus
		got, err := syscall.Wait4(-1, &ws, syscall.WNOHANG, nil)
		switch {
		case errors.Is(err, syscall.EINTR):
			continue
		case err != nil || got <= 0:
			return 0, false
		case got == pid:
			return ws, true
		}
	}
}

// becomeAccount drops to account (when not nil) on every thread: no
// supplementary groups but the account's, its gid, its uid. Then, whatever
// the account, nothing the command runs may gain privileges (setuid
// binaries, file capabilities), and the init still dies with the agent:
// a change of uid clears the parent-death signal.
func becomeAccount(a *Account) error {
	if a != nil {
		groups := make([]int, len(a.Groups))
		for i, g := range a.Groups {
			groups[i] = int(g)
		}
		if err := syscall.Setgroups(groups); err != nil {
			return fmt.Errorf("set groups: %w", err)
		}
		if err := syscall.Setresgid(int(a.GID), int(a.GID), int(a.GID)); err != nil {
			return fmt.Errorf("set gid %d: %w", a.GID, err)
		}
		if err := syscall.Setresuid(int(a.UID), int(a.UID), int(a.UID)); err != nil {
			return fmt.Errorf("set uid %d: %w", a.UID, err)
		}
	}
	if err := unix.Prctl(unix.PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0); err != nil {
		return fmt.Errorf("set no_new_privs: %w", err)
	}
	if err := unix.Prctl(unix.PR_SET_PDEATHSIG, uintptr(syscall.SIGKILL), 0, 0, 0); err != nil {
		return fmt.Errorf("set the parent-death signal: %w", err)
	}
	return nil
}
