package am

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"time"

	wrpc "github.com/weft-sched/weft/rpc"
	"github.com/weft-sched/weft/scheduler"
)

// assign gives an allocated container to a task that wants one and starts
// it there; a container nobody wants is returned for release.
func (d *MapReduce) assign(ctx context.Context, c wrpc.ContainerInfo) []string {
	if d.seen[c.ID] {
		return nil
	}
	d.seen[c.ID] = true
	d.dirty[c.AskID] = true
	if c.Rack != "" {
		d.rackOf[c.NodeID] = c.Rack
	}
	if c.AskID >= reduceAskBase {
		r := int(c.AskID - reduceAskBase)
		if r >= len(d.reduces) || d.reduces[r].state != taskPending || d.doneMaps() < len(d.maps) {
			r = slices.IndexFunc(d.reduces, func(t mrReduce) bool { return t.state == taskPending })
		}
		if r < 0 || d.doneMaps() < len(d.maps) {
			return []string{c.ID}
		}
		return d.startReduce(ctx, r, c)
	}
	i, locality := d.pickSplit(c)
	if i < 0 {
		return []string{c.ID}
	}
	return d.startMap(ctx, i, c, locality)
}

// pickSplit chooses the pending split to run in c: one held on c's node,
// else one on its rack, else one of the ask c came from, else any (as
// Hadoop's MR AM assigns containers); it returns the map's locality
// counter.
func (d *MapReduce) pickSplit(c wrpc.ContainerInfo) (int, string) {
	pending := func(list []int) int {
		for _, i := range list {
			if d.maps[i].state == taskPending {
				return i
			}
		}
		return -1
	}
	if i := pending(d.byNode[c.NodeID]); i >= 0 {
		return i, CounterMapsDataLocal
	}
	if rack := c.Rack; rack != "" {
		if i := pending(d.byRack[rack]); i >= 0 {
			return i, CounterMapsRackLocal
		}
		for n, list := range d.byNode {
			if d.rackOf[n] == rack {
				if i := pending(list); i >= 0 {
					return i, CounterMapsRackLocal
				}
			}
		}
	}
	i := -1
	if g := int(c.AskID) - mapAskBase; g >= 0 && g < len(d.byGroup) {
		i = pending(d.byGroup[g])
	}
	if i < 0 {
		i = slices.IndexFunc(d.maps, func(m mrMap) bool { return m.state == taskPending })
	}
	if i < 0 {
		return -1, ""
	}
	if s := d.job.Splits[i]; len(s.Nodes)+len(s.Racks) == 0 {
		return i, CounterMapsAnywhere
	}
	return i, CounterMapsOffRack
}

func (d *MapReduce) startMap(ctx context.Context, i int, c wrpc.ContainerInfo, locality string) []string {
	argv := append([]string{d.exe, "am", "map-task", "-split", d.job.Splits[i].Path,
		"-reducers", strconv.Itoa(d.job.Reducers), "--"}, d.job.Map...)
	m := &d.maps[i]
	if !d.start(ctx, c, wrpc.LaunchSpec{Command: argv, Env: d.taskEnv(i)}, &m.failures, &m.retry, fmt.Sprintf("map %d", i)) {
		return []string{c.ID}
	}
	m.state, m.container = taskRunning, c
	d.byCID[c.ID] = taskRef{i: i}
	d.counters[locality]++
	d.logger.Info("started map", "map", i, "container", c.ID, "node", c.NodeID, "locality", locality)
	return nil
}

