package am

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
	wrpc "github.com/weft-sched/weft/rpc"
	"github.com/weft-sched/weft/scheduler"
)

// startAnswers answers Container.Start as each node is set to: a node not
// in the map runs the container.
type startAnswers map[string]func() (*wrpc.ContainerStartResponse, error)

func (f startAnswers) StartContainer(_ context.Context, ci wrpc.ContainerInfo, _ wrpc.LaunchSpec) (*wrpc.ContainerStartResponse, error) {
	if answer, ok := f[ci.NodeID]; ok {
		return answer()
	}
	return &wrpc.ContainerStartResponse{State: string(scheduler.ContainerRunning)}, nil
}

// Answers of a node in trouble.
var (
	unreachable = func() (*wrpc.ContainerStartResponse, error) {
		return nil, &wrpc.TransportError{Addr: "10.0.0.9:8049", Method: "Container.Start", Err: errors.New("connection refused")}
	}
	cannotRun = func() (*wrpc.ContainerStartResponse, error) {
		return &wrpc.ContainerStartResponse{State: string(scheduler.ContainerCompleted), Reason: string(scheduler.ReasonFailed),
			Diagnostics: `could not start: exec: "sh": executable file not found in $PATH`}, nil
	}
)

// testClock is a settable clock for the AMs' backoff.
type testClock struct{ t time.Time }

func (c *testClock) now() time.Time          { return c.t }
func (c *testClock) advance(d time.Duration) { c.t = c.t.Add(d) }

// testShell is a dshell AM planned for n tasks of `true`, with
// max_failures_per_node perNode (nil: the default), its nodes answering as
// nodes does, on clock, with no jitter.
func testShell(t *testing.T, n int, perNode *int, nodes startAnswers, clock *testClock) *DShell {
	t.Helper()
	d := NewDShell(wrpc.NewAMClient("app-1", 1, "tok", "127.0.0.1:1"), hclog.NewNullLogger())
	t.Cleanup(d.client.Close)
	d.nodes, d.now = nodes, clock.now
	d.backoff.rand = func() float64 { return 0 }
	d.plan(scheduler.AppSpec{MaxFailuresPerNode: perNode,
		DShell: scheduler.DShell{NumContainers: n, Command: []string{"true"}, Resources: scheduler.Resources{MemoryMB: 128, Vcores: 1}}})
	return d
}

var seq int

// container is a container allocated for the dshell's task ask on node.
func container(node string) wrpc.ContainerInfo {
	seq++
	return wrpc.ContainerInfo{ID: fmt.Sprintf("c-%d", seq), NodeID: node, AskID: dshellAskID,
		ExecutionType: string(scheduler.Guaranteed), State: string(scheduler.ContainerAllocated)}
}

func ended(c wrpc.ContainerInfo, reason scheduler.ExitReason, exit *int) wrpc.ContainerInfo {
	c.State, c.Reason, c.ExitCode = string(scheduler.ContainerCompleted), string(reason), exit
	return c
}

var zero = 0

