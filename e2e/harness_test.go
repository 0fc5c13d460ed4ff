package e2e

import (
	"bytes"
	"encoding/json"
	"fmt"
	"hash/fnv"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/weft-sched/weft/internal/freeport"
	"github.com/weft-sched/weft/internal/testutil"
)

// weftBin is the binary under test, built once by TestMain (or taken from
// $WEFT_BINARY).
var weftBin string

func TestMain(m *testing.M) {
	// Containers have a /tmp of their own (docs/security.md): the files
	// these tests share with the containers they run (job input and
	// output, markers) live outside the host's.
	dir, err := os.MkdirTemp("/var/tmp", "weft-e2e-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	// Containers that run as their apps' uids (agents without
	// -allow-root) must reach the binary their AMs run, and what the tests
	// share with them.
	if err := os.Chmod(dir, 0o755); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	os.Setenv("TMPDIR", dir)
	code := 1
	if b := os.Getenv("WEFT_BINARY"); b != "" {
		weftBin = b
		code = m.Run()
	} else if weftBin, err = testutil.BuildWeft(dir); err != nil {
		fmt.Fprintln(os.Stderr, err)
	} else {
		code = m.Run()
	}
	testutil.RemoveCgroups(func(name string) bool { _, ok := agentCgroups.Load(name); return ok })
	os.RemoveAll(dir)
	os.Exit(code)
}

// agentCgroups holds the names of the cgroup directories the agents these
// tests start make (where the host lets them), to remove at the end: the
// tests kill agents with their containers running.
var agentCgroups sync.Map

// noteAgentCgroup records the cgroup directory name of the agent that
// args start: "weft-<node>-<FNV-1a of its absolute data directory>", as
// the agent names it (agent/cgroups.go).
func noteAgentCgroup(args []string) {
	var node, data string
	for i := 1; i+1 < len(args); i++ {
		switch args[i] {
		case "-node-id":
			node = args[i+1]
		case "-data-dir":
			data = args[i+1]
		}
	}
	if node == "" || data == "" {
		return
	}
	if abs, err := filepath.Abs(data); err == nil {
		data = abs
	}
	h := fnv.New32a()
	h.Write([]byte(data))
	agentCgroups.Store(fmt.Sprintf("weft-%s-%08x", node, h.Sum32()), true)
}

// freePort finds a port free for TCP and UDP on every given IP, below the
// ephemeral range and never one given before (package freeport).
func freePort(t testing.TB, ips ...string) int {
	t.Helper()
	port, err := freeport.Take(ips...)
	if err != nil {
		t.Fatal(err)
	}
	return port
}

// proc is one running weft process.
type proc struct {
	t    testing.TB
	name string
	args []string
	env  []string // the process's environment; nil: the test's
	cmd  *exec.Cmd
	log  string
	done chan struct{}
	err  error
}

func startProc(t testing.TB, name string, args ...string) *proc {
	t.Helper()
	return startProcEnv(t, name, nil, args...)
}

// startProcEnv is startProc with the process's environment env (nil: the
// test's).
func startProcEnv(t testing.TB, name string, env []string, args ...string) *proc {
	t.Helper()
	if len(args) > 0 && (args[0] == "server" || args[0] == "agent" || args[0] == "dev" || args[0] == "router") && !slices.Contains(args, "-http-port") {
		// A free HTTP port unless the test picks one: the default ports
		// would collide between processes on one IP and tests run at once.
		args = append(slices.Clip(args), "-http-port", "-1")
	}
	p := &proc{t: t, name: name, args: args, env: env, log: filepath.Join(t.TempDir(), name+".log")}
	if len(args) > 0 && args[0] == "agent" {
		noteAgentCgroup(args)
	}
	p.start()
	t.Cleanup(func() {
		p.kill()
		if t.Failed() {
			if b, err := os.ReadFile(p.log); err == nil {
				t.Logf("---- %s log (last 4 KiB) ----\n%s", p.name, tail(b, 4096))
			}
		}
	})
	return p
}

func (p *proc) start() {
	p.t.Helper()
	f, err := os.OpenFile(p.log, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		p.t.Fatal(err)
	}
	p.cmd = exec.Command(weftBin, p.args...)
	p.cmd.Env = p.env
	p.cmd.Stdout, p.cmd.Stderr = f, f
	if err := p.cmd.Start(); err != nil {
		p.t.Fatalf("start %s: %v", p.name, err)
	}
	p.done = make(chan struct{})
	go func() {
		p.err = p.cmd.Wait()
		f.Close()
		close(p.done)
	}()
}

func (p *proc) running() bool {
	select {
	case <-p.done:
		return false
	default:
		return true
	}
}

func (p *proc) kill() {
	if p.cmd != nil && p.running() {
		p.cmd.Process.Signal(syscall.SIGKILL)
		<-p.done
	}
}

// stop sends sig and waits for the process to exit; it returns the exit error.
func (p *proc) stop(sig syscall.Signal, timeout time.Duration) error {
	p.t.Helper()
	p.cmd.Process.Signal(sig)
	select {
	case <-p.done:
		return p.err
	case <-time.After(timeout):
		p.t.Fatalf("%s did not exit within %s of %s", p.name, timeout, sig)
		return nil
	}
}

func tail(b []byte, n int) []byte {
	if len(b) > n {
		return b[len(b)-n:]
	}
	return b
}

// cli runs a weft client command and returns stdout, stderr and the exit code.
func cli(t testing.TB, args ...string) (string, string, int) {
	t.Helper()
	cmd := exec.Command(weftBin, args...)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	cmd.Env = append(os.Environ(), "WEFT_ADDR=")
	err := cmd.Run()
	code := 0
	if ee, ok := err.(*exec.ExitError); ok {
		code = ee.ExitCode()
	} else if err != nil {
		t.Fatalf("run weft %v: %v", args, err)
	}
	return out.String(), errb.String(), code
}

// cliJSON runs a client command with -json and decodes its output.
func cliJSON(t testing.TB, out any, args ...string) error {
	t.Helper()
	withJSON := append([]string(nil), args...)
	withJSON = append(withJSON, "-json")
	for i, a := range args {
		if a == "--" { // flags go before the command
			withJSON = append(append(append([]string(nil), args[:i]...), "-json"), args[i:]...)
			break
		}
	}
	stdout, stderr, code := cli(t, withJSON...)
	if code != 0 {
		return fmt.Errorf("weft %s: exit %d: %s", strings.Join(args, " "), code, strings.TrimSpace(stderr))
	}
	if err := json.Unmarshal([]byte(stdout), out); err != nil {
		return fmt.Errorf("weft %s: bad JSON %q: %v", strings.Join(args, " "), stdout, err)
	}
	return nil
}

func waitFor(t testing.TB, timeout time.Duration, what string, cond func() error) {
	t.Helper()
	testutil.WaitForNoError(t, timeout, what, cond)
}