func (d *MapReduce) startReduce(ctx context.Context, r int, c wrpc.ContainerInfo) []string {
	t := &d.reduces[r]
	t.feeds, t.feedNodes = t.feeds[:0], t.feedNodes[:0]
	for i, m := range d.maps {
		if m.sizes[r] > 0 {
			t.feeds = append(t.feeds, Feed{Map: i, ContainerID: m.container.ID, NodeAddress: m.container.NodeAddress})
			t.feedNodes = append(t.feedNodes, m.container.NodeID)
		}
	}
	argv := []string{d.exe, "am", "reduce-task", "-partition", strconv.Itoa(r), "-output", d.job.Output}
	for _, f := range t.feeds {
		argv = append(argv, "-feed", f.String())
	}
	argv = append(append(argv, "--"), d.job.Reduce...)
	if !d.start(ctx, c, wrpc.LaunchSpec{Command: argv, Env: d.taskEnv(r), Secrets: d.reduceSecrets()}, &t.failures, &t.retry, fmt.Sprintf("reduce %d", r)) {
		return []string{c.ID}
	}
	t.state, t.container = taskRunning, c
	d.byCID[c.ID] = taskRef{reduce: true, i: r}
	d.logger.Info("started reduce", "reduce", r, "container", c.ID, "node", c.NodeID, "feeds", len(t.feeds))
	return nil
}

// taskEnv is a task's environment: the job's and its index. Agents add
// the CA that verifies them.
func (d *MapReduce) taskEnv(i int) map[string]string {
	env := map[string]string{wrpc.EnvTaskIndex: strconv.Itoa(i)}
	for k, v := range d.job.Env {
		env[k] = v
	}
	return env
}

// reduceSecrets are what a reduce task is handed as files: the AM token
// it fetches map output with (the app's shuffle credential, as Hadoop's
// job token; every task runs as the app's uid). Never in its environment.
func (d *MapReduce) reduceSecrets() map[string]string {
	return map[string]string{wrpc.SecretAMToken: d.client.Token}
}

// start starts argv in c; it reports false when the container is to be
// released (the task then wants another, after its backoff when the node
// was in trouble).
func (d *MapReduce) start(ctx context.Context, c wrpc.ContainerInfo, launch wrpc.LaunchSpec, failures *int,
	retry *retryState, what string) bool {
	resp, err := d.nodes.StartContainer(ctx, c, launch)
	switch {
	case err != nil && !wrpc.IsServerError(err):
		// Unreachable: the node's fault, not the task's.
		d.logger.Warn("could not reach the container's node; asking for another", "task", what, "container", c.ID, "node", c.NodeID, "error", err)
		d.troubled(retry, what, c.NodeID)
		return false
	case err != nil:
		d.taskFailed(what, failures, err.Error())
		d.troubled(retry, what, c.NodeID)
		return false
	case resp.State == string(scheduler.ContainerCompleted) && scheduler.ExitReason(resp.Reason).Retryable():
		// Turned away by a node on its way out, or a full queue.
		d.logger.Info("the node turned the container away; asking for another", "task", what, "container", c.ID, "reason", resp.Reason)
		return false
	case resp.State == string(scheduler.ContainerCompleted):
		d.taskFailed(what, failures, fmt.Sprintf("%s: %s", resp.Reason, resp.Diagnostics))
		d.troubled(retry, what, c.NodeID)
		return false
	}
	return true
}

// taskFailed counts a failure of a task; the job fails at
// maxTaskFailures, or one more than max_failures_per_node if that is more.
func (d *MapReduce) taskFailed(what string, failures *int, why string) {
	*failures++
	if *failures >= max(maxTaskFailures, d.blacklist.max+1) {
		d.failed = fmt.Sprintf("%s failed %d times; last: %s", what, *failures, why)
		d.logger.Error("giving up on the job", "task", what, "reason", why)
		return
	}
	d.logger.Warn("task failed; running it again", "task", what, "failures", *failures, "reason", why)
}

