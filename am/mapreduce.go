package am

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"os"
	"reflect"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/hashicorp/go-hclog"
	wrpc "github.com/weft-sched/weft/rpc"
	"github.com/weft-sched/weft/scheduler"
)

// Ask IDs of a MapReduce job: map asks are numbered from mapAskBase, one
// per distinct split locality; reduce r asks as reduceAskBase+r.
const (
	mapAskBase    = 1
	reduceAskBase = 1 << 20
)

// maxTaskFailures is how many times a task may fail (exit non-zero, or not
// start) before the job fails, as Hadoop's mapreduce.map.maxattempts.
// Runs taken away (preempted, lost...) and maps re-run because their
// output was lost do not count.
const maxTaskFailures = 4

// Counter names of a MapReduce job (SPEC §19), reported to the servers.
const (
	CounterMapsDataLocal  = "maps.data_local"
	CounterMapsRackLocal  = "maps.rack_local"
	CounterMapsOffRack    = "maps.off_rack"
	CounterMapsAnywhere   = "maps.anywhere" // splits that name no node or rack
	CounterMapsLostRerun  = "maps.rerun_lost_output"
	CounterMaps           = "maps.total"
	CounterReduces        = "reduces.total"
	CounterMapsDone       = "maps.done"
	CounterReducesDone    = "reduces.done"
	CounterMapInputBytes  = "map.input_bytes"
	CounterMapRecords     = "map.output_records"
	CounterShuffleNode    = "shuffle.bytes.node_local"
	CounterShuffleRack    = "shuffle.bytes.rack_local"
	CounterShuffleOffRack = "shuffle.bytes.off_rack"
	CounterShuffleTND     = "shuffle.tnd"
	CounterShuffleWTND    = "shuffle.wtnd"
	CounterMapPhaseMS     = "time.map_phase_ms"
	CounterJobMS          = "time.job_ms"
)

// ReduceCounter is the name of reduce r's counter what ("tnd", "wtnd").
func ReduceCounter(r int, what string) string { return fmt.Sprintf("reduce.%05d.%s", r, what) }

type taskState int

const (
	taskPending taskState = iota // wants a container
	taskRunning
	taskDone
)

type mrMap struct {
	state     taskState
	group     int                // its map ask: mapAskBase+group
	container wrpc.ContainerInfo // the current run, or the one whose output is kept
	sizes     []int64            // bytes of each partition, once done
	failures  int
}

type mrReduce struct {
	state     taskState
	container wrpc.ContainerInfo
	feeds     []Feed
	feedNodes []string // the node of each feed
	failures  int
}

// MapReduce is the built-in MapReduce AM (SPEC §19). It asks for one map
// container per split, naming the split's nodes and racks (delay
// scheduling decides), runs `weft am map-task` in each, and once every map
// is done asks for one container per reduce: with the bytes each node holds
// for it as feeders, so the scheduler places it at their center of
// gravity, or anywhere (reduce_placement "any"). It runs `weft am
// reduce-task` there; a reduce that cannot fetch a map's output has the
// map run again, then runs again itself. Counters go to the servers with
// every call that changes them.
type MapReduce struct {
	client *wrpc.AMClient
	logger hclog.Logger
	// exe is the weft binary the tasks run: the AM's own, found at the same
	// path on every node, as a Hadoop installation is.
	exe string
	job scheduler.MapReduce

	maps    []mrMap
	groups  []scheduler.Locality // a map ask's locality
	byNode  map[string][]int     // splits naming a node
	byRack  map[string][]int     // splits naming a rack
	byGroup [][]int
	reduces []mrReduce
	byCID   map[string]taskRef
	seen    map[string]bool
	rackOf  map[string]string
	// sent is the last ask sent for each ask ID; dirty marks asks that got
	// containers since, whose counts the servers have taken down.
	sent  map[uint64]scheduler.Ask
	dirty map[uint64]bool

	counters     scheduler.Counters
	sentCounters scheduler.Counters
	started      time.Time
	failed       string
}

type taskRef struct {
	reduce bool
	i      int
}

// NewMapReduce returns the AM for the attempt described by client; exe is
// the weft binary its tasks run.
func NewMapReduce(client *wrpc.AMClient, logger hclog.Logger, exe string) *MapReduce {
	return &MapReduce{client: client, exe: exe,
		logger: logger.Named("mapreduce").With("app_id", client.AppID, "attempt", client.Attempt),
		byCID:  map[string]taskRef{}, seen: map[string]bool{}, rackOf: map[string]string{},
		sent: map[uint64]scheduler.Ask{}, dirty: map[uint64]bool{}, counters: scheduler.Counters{}}
}

