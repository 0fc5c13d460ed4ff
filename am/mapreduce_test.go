package am

import (
	"context"
	"fmt"
	"reflect"
	"slices"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
	wrpc "github.com/weft-sched/weft/rpc"
	"github.com/weft-sched/weft/scheduler"
)

// testJob is an AM planned for four splits: two on n1 (rack /r1), one on
// n2 (/r1) and one naming nothing; two reduces.
func testJob(t *testing.T, placement string) *MapReduce {
	t.Helper()
	d := NewMapReduce(wrpc.NewAMClient("app-1", 1, "tok", "127.0.0.1:1"), hclog.NewNullLogger(), "/bin/weft")
	t.Cleanup(d.client.Close)
	d.plan(scheduler.MapReduce{
		Splits: []scheduler.Split{
			{Path: "/in/0", Nodes: []string{"n1"}, Racks: []string{"/r1"}},
			{Path: "/in/1", Nodes: []string{"n1"}, Racks: []string{"/r1"}},
			{Path: "/in/2", Nodes: []string{"n2"}},
			{Path: "/in/3"},
		},
		Map: []string{"cat"}, Reduce: []string{"cat"}, Reducers: 2, Output: "/out",
		MapResources: scheduler.Resources{MemoryMB: 256, Vcores: 1}, ReduceResources: scheduler.Resources{MemoryMB: 512, Vcores: 1},
		ReducePlacement: placement,
	})
	return d
}

// Splits of one locality share one map ask, counting what is pending;
// an ask is sent again only when it changed or got containers; reduce
// asks wait for every map and then carry the bytes per node as feeders.
func TestMapReduceAsks(t *testing.T) {
	d := testJob(t, scheduler.PlacementCenterOfGravity)
	asks := d.asks(time.Time{})
	want := []scheduler.Ask{
		{AskID: mapAskBase, Count: 2, Locality: scheduler.Locality{Nodes: []string{"n1"}, Racks: []string{"/r1"}, Relax: true}},
		{AskID: mapAskBase + 1, Count: 1, Locality: scheduler.Locality{Nodes: []string{"n2"}, Relax: true}},
		{AskID: mapAskBase + 2, Count: 1, Locality: scheduler.Locality{Relax: true}},
	}
	if len(asks) != len(want) {
		t.Fatalf("first asks %+v: want the three map asks and no reduce ask", asks)
	}
	for i, a := range asks {
		if a.AskID != want[i].AskID || a.Count != want[i].Count || !reflect.DeepEqual(a.Locality, want[i].Locality) ||
			a.Resources.MemoryMB != 256 || a.Feeders != nil {
			t.Errorf("ask %d: %+v, want %+v", i, a, want[i])
		}
	}
	for _, a := range asks {
		d.sent[a.AskID] = a
	}
	if again := d.asks(time.Time{}); len(again) != 0 {
		t.Errorf("nothing changed, yet asks %+v were sent again", again)
	}
	// Every map done: n1 holds 30 and 10 bytes of partitions 0 and 1, n2 5
	// and 0, the split naming nothing ran on n3 (7 and 1).
	done := func(i int, node string, sizes ...int64) {
		d.maps[i].state, d.maps[i].sizes = taskDone, sizes
		d.maps[i].container = wrpc.ContainerInfo{ID: "c-" + node, NodeID: node, NodeAddress: node + ":1"}
	}
	done(0, "n1", 20, 4)
	done(1, "n1", 10, 6)
	done(2, "n2", 5, 0)
	done(3, "n3", 7, 1)
	asks = d.asks(time.Time{})
	byID := map[uint64]scheduler.Ask{}
	for _, a := range asks {
		byID[a.AskID] = a
	}
	r0, r1 := byID[reduceAskBase], byID[reduceAskBase+1]
	wantR0 := []scheduler.Feeder{{Node: "n1", Bytes: 30}, {Node: "n3", Bytes: 7}, {Node: "n2", Bytes: 5}}
	wantR1 := []scheduler.Feeder{{Node: "n1", Bytes: 10}, {Node: "n3", Bytes: 1}}
	if r0.Count != 1 || !reflect.DeepEqual(r0.Feeders, wantR0) || r1.Count != 1 || !reflect.DeepEqual(r1.Feeders, wantR1) ||
		r0.Resources.MemoryMB != 512 {
		t.Errorf("reduce asks %+v and %+v: want one each, feeders %v and %v (largest first, none of 0 bytes)", r0, r1, wantR0, wantR1)
	}
	for _, a := range []scheduler.Ask{r0, r1} {
		if err := a.Validate(); err != nil {
			t.Errorf("the servers would refuse reduce ask %d: %v", a.AskID, err)
		}
	}
	if a := byID[mapAskBase]; a.Count != 0 {
		t.Errorf("map ask with every map done: %+v, want count 0 to take it back", a)
	}
	anywhere := testJob(t, scheduler.PlacementAny)
	for i := range anywhere.maps {
		anywhere.maps[i].state, anywhere.maps[i].sizes = taskDone, []int64{1, 1}
	}
	for _, a := range anywhere.asks(time.Time{}) {
		if a.AskID >= reduceAskBase && (a.Feeders != nil || a.Count != 1) {
			t.Errorf("reduce_placement any: ask %+v, want one anywhere without feeders", a)
		}
	}
}

