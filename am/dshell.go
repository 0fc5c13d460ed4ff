package am

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/hashicorp/go-hclog"
	wrpc "github.com/weft-sched/weft/rpc"
	"github.com/weft-sched/weft/scheduler"
)

// dshellAskID is the ask the distributed shell's task containers come from.
const dshellAskID = 1

// allocateWait is how long one AM.Allocate may block for news.
const allocateWait = 10 * time.Second

// promoteRetry is how long a refused promotion that may yet succeed (the
// container is not running or not recorded yet, or there is no room now)
// waits before it is asked for again.
const promoteRetry = time.Second

// DShell is the built-in distributed-shell AM (SPEC §8): it runs the app's
// command in num_containers containers, runs again the work of containers
// that were taken away (preempted, lost, evicted, shed, rejected, expired,
// drained, node_stopped) without counting a failure, backs off and
// blacklists nodes as retry.go says, and finishes FINISHED when every
// container exited 0, else FAILED.
type DShell struct {
	client *wrpc.AMClient
	// nodes starts containers on their nodes (client, but for tests).
	nodes  containerStarter
	logger hclog.Logger
	spec   scheduler.DShell
	// now is the AM's clock (time.Now, but for tests); backoff spaces a
	// task's tries after trouble; blacklist counts failures by node.
	now       func() time.Time
	backoff   backoff
	blacklist *blacklist
	// failuresPerNode is the app's max_failures_per_node.
	failuresPerNode int

	tasks    []dshellTask
	byCID    map[string]int // container ID → task index
	released map[string]bool
	warned   map[string]bool
	seen     map[string]bool
	// promote holds opportunistic containers to ask promotion for
	// (-promote-opportunistic-after-start), each with when to ask next.
	promote map[string]time.Time
}

type dshellTask struct {
	container     string // current container, if any
	done          bool
	exitCode      *int
	reason        scheduler.ExitReason
	diag          string
	runs          int
	startFailures int // consecutive containers that would not start
	// troubles counts the task's containers that failed for their node's
	// sake; the task asks for another no sooner than retryAt.
	troubles int
	retryAt  time.Time
}

// maxStartFailures is how many containers in a row may fail to start for a
// task before the task (and so the app) fails — at least one more than it
// takes to blacklist the node they failed on (startLimit): a command that
// cannot run must not turn into an endless allocate-and-release loop, and
// a node that cannot run it must not fail the task alone.
const maxStartFailures = 3

// containerStarter starts a container on its node; rpc.AMClient is one.
type containerStarter interface {
	StartContainer(ctx context.Context, ci wrpc.ContainerInfo, launch wrpc.LaunchSpec) (*wrpc.ContainerStartResponse, error)
}

// NewDShell returns the AM for the attempt described by client.
func NewDShell(client *wrpc.AMClient, logger hclog.Logger) *DShell {
	return &DShell{client: client, nodes: client, logger: logger.Named("dshell").With("app_id", client.AppID, "attempt", client.Attempt),
		now: time.Now, backoff: newBackoff(),
		byCID: map[string]int{}, released: map[string]bool{}, warned: map[string]bool{}, seen: map[string]bool{},
		promote: map[string]time.Time{}}
}

// plan lays out the app's tasks from its spec.
func (d *DShell) plan(spec scheduler.AppSpec) {
	d.spec = spec.DShell
	d.tasks = make([]dshellTask, d.spec.NumContainers)
	d.failuresPerNode = spec.FailuresPerNode()
	d.blacklist = newBlacklist(d.failuresPerNode)
}

// startLimit is how many containers in a row may fail to start for a task:
// maxStartFailures, and always one more than max_failures_per_node, so
// that a task whose node is blacklisted for it tries another.
func (d *DShell) startLimit() int { return max(maxStartFailures, d.failuresPerNode+1) }

// Run registers, drives the app to its end and reports it. It returns an
// error if the AM could not finish the app (the attempt then fails), or
// when ctx ends.
func (d *DShell) Run(ctx context.Context) error {
	reg, err := d.client.Register(ctx)
	if err != nil {
		return fmt.Errorf("register: %w", err)
	}
	d.plan(reg.Spec)
	d.logger.Info("registered", "containers", d.spec.NumContainers, "resources", d.spec.Resources.String(), "command", d.spec.Command,
		"max_failures_per_node", d.failuresPerNode)
	var releases []string
	for {
		now := d.now()
		want, retryIn := d.wanted(now)
		promotions, wait := d.duePromotions(now)
		if retryIn > 0 {
			wait = min(wait, retryIn) // come back when a task's backoff ends
		}
		resp, err := allocate(ctx, d.client, d.logger, wrpc.AMAllocateRequest{
			Asks:               []scheduler.Ask{taskAsk(d.spec, want)},
			Releases:           releases,
			Promotions:         promotions,
			Progress:           d.progress(),
			BlacklistAdditions: d.blacklist.take(),
		}, wait)
		if err != nil {
			return err
		}
		releases = nil
		if scheduler.AppState(resp.AppState).Terminal() {
			d.logger.Info("the app ended", "state", resp.AppState)
			return nil
		}
		for _, c := range resp.Allocated {
			releases = append(releases, d.assign(ctx, c)...)
		}
		for _, c := range resp.Completed {
			d.completed(c)
		}
		d.promotionResults(resp)
		for _, id := range resp.PreemptionWarnings {
			if !d.warned[id] {
				d.warned[id] = true
				d.logger.Info("container will be preempted; its task will run again", "container", id)
			}
		}
		for _, id := range resp.Paused {
			d.logger.Info("container paused by its node for guaranteed work; its task goes on when room frees", "container", id)
		}
		if d.finished() {
			return d.finish(ctx)
		}
	}
}