// Run registers, drives the job to its end and reports it.
func (d *MapReduce) Run(ctx context.Context) error {
	reg, err := d.client.Register(ctx)
	if err != nil {
		return fmt.Errorf("register: %w", err)
	}
	if reg.Spec.MapReduce == nil {
		return d.finish(ctx, scheduler.AppFailed, "the app has no mapreduce job")
	}
	d.plan(*reg.Spec.MapReduce)
	d.started = time.Now()
	d.logger.Info("registered", "maps", len(d.maps), "reduces", len(d.reduces), "map_asks", len(d.groups),
		"reduce_placement", d.job.ReducePlacement)
	var releases []string
	for {
		asks := d.asks()
		req := wrpc.AMAllocateRequest{Asks: asks, Releases: releases, Progress: d.progress()}
		if !d.counters.Equal(d.sentCounters) {
			req.Counters = maps.Clone(d.counters)
		}
		resp, err := d.client.Allocate(ctx, req, allocateWait)
		if err != nil {
			if errors.Is(err, wrpc.ErrStale) || ctx.Err() != nil {
				return err
			}
			d.logger.Warn("allocate failed; retrying", "error", err)
			if !sleep(ctx, time.Second) {
				return ctx.Err()
			}
			continue
		}
		for _, a := range asks {
			d.sent[a.AskID] = a
			delete(d.dirty, a.AskID)
		}
		if req.Counters != nil {
			d.sentCounters = req.Counters
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
			d.completed(ctx, c)
		}
		switch {
		case d.failed != "":
			return d.finish(ctx, scheduler.AppFailed, d.failed)
		case d.doneReduces() == len(d.reduces):
			return d.finish(ctx, scheduler.AppFinished, fmt.Sprintf("%d maps and %d reduces done; output in %s",
				len(d.maps), len(d.reduces), d.job.Output))
		}
	}
}

// plan lays out the job's tasks and its map asks: splits of the same
// locality share one ask.
func (d *MapReduce) plan(job scheduler.MapReduce) {
	d.job = job
	d.maps = make([]mrMap, len(job.Splits))
	d.reduces = make([]mrReduce, job.Reducers)
	d.byNode, d.byRack = map[string][]int{}, map[string][]int{}
	groupOf := map[string]int{}
	for i, s := range job.Splits {
		key := strings.Join(s.Nodes, ",") + "|" + strings.Join(s.Racks, ",")
		g, ok := groupOf[key]
		if !ok {
			g = len(d.groups)
			groupOf[key] = g
			d.groups = append(d.groups, s.Locality())
			d.byGroup = append(d.byGroup, nil)
		}
		d.maps[i].group = g
		d.byGroup[g] = append(d.byGroup[g], i)
		for _, n := range s.Nodes {
			d.byNode[n] = append(d.byNode[n], i)
		}
		for _, r := range s.Racks {
			d.byRack[r] = append(d.byRack[r], i)
		}
	}
	// Zero counters are reported too: "0 off-rack" is an outcome.
	for _, name := range []string{CounterMapsDone, CounterReducesDone, CounterMapsDataLocal, CounterMapsRackLocal,
		CounterMapsOffRack, CounterShuffleNode, CounterShuffleRack, CounterShuffleOffRack} {
		d.counters[name] = 0
	}
	d.counters[CounterMaps], d.counters[CounterReduces] = int64(len(d.maps)), int64(len(d.reduces))
}

// asks returns the asks whose counts (or feeders) changed since they were
// last sent, or that got containers since.
func (d *MapReduce) asks() []scheduler.Ask {
	var out []scheduler.Ask
	add := func(a scheduler.Ask) {
		if prev, ok := d.sent[a.AskID]; ok && !d.dirty[a.AskID] && reflect.DeepEqual(prev, a) {
			return
		}
		if _, ok := d.sent[a.AskID]; !ok && a.Count == 0 {
			return // never asked: nothing to take back
		}
		out = append(out, a)
	}
	want := make([]int, len(d.groups))
	for _, m := range d.maps {
		if m.state == taskPending {
			want[m.group]++
		}
	}
	for g, loc := range d.groups {
		add(scheduler.Ask{AskID: uint64(mapAskBase + g), Count: want[g], Resources: d.job.MapResources,
			ExecutionType: scheduler.Guaranteed, Locality: loc})
	}
	mapsDone := d.doneMaps() == len(d.maps)
	for r := range d.reduces {
		a := scheduler.Ask{AskID: uint64(reduceAskBase + r), Resources: d.job.ReduceResources,
			ExecutionType: scheduler.Guaranteed, Locality: scheduler.Locality{Relax: true}}
		if mapsDone && d.reduces[r].state == taskPending {
			a.Count = 1
			if d.job.ReducePlacement == scheduler.PlacementCenterOfGravity {
				a.Feeders = d.feeders(r)
			}
		}
		add(a)
	}
	return out
}