// A container is given to a split held on its node, else on its rack,
// else one of the ask it came from, else any pending; the locality counter
// says which.
func TestMapReducePicksTheNearestSplit(t *testing.T) {
	d := testJob(t, scheduler.PlacementCenterOfGravity)
	pick := func(node, rack string, ask uint64) (int, string) {
		i, loc := d.pickSplit(wrpc.ContainerInfo{NodeID: node, Rack: rack, AskID: ask})
		if i >= 0 {
			d.maps[i].state = taskRunning
		}
		return i, loc
	}
	if i, loc := pick("n2", "/r1", mapAskBase); i != 2 || loc != CounterMapsDataLocal {
		t.Errorf("a container on n2 from n1's ask: split %d (%s), want n2's split 2, data-local", i, loc)
	}
	if i, loc := pick("n5", "/r1", mapAskBase+2); i != 0 || loc != CounterMapsRackLocal {
		t.Errorf("a container on n5 in /r1: split %d (%s), want split 0, rack-local", i, loc)
	}
	if i, loc := pick("n6", "/r9", mapAskBase+2); i != 3 || loc != CounterMapsAnywhere {
		t.Errorf("a container on n6 from the ask for anywhere: split %d (%s), want split 3", i, loc)
	}
	if i, loc := pick("n6", "/r9", mapAskBase+2); i != 1 || loc != CounterMapsOffRack {
		t.Errorf("the last container: split %d (%s), want split 1, off-rack", i, loc)
	}
	if i, _ := pick("n1", "/r1", mapAskBase); i != -1 {
		t.Errorf("with nothing pending a container was given split %d", i)
	}
}

// A reduce's shuffle is counted by distance from each map's node to the
// reduce's, with its TND and WTND (ND 0 / 2 / 4).
func TestMapReduceCountsTheShuffle(t *testing.T) {
	d := testJob(t, scheduler.PlacementCenterOfGravity)
	d.rackOf = map[string]string{"n1": "/r1", "n2": "/r1", "n3": "/r2"}
	for i, n := range []string{"n1", "n1", "n2", "n3"} {
		d.maps[i].state, d.maps[i].sizes = taskDone, []int64{0, 0}
		d.maps[i].container = wrpc.ContainerInfo{ID: "c-" + n, NodeID: n}
	}
	d.reduces[0].feeds = []Feed{{Map: 0}, {Map: 1}, {Map: 2}, {Map: 3}}
	d.reduces[0].feedNodes = []string{"n1", "n1", "n2", "n3"}
	d.countShuffle(0, wrpc.ContainerInfo{NodeID: "n1"}, []int64{100, 50, 30, 20})
	c := d.counters
	if c[CounterShuffleNode] != 150 || c[CounterShuffleRack] != 30 || c[CounterShuffleOffRack] != 20 {
		t.Errorf("shuffle by distance %d/%d/%d, want 150 node-local, 30 rack-local, 20 off-rack",
			c[CounterShuffleNode], c[CounterShuffleRack], c[CounterShuffleOffRack])
	}
	// Feeders by node: n1 150 (ND 0), n2 30 (ND 2), n3 20 (ND 4).
	if c[ReduceCounter(0, "tnd")] != 6 || c[ReduceCounter(0, "wtnd")] != 2*30+4*20 || c[CounterShuffleWTND] != 140 {
		t.Errorf("TND %d, WTND %d (total %d); want 6 and 140", c[ReduceCounter(0, "tnd")], c[ReduceCounter(0, "wtnd")], c[CounterShuffleWTND])
	}
}

// testRetryJob is testJob on clock, its nodes answering as nodes does,
// with no jitter and max_failures_per_node 3.
func testRetryJob(t *testing.T, nodes startAnswers, clock *testClock) *MapReduce {
	d := testJob(t, scheduler.PlacementAny)
	d.nodes, d.now, d.blacklist = nodes, clock.now, newBlacklist(scheduler.DefaultMaxFailuresPerNode)
	d.backoff.rand = func() float64 { return 0 }
	return d
}

// mapAsked is how many map containers d asks for at now, over every map
// ask.
func mapAsked(d *MapReduce, now time.Time) int {
	n := 0
	for _, a := range d.asks(now) {
		if a.AskID < reduceAskBase {
			n += a.Count
		}
	}
	return n
}