// wanted counts the tasks that want a container now, and says how long
// until the next task's backoff ends (0: none waits).
func (d *DShell) wanted(now time.Time) (int, time.Duration) {
	want := 0
	var next time.Duration
	for _, t := range d.tasks {
		switch {
		case t.done || t.container != "":
		case t.retryAt.After(now):
			if in := t.retryAt.Sub(now); next == 0 || in < next {
				next = in
			}
		default:
			want++
		}
	}
	return want, next
}

// taskAsk is the ask for want more of spec's task containers.
func taskAsk(spec scheduler.DShell, want int) scheduler.Ask {
	return scheduler.Ask{AskID: dshellAskID, Count: want, Resources: spec.Resources, ExecutionType: spec.ExecutionType,
		EnforceExecutionType: spec.EnforceExecutionType, Locality: spec.Locality(), ExpectedDuration: spec.ExpectedDuration}
}

// assign gives an allocated container to a task that needs one and starts
// it; a container nobody needs is returned for release.
func (d *DShell) assign(ctx context.Context, c wrpc.ContainerInfo) []string {
	if d.seen[c.ID] {
		return nil // a container is used once, however often it is reported
	}
	d.seen[c.ID] = true
	if d.spec.EnforceExecutionType && c.ExecutionType != string(d.spec.ExecutionType) {
		d.logger.Warn("releasing a container of another execution type (-enforce-execution-type)", "container", c.ID, "type", c.ExecutionType)
		d.released[c.ID] = true
		return []string{c.ID}
	}
	for i := range d.tasks {
		t := &d.tasks[i]
		if t.done || t.container != "" {
			continue
		}
		t.container = c.ID
		t.runs++
		d.byCID[c.ID] = i
		env := map[string]string{wrpc.EnvTaskIndex: strconv.Itoa(i)}
		for k, v := range d.spec.Env {
			env[k] = v
		}
		resp, err := d.nodes.StartContainer(ctx, c, wrpc.LaunchSpec{Command: d.spec.Command, Env: env})
		switch {
		case err != nil && !wrpc.IsServerError(err):
			// The node could not be reached (it is leaving, cut off, or a
			// black hole): not the command's fault, but the node's. Give
			// the container back and ask again, after a backoff.
			d.logger.Warn("could not reach the container's node; asking for another", "task", i, "container", c.ID, "node", c.NodeID, "error", err)
			d.forget(c.ID)
			d.troubled(i, c.NodeID)
			d.released[c.ID] = true
			return []string{c.ID}
		case err != nil:
			d.startFailed(i, c, err.Error())
			d.released[c.ID] = true
			return []string{c.ID}
		case resp.State == string(scheduler.ContainerCompleted) && scheduler.ExitReason(resp.Reason).Retryable():
			// An opportunistic container its node could not queue, or a
			// node on its way out: ask again.
			d.logger.Info("the node turned the container away; asking for another", "task", i, "container", c.ID, "reason", resp.Reason)
			d.forget(c.ID)
		case resp.State == string(scheduler.ContainerCompleted):
			d.startFailed(i, c, fmt.Sprintf("%s: %s", resp.Reason, resp.Diagnostics))
		default:
			t.startFailures = 0
			d.logger.Info("started task", "task", i, "container", c.ID, "node", c.NodeID, "state", resp.State)
			if d.spec.PromoteOpportunisticAfterStart && c.ExecutionType == string(scheduler.Opportunistic) {
				d.promote[c.ID] = time.Time{} // ask at once
			}
		}
		return nil
	}
	d.released[c.ID] = true
	return []string{c.ID}
}

// startFailed handles a container that would not start: the task asks for
// another after a backoff, until startLimit of them in a row have failed.
func (d *DShell) startFailed(i int, c wrpc.ContainerInfo, why string) {
	d.forget(c.ID)
	d.troubled(i, c.NodeID)
	t := &d.tasks[i]
	t.startFailures++
	if t.startFailures >= d.startLimit() {
		t.done, t.reason = true, scheduler.ReasonFailed
		t.diag = fmt.Sprintf("%d containers in a row would not start; last: %s", t.startFailures, why)
		d.logger.Error("giving up on task", "task", i, "reason", t.diag)
		return
	}
	d.logger.Warn("could not start a container; asking for another", "task", i, "container", c.ID, "node", c.NodeID, "error", why,
		"retry_in", t.retryAt.Sub(d.now()).Round(time.Millisecond))
}