// Containers stopped because their node left (node_stopped) or was
// drained (drained) run their task again at once and count no failure;
// once every task has exited 0 the app finishes, each task once.
func TestDShellRunsWorkOfAStoppedNodeAgain(t *testing.T) {
	clock := &testClock{t: time.Unix(1000, 0)}
	d := testShell(t, 4, nil, startAnswers{}, clock)
	var first []wrpc.ContainerInfo
	for _, node := range []string{"a1", "a1", "a2", "a2"} {
		c := container(node)
		if rel := d.assign(context.Background(), c); len(rel) != 0 {
			t.Fatalf("container %s released: %v", c.ID, rel)
		}
		first = append(first, c)
	}
	// a1 is stopped gracefully, a2 drained past its deadline.
	d.completed(ended(first[0], scheduler.ReasonNodeStopped, nil))
	d.completed(ended(first[1], scheduler.ReasonNodeStopped, nil))
	d.completed(ended(first[2], scheduler.ReasonDrained, nil))
	if want, wait := d.wanted(clock.now()); want != 3 || wait != 0 {
		t.Fatalf("after two node_stopped and one drained: want %d containers (wait %s), want 3 now", want, wait)
	}
	if adds := d.blacklist.take(); len(adds) != 0 || len(d.blacklist.failures) != 0 {
		t.Fatalf("orderly stops counted against nodes: %v, %v", adds, d.blacklist.failures)
	}
	again := []wrpc.ContainerInfo{first[3]}
	for i := 0; i < 3; i++ {
		c := container("a3")
		d.assign(context.Background(), c)
		again = append(again, c)
	}
	for _, c := range again {
		d.completed(ended(c, scheduler.ReasonExited, &zero))
	}
	if !d.finished() {
		t.Fatalf("tasks %+v: not finished", d.tasks)
	}
	state, diag := d.outcome()
	if state != string(scheduler.AppFinished) {
		t.Fatalf("app ends %s: %s", state, diag)
	}
	for i, task := range d.tasks {
		if task.startFailures != 0 || task.troubles != 0 {
			t.Errorf("task %d: %+v, want no failure counted", i, task)
		}
	}
	if d.tasks[0].runs != 2 || d.tasks[3].runs != 1 {
		t.Errorf("runs %d and %d, want 2 for a task of the stopped node and 1 for one that ran through", d.tasks[0].runs, d.tasks[3].runs)
	}
}

// A task whose containers keep failing for their node's sake asks again
// only after a backoff that doubles, on the AM's clock, up to its cap.
func TestDShellBacksOffAfterTrouble(t *testing.T) {
	clock := &testClock{t: time.Unix(1000, 0)}
	nodes := startAnswers{"hole": unreachable}
	perNode := 0 // no blacklisting: backoff alone
	d := testShell(t, 1, &perNode, nodes, clock)
	for i, wantDelay := range []time.Duration{500 * time.Millisecond, time.Second, 2 * time.Second, 4 * time.Second} {
		c := container("hole")
		if rel := d.assign(context.Background(), c); !slices.Equal(rel, []string{c.ID}) {
			t.Fatalf("try %d: release %v, want the container back", i, rel)
		}
		want, wait := d.wanted(clock.now())
		if want != 0 || wait != wantDelay {
			t.Fatalf("try %d: asks for %d now, waits %s; want none, %s", i, want, wait, wantDelay)
		}
		clock.advance(wantDelay - time.Millisecond)
		if want, _ := d.wanted(clock.now()); want != 0 {
			t.Fatalf("try %d: asked again %s early", i, time.Millisecond)
		}
		clock.advance(time.Millisecond)
		if want, wait := d.wanted(clock.now()); want != 1 || wait != 0 {
			t.Fatalf("try %d: after the backoff wants %d (wait %s), want 1", i, want, wait)
		}
	}
	if d.tasks[0].done {
		t.Fatalf("an unreachable node failed the task: %+v", d.tasks[0])
	}
	// A lost container counts as trouble too.
	c := container("n2")
	d.assign(context.Background(), c)
	d.completed(ended(c, scheduler.ReasonLost, nil))
	if _, wait := d.wanted(clock.now()); wait != 8*time.Second {
		t.Fatalf("after a loss the task waits %s, want 8s", wait)
	}
	b := newBackoff()
	b.rand = func() float64 { return 0 }
	if got := b.delay(40); got != retryMax {
		t.Errorf("delay after 40 troubles %s, want the cap %s", got, retryMax)
	}
	b.rand = func() float64 { return 0.999 }
	if got := b.delay(1); got <= retryBase/2 || got > retryBase {
		t.Errorf("jittered first delay %s, want in (%s, %s]", got, retryBase/2, retryBase)
	}
}