// completed records a task container's end.
func (d *MapReduce) completed(ctx context.Context, c wrpc.ContainerInfo) {
	ref, ok := d.byCID[c.ID]
	if !ok {
		return
	}
	delete(d.byCID, c.ID)
	reason := scheduler.ExitReason(c.Reason)
	if reason == scheduler.ReasonNodeStopped || reason == scheduler.ReasonLost {
		d.outputsLost(c.NodeID)
	}
	exited0 := reason == scheduler.ReasonExited && c.ExitCode != nil && *c.ExitCode == 0
	if ref.reduce {
		d.reduceCompleted(ctx, ref.i, c, reason, exited0)
		return
	}
	m := &d.maps[ref.i]
	what := fmt.Sprintf("map %d", ref.i)
	m.state = taskPending
	switch {
	case exited0:
		idx, err := d.readIndex(ctx, c)
		if err != nil {
			d.logger.Warn("map done but its output cannot be read; running it again", "map", ref.i, "container", c.ID, "error", err)
			d.counters[CounterMapsLostRerun]++
			return
		}
		m.state, m.sizes = taskDone, idx.Partitions
		d.counters[CounterMapsDone]++
		d.counters[CounterMapInputBytes] += idx.InputBytes
		d.counters[CounterMapRecords] += idx.Records
		if d.doneMaps() == len(d.maps) {
			d.counters[CounterMapPhaseMS] = time.Since(d.started).Milliseconds()
			d.logger.Info("every map is done; asking for the reduces", "maps", len(d.maps))
		}
	case reason.Retryable():
		if nodeTrouble(reason) {
			d.troubled(&m.retry, what, c.NodeID)
		}
		d.logger.Info("map container was taken away; running it again", "map", ref.i, "container", c.ID, "node", c.NodeID, "reason", reason)
	default:
		d.taskFailed(what, &m.failures, d.exitWhy(ctx, c))
		d.troubled(&m.retry, what, c.NodeID)
	}
}

// outputsLost runs again, counting no failure, the done maps whose output
// is on node: its agent stopped or it went down, so no reduce can fetch
// it (Hadoop's AM re-runs the maps of an unusable node too) — unless
// every reduce is done already.
func (d *MapReduce) outputsLost(node string) {
	if d.doneReduces() == len(d.reduces) {
		return
	}
	for i := range d.maps {
		if m := &d.maps[i]; m.state == taskDone && m.container.NodeID == node {
			m.state, m.sizes = taskPending, nil
			d.counters[CounterMapsDone]--
			d.counters[CounterMapsLostRerun]++
			d.logger.Warn("a map's output was on a node that left; running the map again", "map", i, "node", node)
		}
	}
}

func (d *MapReduce) reduceCompleted(ctx context.Context, r int, c wrpc.ContainerInfo, reason scheduler.ExitReason, exited0 bool) {
	t := &d.reduces[r]
	t.state = taskPending
	what := fmt.Sprintf("reduce %d", r)
	switch {
	case exited0:
		var rep shuffleReport
		if err := d.readJSON(ctx, c, shuffleFile, &rep); err != nil || len(rep.Bytes) != len(t.feeds) {
			// The output is written; only the figures are missing.
			d.logger.Warn("reduce done but its shuffle report cannot be read", "reduce", r, "error", err)
			rep.Bytes = nil
		}
		t.state = taskDone
		d.counters[CounterReducesDone]++
		d.countShuffle(r, c, rep.Bytes)
	case c.ExitCode != nil && *c.ExitCode == ExitFetchFailed:
		var lost []int
		if err := d.readJSON(ctx, c, fetchFailuresFile, &lost); err != nil {
			d.taskFailed(what, &t.failures, "could not fetch some maps' output, and its list cannot be read: "+err.Error())
			return
		}
		for _, i := range lost {
			k := slices.IndexFunc(t.feeds, func(f Feed) bool { return f.Map == i })
			if k < 0 || i >= len(d.maps) {
				continue
			}
			if m := &d.maps[i]; m.state == taskDone && m.container.ID == t.feeds[k].ContainerID {
				m.state, m.sizes = taskPending, nil
				d.counters[CounterMapsDone]--
				d.counters[CounterMapsLostRerun]++
				d.logger.Warn("a reduce could not fetch a map's output; running the map again", "map", i, "node", m.container.NodeID, "reduce", r)
				// Its output was lost on its node: the node's failure.
				d.troubled(&m.retry, fmt.Sprintf("map %d", i), m.container.NodeID)
			}
		}
	case reason.Retryable():
		if nodeTrouble(reason) {
			d.troubled(&t.retry, what, c.NodeID)
		}
		d.logger.Info("reduce container was taken away; running it again", "reduce", r, "container", c.ID, "node", c.NodeID, "reason", reason)
	default:
		d.taskFailed(what, &t.failures, d.exitWhy(ctx, c))
		d.troubled(&t.retry, what, c.NodeID)
	}
}
