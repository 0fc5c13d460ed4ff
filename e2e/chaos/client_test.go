package chaos

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os/exec"
	"strings"
	"time"
)

// The harness talks to weft only through its command line, run in the root
// namespace, as an operator would.

// Op timeouts. An op that does not answer in time is killed; for a write
// its outcome is then unknown.
const (
	writeTimeout = 20 * time.Second
	readTimeout  = 8 * time.Second
	pollTimeout  = 5 * time.Second
)

// cliResult is one finished CLI run.
type cliResult struct {
	args       []string
	addrs      string
	stdout     string
	stderr     string
	code       int // -1 when it did not run or was killed
	timedOut   bool
	start, end int64 // ns since the run started
}

func (r cliResult) ok() bool { return r.code == 0 && !r.timedOut }

// errLine describes a failed run in one line.
func (r cliResult) errLine() string {
	switch {
	case r.timedOut:
		return fmt.Sprintf("no answer within the harness's timeout (%s)", time.Duration(r.end-r.start).Round(time.Millisecond))
	case r.code != 0:
		return fmt.Sprintf("exit %d: %s", r.code, strings.TrimSpace(r.stderr))
	}
	return "ok"
}

// cli runs `weft ARGS…` with WEFT_ADDR set to addrs (the CLI tries them in
// that order and rotates past dead ones).
func (rn *run) cli(timeout time.Duration, addrs []string, args ...string) cliResult {
	res := cliResult{args: args, addrs: strings.Join(addrs, ","), code: -1}
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, rn.bin, args...)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	cmd.Env = append(childEnv(), "WEFT_ADDR="+res.addrs)
	cmd.WaitDelay = time.Second
	res.start = rn.now()
	err := cmd.Run()
	res.end = rn.now()
	res.stdout, res.stderr = out.String(), errb.String()
	if ctx.Err() != nil {
		res.timedOut = true
		return res
	}
	if ee, ok := err.(*exec.ExitError); ok {
		res.code = ee.ExitCode()
	} else if err == nil {
		res.code = 0
	} else {
		res.stderr += err.Error()
	}
	return res
}

// cliJSON runs a read with -json and decodes its answer.
func (rn *run) cliJSON(timeout time.Duration, addrs []string, out any, args ...string) (cliResult, error) {
	res := rn.cli(timeout, addrs, append(args, "-json")...)
	if !res.ok() {
		return res, fmt.Errorf("weft %s (WEFT_ADDR=%s): %s", strings.Join(args, " "), res.addrs, res.errLine())
	}
	if err := json.Unmarshal([]byte(res.stdout), out); err != nil {
		return res, fmt.Errorf("weft %s: bad JSON %q: %v", strings.Join(args, " "), res.stdout, err)
	}
	return res, nil
}

// shuffled returns the servers' addresses in an order drawn from rng, so
// that which server a client reaches first is part of the seeded schedule.
func (rn *run) shuffled(rng *rand.Rand) []string {
	a := rn.c.serverAddrs()
	rng.Shuffle(len(a), func(i, j int) { a[i], a[j] = a[j], a[i] })
	return a
}

// Shapes of the CLI's -json output (SPEC §14) that the harness reads.

type resources struct {
	MemoryMB int64 `json:"memory_mb"`
	Vcores   int64 `json:"vcores"`
}

func (r resources) String() string {
	return fmt.Sprintf("memory_mb=%d,vcores=%d", r.MemoryMB, r.Vcores)
}

func (r resources) fits(capacity resources) bool {
	return r.MemoryMB <= capacity.MemoryMB && r.Vcores <= capacity.Vcores
}

func (r resources) plus(o resources) resources {
	return resources{MemoryMB: r.MemoryMB + o.MemoryMB, Vcores: r.Vcores + o.Vcores}
}

type nodeInfo struct {
	ID                  string    `json:"id"`
	Status              string    `json:"status"`
	StatusReason        string    `json:"status_reason"`
	Epoch               uint64    `json:"epoch"`
	Capacity            resources `json:"capacity"`
	AllocatedGuaranteed resources `json:"allocated_guaranteed"`
	RunningGuaranteed   int       `json:"running_guaranteed"`
}

type appInfo struct {
	ID          string `json:"id"`
	Name        string `json:"name"`
	Queue       string `json:"queue"`
	State       string `json:"state"`
	Diagnostics string `json:"diagnostics"`
	AMAttempts  int    `json:"am_attempts"`
	Attempts    []struct {
		Attempt     int    `json:"attempt"`
		ContainerID string `json:"container_id"`
		NodeID      string `json:"node_id"`
		Diagnostics string `json:"diagnostics"`
	} `json:"attempts"`
	SubmittedAt int64 `json:"submitted_at"`
	FinishedAt  int64 `json:"finished_at"`
}

func terminal(state string) bool {
	return state == "FINISHED" || state == "FAILED" || state == "KILLED"
}

type containerInfo struct {
	ID            string    `json:"id"`
	AppID         string    `json:"app_id"`
	NodeID        string    `json:"node_id"`
	ExecutionType string    `json:"execution_type"`
	State         string    `json:"state"`
	ExitCode      *int      `json:"exit_code"`
	Reason        string    `json:"reason"`
	Diagnostics   string    `json:"diagnostics"`
	IsAM          bool      `json:"is_am"`
	Resources     resources `json:"resources"`
	StartedAt     int64     `json:"started_at"`
	FinishedAt    int64     `json:"finished_at"`
}

type raftPeer struct {
	ID    string `json:"id"`
	State string `json:"state"`
	Voter bool   `json:"voter"`
}

type queueInfo struct {
	Name   string  `json:"name"`
	Weight float64 `json:"weight"`
}
