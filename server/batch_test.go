package server

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/weft-sched/weft/fsm"
	"github.com/weft-sched/weft/internal/testutil"
	wrpc "github.com/weft-sched/weft/rpc"
	"github.com/weft-sched/weft/scheduler"
)

// heldCommit wraps a batch's commit so that its first slots calls wait
// until release is closed (entered is closed once they all wait); it
// counts the calls and their sizes.
type heldCommit[Q, R any] struct {
	mu      sync.Mutex
	sizes   []int
	slots   int
	entered chan struct{}
	release chan struct{}
	next    commitFunc[Q, R]
}

// heldProposer holds the leader's container-update batches.
type heldProposer = heldCommit[fsm.ContainerUpdateRequest, error]

func newHeldProposer(next proposeFunc) *heldProposer {
	return newHeldCommit(batchesInFlight, next)
}

func newHeldCommit[Q, R any](slots int, next commitFunc[Q, R]) *heldCommit[Q, R] {
	return &heldCommit[Q, R]{slots: slots, entered: make(chan struct{}), release: make(chan struct{}), next: next}
}

func (h *heldCommit[Q, R]) propose(reqs []Q) ([]R, error) {
	h.mu.Lock()
	h.sizes = append(h.sizes, len(reqs))
	k := len(h.sizes)
	h.mu.Unlock()
	if k == h.slots {
		close(h.entered)
	}
	if k <= h.slots {
		<-h.release
	}
	return h.next(reqs)
}

func (h *heldCommit[Q, R]) calls() []int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([]int(nil), h.sizes...)
}

// Updates queued while every batch slot is taken go out together in the
// next batch;
// each waiter gets its own update's result; a failed batch fails every
// waiter in it.
func TestUpdateBatcherGroupsWhileSlotsAreTaken(t *testing.T) {
	const n = 20
	fail := errors.New("apply failed")
	h := newHeldProposer(func(updates []fsm.ContainerUpdateRequest) ([]error, error) {
		errs := make([]error, len(updates))
		for i, u := range updates {
			if u.NodeID == "rejected" {
				errs[i] = fmt.Errorf("rejected %s", u.NodeID)
			}
			if u.NodeID == "fail" {
				return nil, fail
			}
		}
		return errs, nil
	})
	b := newUpdateBatcher(h.propose)
	stop := make(chan struct{})
	defer close(stop)
	go b.run(stop)
	ctx := context.Background()

	results := make([]error, n)
	var wg sync.WaitGroup
	submitAt := func(i int) {
		id := fmt.Sprintf("n%d", i)
		if i == 7 {
			id = "rejected"
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			results[i] = updateOutcome(b.submit(ctx, stop, fsm.ContainerUpdateRequest{NodeID: id}))
		}()
	}
	fillSlots(t, h, submitAt)
	for i := batchesInFlight; i < n; i++ {
		submitAt(i)
	}
	testutil.WaitFor(t, 10*time.Second, func() bool { return len(b.in) == n-batchesInFlight })
	close(h.release)
	wg.Wait()
	if got := h.calls(); len(got) != batchesInFlight+1 || got[batchesInFlight] != n-batchesInFlight {
		t.Fatalf("batches %v, want %d of one, then one of %d", got, batchesInFlight, n-batchesInFlight)
	}
	for i, err := range results {
		if (i == 7) != (err != nil) {
			t.Fatalf("update %d: %v", i, err)
		}
	}

	// A batch whose apply fails fails every waiter in it.
	h2 := newHeldProposer(h.next)
	b.commit.Store(ptr(proposeFunc(h2.propose)))
	firstErrs := make([]error, batchesInFlight)
	fillSlots(t, h2, func(i int) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			firstErrs[i] = updateOutcome(b.submit(ctx, stop, fsm.ContainerUpdateRequest{NodeID: "n0"}))
		}()
	})
	failed := make([]error, 5)
	for i := range failed {
		id := fmt.Sprintf("m%d", i)
		if i == 3 {
			id = "fail"
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			failed[i] = updateOutcome(b.submit(ctx, stop, fsm.ContainerUpdateRequest{NodeID: id}))
		}()
	}
	testutil.WaitFor(t, 10*time.Second, func() bool { return len(b.in) == len(failed) })
	close(h2.release)
	wg.Wait()
	for _, err := range firstErrs {
		if err != nil {
			t.Fatalf("a batch before the failed one: %v", err)
		}
	}
	for i, err := range failed {
		if !errors.Is(err, fail) {
			t.Fatalf("waiter %d of the failed batch got %v", i, err)
		}
	}
}

