package am

import (
	"context"
	"fmt"
	"maps"
	"reflect"
	"sort"
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
// start) before the job fails, as Hadoop's mapreduce.map.maxattempts: one
// more than it takes to blacklist the node they failed on, by default.
// Runs taken away (preempted, lost, drained, node_stopped...) and maps
// re-run because their output was lost do not count.
const maxTaskFailures = 4

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
	retry     retryState
}

type mrReduce struct {
	state     taskState
	container wrpc.ContainerInfo
	feeds     []Feed
	feedNodes []string // the node of each feed
	failures  int
	retry     retryState
}

// retryState is a task's backoff: its troubles (failures, and containers
// that failed for their node's sake) and when it may ask again.
type retryState struct {
	troubles int
	at       time.Time
}

// ready reports whether a pending task may be asked for at now.
func (r retryState) ready(now time.Time) bool { return !r.at.After(now) }

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
	// nodes starts containers on their nodes (client, but for tests).
	nodes  containerStarter
	logger hclog.Logger
	// now is the AM's clock (time.Now, but for tests); backoff spaces a
	// task's tries after trouble; blacklist counts failures by node.
	now       func() time.Time
	backoff   backoff
	blacklist *blacklist
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
	return &MapReduce{client: client, nodes: client, exe: exe, now: time.Now, backoff: newBackoff(), blacklist: newBlacklist(0),
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
	d.blacklist = newBlacklist(reg.Spec.FailuresPerNode())
	d.started = time.Now()
	d.logger.Info("registered", "maps", len(d.maps), "reduces", len(d.reduces), "map_asks", len(d.groups),
		"reduce_placement", d.job.ReducePlacement)
	var releases []string
	for {
		now := d.now()
		asks := d.asks(now)
		req := wrpc.AMAllocateRequest{Asks: asks, Releases: releases, Progress: d.progress(), BlacklistAdditions: d.blacklist.take()}
		if !d.counters.Equal(d.sentCounters) {
			req.Counters = maps.Clone(d.counters)
		}
		wait := allocateWait
		if in := d.nextRetry(now); in > 0 {
			wait = min(wait, in) // come back when a task's backoff ends
		}
		resp, err := allocate(ctx, d.client, d.logger, req, wait)
		if err != nil {
			return err
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
// last sent, or that got containers since; a task in its backoff at now is
// not asked for.
func (d *MapReduce) asks(now time.Time) []scheduler.Ask {
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
		if m.state == taskPending && m.retry.ready(now) {
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
		if mapsDone && d.reduces[r].state == taskPending && d.reduces[r].retry.ready(now) {
			a.Count = 1
			if d.job.ReducePlacement == scheduler.PlacementCenterOfGravity {
				a.Feeders = d.feeders(r)
			}
		}
		add(a)
	}
	return out
}

// nextRetry says how long until the next pending task's backoff ends (0:
// none waits).
func (d *MapReduce) nextRetry(now time.Time) time.Duration {
	var next time.Duration
	consider := func(pending bool, r retryState) {
		if in := r.at.Sub(now); pending && in > 0 && (next == 0 || in < next) {
			next = in
		}
	}
	for _, m := range d.maps {
		consider(m.state == taskPending, m.retry)
	}
	for _, t := range d.reduces {
		consider(t.state == taskPending, t.retry)
	}
	return next
}

// troubled records a container of a task that failed on node: the node's
// failures rise (max_failures_per_node of them blacklist it for the app)
// and the task asks again only after its backoff.
func (d *MapReduce) troubled(r *retryState, what, node string) {
	r.troubles++
	r.at = d.now().Add(d.backoff.delay(r.troubles))
	if d.blacklist.failed(node) {
		d.logger.Warn("blacklisting a node for the job: its tasks keep failing there", "node", node, "task", what,
			"max_failures_per_node", d.blacklist.max)
	}
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
	return finishApp(ctx, d.client, wrpc.AMFinishRequest{FinalState: string(state), Diagnostics: diag, Counters: d.counters})
}