// troubled records that a container of task i failed for its node's sake:
// the node's failures rise (max_failures_per_node of them blacklist it for
// the app) and the task asks again only after its backoff.
func (d *DShell) troubled(i int, node string) {
	t := &d.tasks[i]
	t.troubles++
	t.retryAt = d.now().Add(d.backoff.delay(t.troubles))
	if d.blacklist.failed(node) {
		d.logger.Warn("blacklisting a node for the app: its containers keep failing there", "node", node,
			"max_failures_per_node", d.failuresPerNode)
	}
}

// duePromotions returns the promotions to ask for now, and how long the
// next Allocate may block: no longer than until the next one is due.
func (d *DShell) duePromotions(now time.Time) ([]string, time.Duration) {
	var due []string
	wait := allocateWait
	for id, at := range d.promote {
		if !at.After(now) {
			due = append(due, id)
		} else {
			wait = min(wait, at.Sub(now))
		}
	}
	return due, wait
}

// promotionResults records what became of the promotions asked for.
func (d *DShell) promotionResults(resp *wrpc.AMAllocateResponse) {
	for _, id := range resp.Promoted {
		delete(d.promote, id)
		d.logger.Info("container promoted to guaranteed", "container", id)
	}
	for _, f := range resp.PromotionFailures {
		if _, asked := d.promote[f.ID]; !asked {
			continue
		}
		if !f.Retryable {
			delete(d.promote, f.ID)
			d.logger.Warn("container will not be promoted", "container", f.ID, "reason", f.Reason)
			continue
		}
		d.promote[f.ID] = d.now().Add(promoteRetry)
	}
}

func (d *DShell) forget(cid string) {
	delete(d.promote, cid)
	if i, ok := d.byCID[cid]; ok {
		d.tasks[i].container = ""
		delete(d.byCID, cid)
	}
}

// completed records a container's end: success, failure, or work to run again.
func (d *DShell) completed(c wrpc.ContainerInfo) {
	delete(d.promote, c.ID)
	i, ok := d.byCID[c.ID]
	if !ok {
		return
	}
	delete(d.byCID, c.ID)
	t := &d.tasks[i]
	t.container = ""
	reason := scheduler.ExitReason(c.Reason)
	if reason == scheduler.ReasonFailed {
		d.startFailed(i, c, c.Diagnostics)
		return
	}
	if reason.Retryable() {
		// Taken away: no failure of the task. Lost with its node, or never
		// started in time, it counts against the node and waits a backoff.
		if nodeTrouble(reason) {
			d.troubled(i, c.NodeID)
		}
		d.logger.Info("container was taken away; running its task again", "task", i, "container", c.ID, "node", c.NodeID, "reason", reason)
		return
	}
	t.done, t.exitCode, t.reason = true, c.ExitCode, reason
	d.logger.Info("task ended", "task", i, "container", c.ID, "reason", reason, "exit_code", fmtExit(c.ExitCode))
}

func (d *DShell) finished() bool {
	for _, t := range d.tasks {
		if !t.done {
			return false
		}
	}
	return true
}

func (d *DShell) progress() float32 {
	done := 0
	for _, t := range d.tasks {
		if t.done {
			done++
		}
	}
	return float32(done) / float32(max(1, len(d.tasks)))
}

func (d *DShell) finish(ctx context.Context) error {
	state, diag := d.outcome()
	d.logger.Info("finishing", "state", state, "diagnostics", diag)
	return finishApp(ctx, d.client, wrpc.AMFinishRequest{FinalState: state, Diagnostics: diag})
}

// outcome is the app's end once every task is done: FINISHED when every
// task's last container exited 0, else FAILED, naming the tasks that
// failed.
func (d *DShell) outcome() (state, diag string) {
	var failed []string
	for i, t := range d.tasks {
		if t.reason != scheduler.ReasonExited || t.exitCode == nil || *t.exitCode != 0 {
			why := fmt.Sprintf("task %d (%s, exit code %s", i, t.reason, fmtExit(t.exitCode))
			if t.diag != "" {
				why += ": " + t.diag
			}
			failed = append(failed, why+")")
		}
	}
	if len(failed) > 0 {
		return string(scheduler.AppFailed), fmt.Sprintf("%d of %d containers failed: %s", len(failed), len(d.tasks), strings.Join(failed, ", "))
	}
	return string(scheduler.AppFinished), fmt.Sprintf("all %d containers exited 0", len(d.tasks))
}

func fmtExit(code *int) string {
	if code == nil {
		return "none"
	}
	return fmt.Sprint(*code)
}
