package containerinit

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
	"syscall"
)

// Command is the hidden weft subcommand that runs Main.
const Command = "container-init"

// The init's file descriptors, after stdin, stdout and stderr (the
// container's): the agent writes the Spec to SpecFD and closes it; the
// init writes its reports to StatusFD.
const (
	SpecFD   = 3
	StatusFD = 4
)

// maxSpecBytes bounds the Spec the init reads: far above what the kernel
// lets an execve carry (argv and environment share a few MiB).
const maxSpecBytes = 16 << 20

// Spec is what a container's init runs. It travels on a pipe, not on the
// init's command line or in its environment: those are readable through
// /proc, and the environment could carry a dynamic loader variable
// (LD_PRELOAD) into a process that is still root.
type Spec struct {
	// Path is the command's executable, resolved as os/exec resolves it.
	Path string `json:"path"`
	// Args is its argv, Args[0] included.
	Args []string `json:"args"`
	// Env is its environment.
	Env []string `json:"env"`
	// Account is the account it runs as; nil keeps the init's own (the
	// agent's).
	Account *Account `json:"account,omitempty"`
	// Keep lists paths that stay reachable at the same path when they
	// lie under a directory the init replaces (/tmp, /dev/shm): the
	// container's directory and its command, so that an agent whose data
	// directory is under /tmp still runs its containers.
	Keep []string `json:"keep,omitempty"`
	// Probe makes the init set everything up, start nothing and report
	// an exit code of 0: how an agent checks at start that containers can
	// run this way.
	Probe bool `json:"probe,omitempty"`
}

// Account is a Unix account: uid, primary gid and supplementary groups
// (none when empty).
type Account struct {
	UID    uint32   `json:"uid"`
	GID    uint32   `json:"gid"`
	Groups []uint32 `json:"groups,omitempty"`
}

// WriteSpec writes s for an init to read on SpecFD.
func WriteSpec(w io.Writer, s *Spec) error {
	return json.NewEncoder(w).Encode(s)
}

func readSpec(r io.Reader) (*Spec, error) {
	var s Spec
	if err := json.NewDecoder(io.LimitReader(r, maxSpecBytes)).Decode(&s); err != nil {
		return nil, fmt.Errorf("read the container's spec: %w", err)
	}
	if s.Probe {
		return &s, nil
	}
	if s.Path == "" || len(s.Args) == 0 {
		return nil, errors.New("the container's spec has no command")
	}
	return &s, nil
}

// The init's reports, one line each: started (the command runs), then
// exited with the command's wait status; or failed with why, instead of
// either.
const (
	reportStarted = "started"
	reportExited  = "exited"
	reportFailed  = "failed"
)

// ReadStart reads the init's first report: nil once the command runs, or
// why it could not be started.
func ReadStart(r *bufio.Reader) error {
	word, rest, err := readReport(r)
	switch {
	case err != nil:
		return fmt.Errorf("container init: %w", err)
	case word == reportStarted:
		return nil
	case word == reportFailed:
		return errors.New(rest)
	default:
		return fmt.Errorf("container init: unexpected report %q", word)
	}
}

// ReadExit reads the init's last report: the command's wait status, and
// false when the init ended without one (it was killed).
func ReadExit(r *bufio.Reader) (syscall.WaitStatus, bool) {
	word, rest, err := readReport(r)
	if err != nil || word != reportExited {
		return 0, false
	}
	ws, err := strconv.ParseUint(rest, 10, 32)
	if err != nil {
		return 0, false
	}
	return syscall.WaitStatus(ws), true
}

// maxReportBytes bounds one report line.
const maxReportBytes = 4096

func readReport(r *bufio.Reader) (word, rest string, err error) {
	var line []byte
	for {
		part, more, err := r.ReadLine()
		if err == io.EOF && len(line) > 0 {
			break
		}
		if err != nil {
			if err == io.EOF {
				return "", "", errors.New("ended without a report")
			}
			return "", "", err
		}
		line = append(line, part...)
		if len(line) > maxReportBytes {
			return "", "", errors.New("report too long")
		}
		if !more {
			break
		}
	}
	word, rest, _ = strings.Cut(string(line), " ")
	return word, rest, nil
}

func writeReport(w io.Writer, word, rest string) {
	line := word
	if rest != "" {
		line += " " + strings.ReplaceAll(rest, "\n", " ")
	}
	io.WriteString(w, line+"\n")
}