// feeders are the bytes of partition r on each node holding map output,
// largest first, at most scheduler.MaxFeeders.
func (d *MapReduce) feeders(r int) []scheduler.Feeder {
	byNode := map[string]int64{}
	for _, m := range d.maps {
		if m.state == taskDone && m.sizes[r] > 0 {
			byNode[m.container.NodeID] += m.sizes[r]
		}
	}
	out := make([]scheduler.Feeder, 0, len(byNode))
	for n, b := range byNode {
		out = append(out, scheduler.Feeder{Node: n, Bytes: b})
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].Bytes != out[j].Bytes {
			return out[i].Bytes > out[j].Bytes
		}
		return out[i].Node < out[j].Node
	})
	if len(out) > scheduler.MaxFeeders {
		out = out[:scheduler.MaxFeeders]
	}
	return out
}

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
	if !d.start(ctx, c, argv, d.taskEnv(i, false), &m.failures, fmt.Sprintf("map %d", i)) {
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
	if !d.start(ctx, c, argv, d.taskEnv(r, true), &t.failures, fmt.Sprintf("reduce %d", r)) {
		return []string{c.ID}
	}
	t.state, t.container = taskRunning, c
	d.byCID[c.ID] = taskRef{reduce: true, i: r}
	d.logger.Info("started reduce", "reduce", r, "container", c.ID, "node", c.NodeID, "feeds", len(t.feeds))
	return nil
}

// taskEnv is a task's environment: the job's, its index, and for a reduce
// what it fetches with: the AM token (the app's shuffle credential, as
// Hadoop's job token; every task runs as the app's user) and the CA that
// verifies the agents.
func (d *MapReduce) taskEnv(i int, reduce bool) map[string]string {
	env := map[string]string{wrpc.EnvTaskIndex: strconv.Itoa(i)}
	for k, v := range d.job.Env {
		env[k] = v
	}
	if reduce {
		env[wrpc.EnvAMToken] = d.client.Token
		for _, k := range []string{wrpc.EnvCACert, wrpc.EnvRegion} {
			if v := os.Getenv(k); v != "" {
				env[k] = v
			}
		}
	}
	return env
}

// start starts argv in c; it reports false when the container is to be
// released (the task then wants another).
func (d *MapReduce) start(ctx context.Context, c wrpc.ContainerInfo, argv []string, env map[string]string, failures *int, what string) bool {
	resp, err := d.client.StartContainer(ctx, c, wrpc.LaunchSpec{Command: argv, Env: env})
	switch {
	case err != nil && !wrpc.IsServerError(err):
		d.logger.Warn("could not reach the container's node; asking for another", "task", what, "container", c.ID, "error", err)
		return false
	case err != nil:
		d.taskFailed(what, failures, err.Error())
		return false
	case resp.State == string(scheduler.ContainerCompleted):
		d.taskFailed(what, failures, fmt.Sprintf("%s: %s", resp.Reason, resp.Diagnostics))
		return false
	}
	return true
}

// taskFailed counts a failure of a task; the job fails at maxTaskFailures.
func (d *MapReduce) taskFailed(what string, failures *int, why string) {
	*failures++
	if *failures >= maxTaskFailures {
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
		d.logger.Info("map container was taken away; running it again", "map", ref.i, "container", c.ID, "reason", reason)
	default:
		d.taskFailed(what, &m.failures, exitWhy(c))
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
			}
		}
	case reason.Retryable():
		d.logger.Info("reduce container was taken away; running it again", "reduce", r, "container", c.ID, "reason", reason)
	default:
		d.taskFailed(what, &t.failures, exitWhy(c))
	}
}