// A map whose node stopped gracefully or was drained runs again at once
// and counts no failure, and so does a done map whose output was on a
// node that stopped; one lost with its node runs again after a backoff,
// counted against the node, not the task.
func TestMapReduceRunsWorkOfAStoppedNodeAgain(t *testing.T) {
	clock := &testClock{t: time.Unix(1000, 0)}
	d := testRetryJob(t, startAnswers{}, clock)
	var cs []wrpc.ContainerInfo
	for i := 0; i < 3; i++ {
		c := wrpc.ContainerInfo{ID: fmt.Sprintf("m-%d", i), NodeID: "n1", AskID: mapAskBase}
		if rel := d.assign(context.Background(), c); len(rel) != 0 {
			t.Fatalf("container %s released", c.ID)
		}
		cs = append(cs, c)
	}
	// Map 3 ran on n9, whose agent is stopped: its output goes with it.
	d.maps[3].state, d.maps[3].sizes = taskDone, []int64{1, 1}
	d.maps[3].container = wrpc.ContainerInfo{ID: "m-done", NodeID: "n9"}
	d.counters[CounterMapsDone] = 1
	running := wrpc.ContainerInfo{ID: "r-9", NodeID: "n9", AskID: reduceAskBase}
	d.reduces[0].state, d.byCID[running.ID] = taskRunning, taskRef{reduce: true}
	d.completed(context.Background(), ended(running, scheduler.ReasonNodeStopped, nil))
	if d.maps[3].state != taskPending || d.counters[CounterMapsDone] != 0 || d.counters[CounterMapsLostRerun] != 1 || d.maps[3].failures != 0 {
		t.Fatalf("a done map on a stopped node: %+v, counters %v; want it pending again, counted as lost output", d.maps[3], d.counters)
	}
	d.completed(context.Background(), ended(cs[0], scheduler.ReasonNodeStopped, nil))
	d.completed(context.Background(), ended(cs[1], scheduler.ReasonDrained, nil))
	if got := mapAsked(d, clock.now()); got != 3 {
		t.Fatalf("after a node_stopped and a drained map: asks for %d maps, want 3 (two again and the one on n9)", got)
	}
	d.completed(context.Background(), ended(cs[2], scheduler.ReasonLost, nil))
	if got := mapAsked(d, clock.now()); got != 3 {
		t.Fatalf("right after a loss: asks for %d maps, want 3 (the lost one waits its backoff)", got)
	}
	if in := d.nextRetry(clock.now()); in != retryBase {
		t.Fatalf("the lost map waits %s, want %s", in, retryBase)
	}
	clock.advance(retryBase)
	if got := mapAsked(d, clock.now()); got != 4 {
		t.Fatalf("after the backoff: asks for %d maps, want 4", got)
	}
	for i, m := range d.maps {
		if m.failures != 0 {
			t.Errorf("map %d: %d failures counted, want none", i, m.failures)
		}
	}
	if d.failed != "" || d.blacklist.failures["n1"] != 1 || d.blacklist.failures["n9"] != 0 || d.reduces[0].failures != 0 {
		t.Fatalf("job failed %q; failures on n1 %d, on n9 %d, of reduce 0 %d; want only the loss on n1 counted", d.failed,
			d.blacklist.failures["n1"], d.blacklist.failures["n9"], d.reduces[0].failures)
	}
}

// Three task attempts that fail on one node blacklist it for the job, and
// the task tries once more elsewhere: the job goes on.
func TestMapReduceBlacklistsANodeAfterThreeFailures(t *testing.T) {
	clock := &testClock{t: time.Unix(1000, 0)}
	d := testRetryJob(t, startAnswers{"bad": cannotRun}, clock)
	for i := 0; i < 3; i++ {
		c := wrpc.ContainerInfo{ID: fmt.Sprintf("m-%d", i), NodeID: "bad", AskID: mapAskBase + 2}
		if rel := d.assign(context.Background(), c); !slices.Equal(rel, []string{c.ID}) {
			t.Fatalf("try %d: release %v", i, rel)
		}
		if adds := d.blacklist.take(); (i < 2) != (len(adds) == 0) || i == 2 && !slices.Equal(adds, []string{"bad"}) {
			t.Fatalf("after %d failures on bad: additions %v", i+1, adds)
		}
		clock.advance(retryMax)
	}
	if d.failed != "" || d.maps[3].failures != 3 {
		t.Fatalf("job failed %q, map 3 failures %d: want 3 counted and the job going on", d.failed, d.maps[3].failures)
	}
	if in := d.nextRetry(clock.now()); in != 0 {
		t.Fatalf("map 3 still waits %s", in)
	}
	c := wrpc.ContainerInfo{ID: "m-ok", NodeID: "good", AskID: mapAskBase + 2}
	if rel := d.assign(context.Background(), c); len(rel) != 0 || d.maps[3].state != taskRunning {
		t.Fatalf("map 3 on a good node: release %v, state %v", rel, d.maps[3].state)
	}
}