// A batch of container updates stops at maxUpdateChanges changes: what
// is queued beyond goes in the next batch, in order, and an update heavier
// than the bound goes alone.
func TestUpdateBatcherBoundsChanges(t *testing.T) {
	var mu sync.Mutex
	var batches [][]string // node IDs per batch, in order
	h := newHeldProposer(func(updates []fsm.ContainerUpdateRequest) ([]error, error) {
		mu.Lock()
		defer mu.Unlock()
		var ids []string
		for _, u := range updates {
			ids = append(ids, u.NodeID)
		}
		batches = append(batches, ids)
		return make([]error, len(updates)), nil
	})
	b := newUpdateBatcher(h.propose)
	stop := make(chan struct{})
	defer close(stop)
	go b.run(stop)
	ctx := context.Background()
	withChanges := func(id string, n int) fsm.ContainerUpdateRequest {
		u := fsm.ContainerUpdateRequest{NodeID: id, Updates: make([]fsm.ContainerStatus, n/2)}
		u.Records = make([]fsm.ContainerRecord, n-n/2)
		return u
	}
	var wg sync.WaitGroup
	submit := func(u fsm.ContainerUpdateRequest) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := updateOutcome(b.submit(ctx, stop, u)); err != nil {
				t.Errorf("update %s: %v", u.NodeID, err)
			}
		}()
	}
	fillSlots(t, h, func(i int) { submit(withChanges(fmt.Sprintf("held%d", i), 1)) })
	// Queued one at a time so that their order is known: a, b fill a
	// batch (3,000 changes; c would pass 4,096), c and d the next, then
	// e goes alone (5,000 changes), then f.
	queued := []fsm.ContainerUpdateRequest{
		withChanges("a", 1500), withChanges("b", 1500), withChanges("c", 1500),
		withChanges("d", 2596), withChanges("e", maxUpdateChanges+904), withChanges("f", 1),
	}
	for i, u := range queued {
		submit(u)
		testutil.WaitFor(t, 10*time.Second, func() bool { return len(b.in) == i+1 })
	}
	close(h.release)
	wg.Wait()
	// Two batches are in flight at once, so their commits may start in
	// either order (the held ones' too); what each holds may not vary.
	var got []string
	for _, ids := range batches {
		if !strings.HasPrefix(ids[0], "held") {
			got = append(got, strings.Join(ids, " "))
		}
	}
	sort.Strings(got)
	if want := []string{"a b", "c d", "e", "f"}; !slices.Equal(got, want) {
		t.Fatalf("batches after the held ones: %q, want %q", got, want)
	}
}

func ptr[T any](v T) *T { return &v }

// fillSlots submits one request at a time (submitAt(i) for each slot i)
// and waits for each to be its own batch, held by h: afterwards every slot
// is taken, and what is submitted next queues.
func fillSlots[Q, R any](t *testing.T, h *heldCommit[Q, R], submitAt func(i int)) {
	t.Helper()
	for i := 0; i < h.slots; i++ {
		submitAt(i)
		testutil.WaitFor(t, 10*time.Second, func() bool { return len(h.calls()) == i+1 })
	}
	<-h.entered
}