// countShuffle adds reduce r's shuffle to the counters: bytes by distance,
// and its TND and WTND from the nodes it fetched from (SPEC §19).
func (d *MapReduce) countShuffle(r int, c wrpc.ContainerInfo, fetched []int64) {
	t := &d.reduces[r]
	byNode := map[string]int64{}
	for k, node := range t.feedNodes {
		b := d.maps[t.feeds[k].Map].sizes[r] // what the map wrote
		if fetched != nil {
			b = fetched[k] // what the reduce read
		}
		byNode[node] += b
		switch scheduler.Distance(node, c.NodeID, d.rackOf) {
		case scheduler.NDSameNode:
			d.counters[CounterShuffleNode] += b
		case scheduler.NDSameRack:
			d.counters[CounterShuffleRack] += b
		default:
			d.counters[CounterShuffleOffRack] += b
		}
	}
	feeders := make([]scheduler.Feeder, 0, len(byNode))
	for n, b := range byNode {
		feeders = append(feeders, scheduler.Feeder{Node: n, Bytes: b})
	}
	tnd, wtnd := scheduler.TND(feeders, c.NodeID, d.rackOf), scheduler.WTND(feeders, c.NodeID, d.rackOf)
	d.counters[ReduceCounter(r, "tnd")], d.counters[ReduceCounter(r, "wtnd")] = tnd, wtnd
	d.counters[CounterShuffleTND] += tnd
	d.counters[CounterShuffleWTND] += wtnd
	d.logger.Info("reduce done", "reduce", r, "node", c.NodeID, "tnd", tnd, "wtnd", wtnd)
}

func (d *MapReduce) readIndex(ctx context.Context, c wrpc.ContainerInfo) (*mapIndex, error) {
	var idx mapIndex
	if err := d.readJSON(ctx, c, mapIndexFile, &idx); err != nil {
		return nil, err
	}
	if len(idx.Partitions) != len(d.reduces) {
		return nil, fmt.Errorf("the index has %d partitions, not %d", len(idx.Partitions), len(d.reduces))
	}
	return &idx, nil
}

// maxReport bounds a task's report file the AM reads.
const maxReport = 4 << 20

// readJSON reads a small file a completed task left and decodes it.
func (d *MapReduce) readJSON(ctx context.Context, c wrpc.ContainerInfo, path string, v any) error {
	var buf []byte
	for {
		rctx, cancel := context.WithTimeout(ctx, 30*time.Second)
		resp, err := d.client.ContainerOutput(rctx, c, wrpc.ContainerOutputRequest{Path: path, Offset: int64(len(buf))})
		cancel()
		if err != nil {
			return err
		}
		if resp.Size > maxReport {
			return fmt.Errorf("%s is %d bytes; at most %d", path, resp.Size, maxReport)
		}
		buf = append(buf, resp.Data...)
		if int64(len(buf)) >= resp.Size || len(resp.Data) == 0 {
			break
		}
	}
	return json.Unmarshal(buf, v)
}

func exitWhy(c wrpc.ContainerInfo) string {
	why := fmt.Sprintf("%s, exit code %s", c.Reason, fmtExit(c.ExitCode))
	if c.Diagnostics != "" {
		why += ": " + c.Diagnostics
	}
	return why
}

func (d *MapReduce) doneMaps() int {
	n := 0
	for _, m := range d.maps {
		if m.state == taskDone {
			n++
		}
	}
	return n
}

func (d *MapReduce) doneReduces() int {
	n := 0
	for _, t := range d.reduces {
		if t.state == taskDone {
			n++
		}
	}
	return n
}

// progress weighs the map and the reduce phases equally.
func (d *MapReduce) progress() float32 {
	return 0.5*float32(d.doneMaps())/float32(max(1, len(d.maps))) + 0.5*float32(d.doneReduces())/float32(max(1, len(d.reduces)))
}

func (d *MapReduce) finish(ctx context.Context, state scheduler.AppState, diag string) error {
	d.counters[CounterJobMS] = time.Since(d.started).Milliseconds()
	d.logger.Info("finishing", "state", state, "diagnostics", diag)
	for attempt := 0; ; attempt++ {
		err := d.client.FinishWith(ctx, wrpc.AMFinishRequest{FinalState: string(state), Diagnostics: diag, Counters: d.counters})
		if err == nil || attempt == 5 || !wrpc.IsRetryable(err) {
			return err
		}
		if !sleep(ctx, time.Second) {
			return ctx.Err()
		}
	}
}