// Three containers that fail for their node's sake on one node blacklist
// it, sent once with the next Allocate; a task whose starts failed there
// is not given up for it (one more try than the blacklist needs), and
// orderly ends, other nodes, and max_failures_per_node 0 blacklist nothing.
func TestDShellBlacklistsANodeAfterThreeFailures(t *testing.T) {
	clock := &testClock{t: time.Unix(1000, 0)}
	nodes := startAnswers{"bad": cannotRun, "hole": unreachable}
	d := testShell(t, 2, nil, nodes, clock)
	for i := 0; i < 2; i++ {
		d.assign(context.Background(), container("bad"))
		if adds := d.blacklist.take(); len(adds) != 0 {
			t.Fatalf("blacklisted %v after %d failures", adds, i+1)
		}
	}
	ok := container("good")
	d.assign(context.Background(), ok)
	d.completed(ended(ok, scheduler.ReasonPreempted, nil))
	d.assign(context.Background(), container("bad"))
	if adds := d.blacklist.take(); !slices.Equal(adds, []string{"bad"}) {
		t.Fatalf("after three failures on bad: additions %v, want [bad]", adds)
	}
	if adds := d.blacklist.take(); len(adds) != 0 {
		t.Fatalf("additions sent twice: %v", adds)
	}
	for i, task := range d.tasks {
		if task.done {
			t.Fatalf("task %d given up after its node was blacklisted: %+v", i, task)
		}
	}
	// Unreachable, lost and expired count; the reasons of orderly ends do not.
	for _, reason := range []scheduler.ExitReason{scheduler.ReasonNodeStopped, scheduler.ReasonDrained, scheduler.ReasonShed,
		scheduler.ReasonEvicted, scheduler.ReasonRejected, scheduler.ReasonKilled} {
		c := container("n5")
		d.assign(context.Background(), c)
		d.completed(ended(c, reason, nil))
	}
	if n := d.blacklist.failures["n5"]; n != 0 {
		t.Fatalf("orderly ends counted %d failures on n5", n)
	}
	for _, reason := range []scheduler.ExitReason{scheduler.ReasonLost, scheduler.ReasonExpired, scheduler.ReasonLost} {
		c := container("flaky")
		d.assign(context.Background(), c)
		d.completed(ended(c, reason, nil))
	}
	for i := 0; i < 3; i++ {
		d.assign(context.Background(), container("hole"))
	}
	if adds := d.blacklist.take(); !slices.Equal(adds, []string{"flaky", "hole"}) {
		t.Fatalf("a node losing containers and an unreachable one: additions %v, want [flaky hole]", adds)
	}

	perNode := 0
	off := testShell(t, 1, &perNode, nodes, clock)
	for i := 0; i < 5; i++ {
		off.assign(context.Background(), container("hole"))
	}
	if adds := off.blacklist.take(); len(adds) != 0 {
		t.Fatalf("max_failures_per_node 0 blacklisted %v", adds)
	}
}

// A command no node can run fails its task after startLimit starts in a
// row — one more than blacklisting takes — and the app with it.
func TestDShellGivesUpACommandNoNodeRuns(t *testing.T) {
	clock := &testClock{t: time.Unix(1000, 0)}
	nodes := startAnswers{"n1": cannotRun, "n2": cannotRun}
	d := testShell(t, 1, nil, nodes, clock)
	if d.startLimit() != 4 {
		t.Fatalf("start limit %d, want 4 (max_failures_per_node 3, plus one)", d.startLimit())
	}
	for i, node := range []string{"n1", "n1", "n1", "n2"} {
		if d.tasks[0].done {
			t.Fatalf("task given up after %d failures", i)
		}
		d.assign(context.Background(), container(node))
	}
	if !d.tasks[0].done || d.tasks[0].reason != scheduler.ReasonFailed {
		t.Fatalf("task after four failed starts: %+v", d.tasks[0])
	}
	if state, _ := d.outcome(); state != string(scheduler.AppFailed) {
		t.Fatalf("app ends %s", state)
	}
}