// Concurrent heartbeats that each record a container are committed in
// fewer Raft entries than heartbeats, and each is answered only once its
// container is in the state.
func TestConcurrentHeartbeatsShareEntries(t *testing.T) {
	c := newTestCluster(t)
	l := c.start("s1", 1)
	c.waitForLeader()
	app := submit(t, c, l, "batched")
	const n = 12
	nodes := make([]*fakeNode, n)
	for i := range nodes {
		nodes[i] = registerFake(t, c, l, fmt.Sprintf("n%d", i), scheduler.Resources{MemoryMB: 8192, Vcores: 8})
	}
	waitAMPlaced(t, l, app)
	minter := amNode(t, l, app, nodes) // the AMRMProxy that allocates the app's containers
	reports := make([][]wrpc.ContainerReport, n)
	for i, nd := range nodes {
		reports[i] = []wrpc.ContainerReport{{
			ID: fmt.Sprintf("o-%s-1-%d", minter.id, i), AppID: app, Attempt: 1, AskID: 1, Resources: scheduler.Resources{MemoryMB: 64, Vcores: 1},
			ExecutionType: string(scheduler.Opportunistic), State: scheduler.ContainerQueued, AllocatedAt: 1}}
		minter.mint(t, nd.id, reports[i])
	}
	h := newHeldProposer(l.proposeUpdates)
	l.updates.commit.Store(ptr(proposeFunc(h.propose)))
	before := l.raft.AppliedIndex()

	errs := make([]error, n)
	var wg sync.WaitGroup
	beat := func(i int) {
		defer wg.Done()
		nd := nodes[i]
		id := reports[i][0].ID
		req := &wrpc.HeartbeatRequest{NodeID: nd.id, Epoch: nd.epoch, Secret: nd.secret, Containers: reports[i]}
		var hb wrpc.HeartbeatResponse
		if errs[i] = c.call(l, "Node.Heartbeat", req, &hb); errs[i] != nil {
			return
		}
		if _, ok := l.State().Container(id); !ok {
			errs[i] = fmt.Errorf("heartbeat of %s answered before %s was applied", nd.id, id)
		}
	}
	fillSlots(t, h, func(i int) { wg.Add(1); go beat(i) })
	for i := batchesInFlight; i < n; i++ {
		wg.Add(1)
		go beat(i)
	}
	testutil.WaitFor(t, 10*time.Second, func() bool { return len(l.updates.in) == n-batchesInFlight })
	close(h.release)
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Fatalf("heartbeat %d: %v", i, err)
		}
	}
	if got := h.calls(); len(got) != batchesInFlight+1 {
		t.Fatalf("%d heartbeats made batches %v, want %d", n, got, batchesInFlight+1)
	}
	if entries := l.raft.AppliedIndex() - before; entries >= n {
		t.Fatalf("%d heartbeats took %d Raft entries", n, entries)
	}
}

// A leader that has not applied its barrier (still replaying its log)
// answers heartbeats and registrations with the retryable not_ready: it
// never tells a live node to register again from an old state.
func TestUnreadyLeaderAnswersNotReady(t *testing.T) {
	c := newTestCluster(t)
	l := c.start("s1", 1)
	c.waitForLeader()
	n := registerFake(t, c, l, "n1", scheduler.Resources{MemoryMB: 1024, Vcores: 1})
	l.leaderReady.Store(false)
	var hb wrpc.HeartbeatResponse
	err := c.call(l, "Node.Heartbeat", &wrpc.HeartbeatRequest{NodeID: "ghost", Epoch: 1, Secret: nodeSecret("ghost")}, &hb)
	if !errors.Is(err, wrpc.ErrNotReady) || !wrpc.IsRetryable(err) || hb.ReRegister {
		t.Fatalf("heartbeat to an unready leader: %v, re-register %v; want not_ready", err, hb.ReRegister)
	}
	var reg wrpc.NodeRegisterResponse
	err = c.call(l, "Node.Register", &wrpc.NodeRegisterRequest{ID: "n2", Address: "127.0.0.1:1",
		Capacity: scheduler.Resources{MemoryMB: 1024, Vcores: 1}, Secret: nodeSecret("n2")}, &reg)
	if !errors.Is(err, wrpc.ErrNotReady) {
		t.Fatalf("registration at an unready leader: %v; want not_ready", err)
	}
	l.leaderReady.Store(true)
	if err := c.call(l, "Node.Heartbeat", &wrpc.HeartbeatRequest{NodeID: "ghost", Epoch: 1, Secret: nodeSecret("ghost")}, &hb); err != nil || !hb.ReRegister {
		t.Fatalf("heartbeat of an unknown node at a ready leader: %v, re-register %v", err, hb.ReRegister)
	}
	n.heartbeat(t, l, wrpc.HeartbeatRequest{})
}

// A heartbeat that reaches the leader after a newer one of its node (its
// agent gave up on it and went on) is refused and changes nothing: it
// would report the containers started since as gone, and have them
// recorded lost. Heartbeats in order still record a container gone.
func TestStaleHeartbeatIsRefused(t *testing.T) {
	c := newTestCluster(t)
	l := c.start("s1", 1)
	c.waitForLeader()
	app := submit(t, c, l, "stale")
	nd := registerFake(t, c, l, "n1", scheduler.Resources{MemoryMB: 8192, Vcores: 8})
	waitAMPlaced(t, l, app) // on n1, whose AMRMProxy then allocates the app's containers
	id := "o-n1-1-1"
	queued := []wrpc.ContainerReport{{ID: id, AppID: app, Attempt: 1, AskID: 1, Resources: scheduler.Resources{MemoryMB: 64, Vcores: 1},
		ExecutionType: string(scheduler.Opportunistic), State: scheduler.ContainerQueued, AllocatedAt: 1}}
	nd.mint(t, nd.id, queued)
	beat := func(seq uint64, reports []wrpc.ContainerReport) error {
		var hb wrpc.HeartbeatResponse
		return c.call(l, "Node.Heartbeat", &wrpc.HeartbeatRequest{NodeID: nd.id, Epoch: nd.epoch, Secret: nd.secret, Seq: seq, Containers: reports}, &hb)
	}
	if err := beat(2, queued); err != nil {
		t.Fatal(err)
	}
	if got, ok := l.State().Container(id); !ok || got.State != scheduler.ContainerQueued {
		t.Fatalf("after heartbeat 2: %+v, %v", got, ok)
	}
	if err := beat(1, nil); !errors.Is(err, wrpc.ErrConflict) || !strings.Contains(err.Error(), "stale") {
		t.Fatalf("heartbeat 1 after heartbeat 2: %v, want a stale conflict", err)
	}
	// Heartbeat 2 again is a retry (a follower resending it alone after its
	// batch timed out): it is answered, and changes nothing the first did not.
	if err := beat(2, queued); err != nil {
		t.Fatalf("heartbeat 2 again: %v", err)
	}
	if got, _ := l.State().Container(id); got.State != scheduler.ContainerQueued {
		t.Fatalf("a stale heartbeat changed %s to %s (%s)", id, got.State, got.Reason)
	}
	if err := beat(3, nil); err != nil {
		t.Fatal(err)
	}
	if got, _ := l.State().Container(id); got.State != scheduler.ContainerCompleted || got.Reason != scheduler.ReasonLost {
		t.Fatalf("heartbeat 3 without %s: %s (%s), want completed lost", id, got.State, got.Reason)
	}
	// Unnumbered heartbeats (an agent of an older version) are all taken.
	if err := beat(0, nil); err != nil {
		t.Fatal(err)
	}
}

// amNode returns, of nodes, the one the app's AM was placed on.
func amNode(t testing.TB, l *Server, app string, nodes []*fakeNode) *fakeNode {
	t.Helper()
	a, ok := l.State().App(app)
	if !ok || len(a.Attempts) == 0 {
		t.Fatalf("app %s has no AM attempt", app)
	}
	for _, n := range nodes {
		if n.id == a.Attempts[len(a.Attempts)-1].NodeID {
			return n
		}
	}
	t.Fatalf("app %s's AM is on none of the test's nodes", app)
	return nil
}
