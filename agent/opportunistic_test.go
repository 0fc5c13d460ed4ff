package agent

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/weft-sched/weft/internal/identity"
	"github.com/weft-sched/weft/internal/testutil"
	"github.com/weft-sched/weft/rpc"
	"github.com/weft-sched/weft/scheduler"
)

// The AMRMProxy splits an Allocate: opportunistic containers come from its
// own list at once, named after its node and epoch; guaranteed ones from
// the leader. Started opportunistic containers reach the servers through
// their nodes' heartbeats.
func TestAMRMProxySplitsAllocate(t *testing.T) {
	w := startAMWorld(t, 2, nil)
	w.waitList(2)

	g := scheduler.Ask{AskID: 1, Count: 2, Resources: oneCore, ExecutionType: scheduler.Guaranteed}
	resp := w.allocate(rpc.AMAllocateRequest{Asks: []scheduler.Ask{oppAsk(2, 3, true), g}})
	prefix := fmt.Sprintf("o-%s-%d-", w.home.NodeID(), w.home.Epoch())
	var opp []rpc.ContainerInfo
	gotG := 0
	for _, c := range resp.Allocated {
		if c.ExecutionType == string(scheduler.Opportunistic) {
			opp = append(opp, c)
		} else {
			gotG++
		}
	}
	if len(opp) != 3 {
		t.Fatalf("%d opportunistic containers in the first answer, want all 3 at once: %+v", len(opp), resp.Allocated)
	}
	nodes := map[string]bool{}
	for _, c := range opp {
		if !strings.HasPrefix(c.ID, prefix) || c.AskID != 2 || c.NodeAddress != w.agent(c.NodeID).RPCAddr() {
			t.Fatalf("container %+v: want an ID from %s and its node's address", c, prefix)
		}
		nodes[c.NodeID] = true
	}
	if len(nodes) != 2 {
		t.Fatalf("three containers on %v: round-robin should use both nodes", nodes)
	}
	// The guaranteed ask goes to the leader; its containers follow.
	testutil.WaitFor(t, 15*time.Second, func() bool {
		g.Count = 2 - gotG
		r := w.allocate(rpc.AMAllocateRequest{Asks: []scheduler.Ask{oppAsk(2, 0, true), g}})
		for _, c := range r.Allocated {
			if c.ExecutionType != string(scheduler.Guaranteed) || c.AskID != 1 {
				t.Fatalf("unexpected container %+v", c)
			}
			gotG++
		}
		return gotG >= 2
	})
	if gotG != 2 {
		t.Fatalf("%d guaranteed containers for an ask of 2", gotG)
	}

	// Started, the opportunistic containers are recorded from their nodes.
	for _, c := range opp {
		if r := w.start(c); r.State != "RUNNING" {
			t.Fatalf("start %s: %+v", c.ID, r)
		}
	}
	testutil.WaitFor(t, 15*time.Second, func() bool {
		for _, c := range opp {
			ci, ok := w.container(c.ID)
			if !ok || ci.State != "RUNNING" || ci.ExecutionType != "OPPORTUNISTIC" || ci.NodeID != c.NodeID {
				return false
			}
		}
		return true
	})
	var nl rpc.NodeListResponse
	testutil.WaitFor(t, 5*time.Second, func() bool {
		w.c.Call(context.Background(), "Node.List", &rpc.RequestHeader{}, &nl)
		running := 0
		for _, n := range nl.Nodes {
			running += n.RunningOpportunistic
		}
		return running == 3
	})

	// Releasing a container the servers never heard of (allocated here,
	// never started) succeeds; so does releasing it again, as an AM whose
	// call failed would.
	spare := w.allocate(rpc.AMAllocateRequest{Asks: []scheduler.Ask{oppAsk(5, 1, true)}}).Allocated[0]
	for i := 0; i < 2; i++ {
		w.allocate(rpc.AMAllocateRequest{Releases: []string{spare.ID, "o-gone-1-1"}})
	}
	if _, known := w.container(spare.ID); known {
		t.Fatalf("a released, never started container was recorded")
	}

	// A malformed ask is refused whole, naming the field, and takes no room.
	bad := oppAsk(4, 5, true)
	bad.Resources.MemoryMB = -256
	if _, err := w.am.Allocate(context.Background(), rpc.AMAllocateRequest{Asks: []scheduler.Ask{bad}}, time.Second); err == nil ||
		!strings.Contains(err.Error(), "memory_mb must not be negative") {
		t.Fatalf("an ask of negative memory: %v", err)
	}
	// A node refuses to start a container of a size no ask could have.
	forged := opp[0]
	forged.ID, forged.Token, forged.Resources = prefix+"999999", prefix+"999999", scheduler.Resources{MemoryMB: 256, Vcores: -4}
	if _, err := w.am.StartContainer(context.Background(), forged, rpc.LaunchSpec{Command: []string{"true"}}); err == nil ||
		!strings.Contains(err.Error(), "vcores must not be negative") {
		t.Fatalf("a container of negative vcores was started: %v", err)
	}

	// Only the AM the agent launched may use its proxy.
	for _, bad := range []struct {
		token, addr string
	}{{"not-the-token", w.home.RPCAddr()}, {w.am.Token, w.otherAgent().RPCAddr()}} {
		am := rpc.NewAMClient(w.app, 1, bad.token, bad.addr)
		_, err := am.Allocate(context.Background(), rpc.AMAllocateRequest{Asks: []scheduler.Ask{oppAsk(3, 1, true)}}, time.Second)
		am.Close()
		if !errors.Is(err, rpc.ErrPermissionDenied) {
			t.Fatalf("a foreign AM at %s was served: %v", bad.addr, err)
		}
	}
}

func (w *amWorld) otherAgent() *Agent {
	for _, a := range w.agents {
		if a != w.home {
			return a
		}
	}
	w.t.Fatal("one agent only")
	return nil
}

// With every server gone the proxy still allocates from its list, says its
// answer is partial and keeps the AM's index; once no list has come from
// the leader for a while it renews the room from the nodes themselves.
func TestAMRMProxyAllocatesWithoutServers(t *testing.T) {
	w := startAMWorld(t, 2, nil)
	w.waitList(2)
	before := w.allocate(rpc.AMAllocateRequest{})
	w.srv.Shutdown()
	testutil.WaitFor(t, 10*time.Second, w.home.serversDown)

	// Take every place the list offers (idle nodes: 7 free vcores beside
	// the AM, 10 queue places each).
	resp := w.allocate(rpc.AMAllocateRequest{Asks: []scheduler.Ask{oppAsk(1, 100, true)}})
	if len(resp.Allocated) != 27 || !resp.Partial || resp.Index != before.Index {
		t.Fatalf("without servers: %d containers, partial %v, index %d (was %d); want the list's 27 places, partial, index kept",
			len(resp.Allocated), resp.Partial, resp.Index, before.Index)
	}
	allocated := time.Now()
	// No list from the leader: the agent asks the nodes, which run none of
	// those containers (never started). A renewal computed within the
	// margin of the allocations still takes their places off (their AMs
	// may be starting them); the first computed after it finds the room
	// whole again.
	margin := w.home.sched.margin
	testutil.WaitFor(t, 15*time.Second, func() bool {
		return w.home.sched.view().At > allocated.Add(margin).UnixNano()
	})
	resp = w.allocate(rpc.AMAllocateRequest{Asks: []scheduler.Ask{oppAsk(1, 100, true)}})
	if len(resp.Allocated) != 27 || !resp.Partial {
		t.Fatalf("after renewing from the nodes: %d containers (partial %v), want 27", len(resp.Allocated), resp.Partial)
	}
	seen := map[string]bool{}
	for _, c := range resp.Allocated {
		if seen[c.ID] {
			t.Fatalf("container ID %s minted twice", c.ID)
		}
		seen[c.ID] = true
	}
}

// enforce_execution_type: when no node can take opportunistic work, a
// non-enforced opportunistic ask is served as guaranteed; an enforced one
// waits for room.
func TestEnforceExecutionType(t *testing.T) {
	// Nodes that queue nothing: once their resources are in use, no node
	// can take opportunistic work and the list is empty.
	w := startAMWorld(t, 2, func(c *Config) {
		c.OpportunisticQueueLength = 0
		c.Resources = scheduler.Resources{MemoryMB: 2048, Vcores: 2}
	})
	w.waitList(2)
	resp := w.allocate(rpc.AMAllocateRequest{Asks: []scheduler.Ask{oppAsk(1, 3, true)}})
	if len(resp.Allocated) != 3 { // the AM's node has 1 free vcore, the other 2
		t.Fatalf("%d containers, want the 3 free vcores", len(resp.Allocated))
	}
	for _, c := range resp.Allocated {
		w.start(c)
	}
	testutil.WaitFor(t, 15*time.Second, func() bool { return len(w.home.LeastLoaded()) == 0 })

	// Enforced: nothing, and no guaranteed ask reaches the leader.
	for i := 0; i < 2; i++ {
		if r := w.allocate(rpc.AMAllocateRequest{Asks: []scheduler.Ask{oppAsk(2, 1, true)}}); len(r.Allocated) != 0 {
			t.Fatalf("an enforced opportunistic ask got %+v with no room anywhere", r.Allocated)
		}
	}
	var st rpc.AppStatusResponse
	if err := w.c.Call(context.Background(), "App.Status", &rpc.AppRequest{AppID: w.app}, &st); err != nil || !st.App.Pending.IsZero() {
		t.Fatalf("pending %v (%v): an enforced ask must not turn guaranteed", st.App.Pending, err)
	}
	// Not enforced: the leader places it as guaranteed (opportunistic work
	// takes no guaranteed capacity, so there is room).
	var got rpc.ContainerInfo
	testutil.WaitFor(t, 15*time.Second, func() bool {
		r := w.allocate(rpc.AMAllocateRequest{Asks: []scheduler.Ask{oppAsk(2, 1, false)}})
		if len(r.Allocated) > 0 {
			got = r.Allocated[0]
			return true
		}
		return false
	})
	if got.ExecutionType != "GUARANTEED" || got.AskID != 2 {
		t.Fatalf("fallback container %+v, want a guaranteed one for ask 2", got)
	}
	// Once satisfied, the guaranteed twin is withdrawn.
	w.allocate(rpc.AMAllocateRequest{Asks: []scheduler.Ask{oppAsk(2, 0, false)}})
	testutil.WaitFor(t, 5*time.Second, func() bool {
		w.c.Call(context.Background(), "App.Status", &rpc.AppRequest{AppID: w.app}, &st)
		return st.App.Pending.IsZero()
	})
}

// A running opportunistic container is promoted through the proxy: the
// servers count it as guaranteed and its node stops treating it as
// evictable.
func TestPromotionThroughTheProxy(t *testing.T) {
	w := startAMWorld(t, 1, nil)
	w.waitList(1)
	c := w.allocate(rpc.AMAllocateRequest{Asks: []scheduler.Ask{oppAsk(1, 1, true)}}).Allocated[0]
	w.start(c)

	var promoted []string
	var failures []rpc.PromotionFailure
	testutil.WaitFor(t, 15*time.Second, func() bool {
		r := w.allocate(rpc.AMAllocateRequest{Promotions: []string{c.ID, "o-nobody-1-1"}})
		promoted, failures = r.Promoted, r.PromotionFailures
		return len(promoted) == 1 // until its node's heartbeat has recorded it running
	})
	if promoted[0] != c.ID || len(failures) != 1 || failures[0].ID != "o-nobody-1-1" || !failures[0].Retryable {
		t.Fatalf("promoted %v, failures %+v", promoted, failures)
	}
	ci, _ := w.container(c.ID)
	if ci.ExecutionType != "GUARANTEED" {
		t.Fatalf("servers still see %+v as opportunistic", ci)
	}
	var nl rpc.NodeListResponse
	w.c.Call(context.Background(), "Node.List", &rpc.RequestHeader{}, &nl)
	if n := nl.Nodes[0]; n.RunningGuaranteed != 2 || n.RunningOpportunistic != 0 {
		t.Fatalf("node %+v: the AM and the promoted container run guaranteed", n)
	}
	testutil.WaitFor(t, 5*time.Second, func() bool {
		for _, r := range w.home.mgr.reports() {
			if r.ID == c.ID {
				return r.ExecutionType == "GUARANTEED"
			}
		}
		return false
	})
	// Asking again is answered as promoted (an AM whose answer was lost
	// may ask twice); a container guaranteed from the start is refused.
	r := w.allocate(rpc.AMAllocateRequest{Promotions: []string{c.ID, w.amID}})
	if len(r.Promoted) != 1 || r.Promoted[0] != c.ID || len(r.PromotionFailures) != 1 || r.PromotionFailures[0].Retryable {
		t.Fatalf("second promotion: promoted %v, failures %+v", r.Promoted, r.PromotionFailures)
	}
}

// Container.Promote needs a container token of the container as
// guaranteed, which only the leader mints: with none, the AM's token or the
// container's own (opportunistic) token the node refuses and changes
// nothing. A promotion the servers do not hold that reaches a node all the
// same (a leaked token) is undone by the node's next heartbeat: the
// replicated state is the only truth.
func TestUnrecordedPromotionIsUndone(t *testing.T) {
	w := startAMWorld(t, 1, nil)
	w.waitList(1)
	c := w.allocate(rpc.AMAllocateRequest{Asks: []scheduler.Ask{oppAsk(1, 1, true)}}).Allocated[0]
	w.start(c)
	testutil.WaitFor(t, 15*time.Second, func() bool { ci, ok := w.container(c.ID); return ok && ci.State == "RUNNING" })
	reported := func() string {
		for _, r := range w.home.mgr.reports() {
			if r.ID == c.ID {
				return r.ExecutionType
			}
		}
		return ""
	}
	pool := rpc.NewPool(nil)
	defer pool.Shutdown()
	promote := func(token string) error {
		return pool.Call(context.Background(), c.NodeAddress, "Container.Promote", &rpc.ContainerIDRequest{ID: c.ID, Token: token}, &struct{}{})
	}
	for _, tok := range []string{"", w.am.Token, c.Token} {
		if err := promote(tok); !errors.Is(err, rpc.ErrPermissionDenied) {
			t.Fatalf("Container.Promote with token %.12q…: %v, want permission denied", tok, err)
		}
		if got := reported(); got != "OPPORTUNISTIC" {
			t.Fatalf("a refused promotion changed the container to %q", got)
		}
	}
	leaked, err := serverKeyring(t, w.srv).Sign(identity.Claims{Kind: identity.KindContainer, AppID: w.app, Attempt: 1, ContainerID: c.ID, NodeID: c.NodeID,
		Resources: c.Resources, ExecutionType: scheduler.Guaranteed, Expiry: time.Now().Add(time.Minute).UnixNano()})
	if err != nil {
		t.Fatal(err)
	}
	if err := promote(leaked); err != nil {
		t.Fatal(err)
	}
	if got := reported(); got != "GUARANTEED" {
		t.Fatalf("after Container.Promote the node reports %q", got)
	}
	testutil.WaitFor(t, 10*time.Second, func() bool { return reported() == "OPPORTUNISTIC" })
	if ci, _ := w.container(c.ID); ci.ExecutionType != "OPPORTUNISTIC" {
		t.Fatalf("servers hold %+v", ci)
	}
}

// Queue rebalancing: the node whose queue is longer than the leader's limit
// sheds its newest queued containers, reason shed; the other node keeps
// its queue.
func TestRebalancingShedsTheNewestQueued(t *testing.T) {
	w := startAMWorld(t, 2, func(c *Config) {
		c.Resources = scheduler.Resources{MemoryMB: 2048, Vcores: 2}
		if c.NodeID == "n1" {
			c.OpportunisticQueueLength = 30
		}
	})
	// First a limit of 30 whatever the queues: nothing sheds while they fill.
	w.setOpportunistic(scheduler.OpportunisticConfig{Distributed: true, SortingNodesInterval: time.Second, NodesUsed: 10,
		QueueLimitStdev: 1, MinQueueLength: 30, MaxQueueLength: 30})
	testutil.WaitFor(t, 15*time.Second, func() bool { _, limit := w.home.sched.snapshot(); return limit == 30 })
	w.waitList(2)
	resp := w.allocate(rpc.AMAllocateRequest{Asks: []scheduler.Ask{oppAsk(1, 100, true)}})
	// Start in allocation order: each node's queue is in that order.
	started := map[string][]string{}
	for _, c := range resp.Allocated {
		if r := w.start(c); r.State != "RUNNING" && r.State != "QUEUED" {
			t.Fatalf("start %s: %+v", c.ID, r)
		}
		started[c.NodeID] = append(started[c.NodeID], c.ID)
	}
	n1, n2 := w.agent("n1"), w.agent("n2")
	if q1, q2 := n1.mgr.load().Queued, n2.mgr.load().Queued; q1 != 30 || q2 != 10 {
		t.Fatalf("queues n1=%d n2=%d, want 30 and 10 (every place taken)", q1, q2)
	}
	// Now k = 0: the limit is the mean queue length, which the longer queue
	// follows down, shedding once two computations agree, until the queues
	// are even: 20, 15, 12, 11, 10.
	w.setOpportunistic(scheduler.OpportunisticConfig{Distributed: true, SortingNodesInterval: time.Second, NodesUsed: 10,
		QueueLimitStdev: 0, MinQueueLength: 0, MaxQueueLength: 30})
	testutil.WaitFor(t, 30*time.Second, func() bool { return n1.mgr.load().Queued == 10 })
	shed := map[string]bool{}
	testutil.WaitFor(t, 15*time.Second, func() bool {
		for _, ci := range w.containers() {
			if ci.Reason == "shed" {
				shed[ci.ID] = true
			}
		}
		return len(shed) == 20
	})
	if n2.mgr.load().Queued != 10 {
		t.Fatalf("n2's queue changed to %d: only the longest queue sheds", n2.mgr.load().Queued)
	}
	// The shed ones are exactly n1's last 20 started (its newest queued).
	ids := started["n1"]
	for i, id := range ids {
		if want := i >= len(ids)-20; shed[id] != want {
			t.Fatalf("n1 container %d of %d (%s) shed=%v; want the newest 20 shed", i, len(ids), id, shed[id])
		}
		if ci, _ := w.container(id); shed[id] && (ci.StartedAt != 0 || ci.ExitCode != nil) {
			t.Fatalf("shed container %+v had started", ci)
		}
	}
}

// With opportunistic.distributed = false the proxies forward opportunistic
// asks, and the leader allocates them from its list, with IDs of its own.
func TestCentralizedOpportunisticAllocation(t *testing.T) {
	_, agents, c := cluster(t, 2)
	cfg := scheduler.DefaultQueueConfig()
	cfg.Scheduler.Opportunistic.Distributed = false
	var wr rpc.WriteResponse
	if err := c.Call(context.Background(), "Queue.Apply", &rpc.QueueApplyRequest{Config: cfg}, &wr); err != nil {
		t.Fatal(err)
	}
	for _, a := range agents {
		testutil.WaitFor(t, 15*time.Second, func() bool { return a.sched.view().Centralized })
	}
	runOpportunisticApp(t, c, 12, "c-") // IDs of containers the leader placed
}

// The dshell AM runs an opportunistic app through the proxy: every task
// container is opportunistic, minted by an agent, and exits 0.
func TestOpportunisticAppRunsThroughTheAMRMProxy(t *testing.T) {
	_, agents, c := cluster(t, 2)
	for _, a := range agents {
		// No AM runs yet: each agent holds one entry of the list of two.
		testutil.WaitFor(t, 15*time.Second, func() bool { return a.sched.view().ListKnown && len(a.LeastLoaded()) == 1 })
	}
	runOpportunisticApp(t, c, 12, "o-n") // IDs an agent minted
}

// runOpportunisticApp runs n opportunistic `sleep 0.2` tasks with the
// dshell AM and checks that every task container was opportunistic, had an
// ID beginning with idPrefix, and exited 0.
func runOpportunisticApp(t *testing.T, c *rpc.Client, n int, idPrefix string) {
	t.Helper()
	var sub rpc.AppSubmitResponse
	spec := scheduler.AppSpec{User: "test", DShell: scheduler.DShell{NumContainers: n, ExecutionType: scheduler.Opportunistic, EnforceExecutionType: true,
		Resources: scheduler.Resources{MemoryMB: 512, Vcores: 1}, Command: []string{"sh", "-c", "sleep 0.2"}}}
	if err := c.Call(context.Background(), "App.Submit", &rpc.AppSubmitRequest{Spec: spec}, &sub); err != nil {
		t.Fatal(err)
	}
	if app := waitApp(t, c, sub.AppID); app.State != "FINISHED" {
		t.Fatalf("app %+v", app)
	}
	var list rpc.ContainerListResponse
	testutil.WaitFor(t, 10*time.Second, func() bool {
		c.Call(context.Background(), "Container.List", &rpc.ContainerListRequest{AppID: sub.AppID}, &list)
		exited := 0
		for _, ci := range list.Containers {
			if !ci.IsAM && ci.Reason == "exited" && ci.ExitCode != nil && *ci.ExitCode == 0 {
				exited++
			}
		}
		return exited == n
	})
	for _, ci := range list.Containers {
		if !ci.IsAM && (ci.ExecutionType != "OPPORTUNISTIC" || !strings.HasPrefix(ci.ID, idPrefix)) {
			t.Fatalf("task container %+v: want an opportunistic container with an ID from %s", ci, idPrefix)
		}
	}
}

// A node told to register again stops its containers, and reports them
// after the registration: one the servers never heard of (an AMRMProxy
// allocated it, and it started after the node's last report) is recorded
// as lost, so its AM hears of its end instead of waiting for it for ever.
func TestContainersStoppedForReRegistrationAreReported(t *testing.T) {
	w := startAMWorld(t, 2, nil)
	w.waitList(2)
	other := w.otherAgent()
	ask := oppAsk(1, 1, true)
	ask.Locality = scheduler.Locality{Nodes: []string{other.NodeID()}}
	resp := w.allocate(rpc.AMAllocateRequest{Asks: []scheduler.Ask{ask}})
	if len(resp.Allocated) != 1 || resp.Allocated[0].NodeID != other.NodeID() {
		t.Fatalf("allocated %+v, want one container on %s", resp.Allocated, other.NodeID())
	}
	ci := resp.Allocated[0]
	// The servers take the node out of service before they hear of the
	// container; it starts on the node all the same, before the node's
	// next heartbeat (held off until then) learns it is out.
	func() {
		other.heartbeating.Lock()
		defer other.heartbeating.Unlock()
		var wr rpc.WriteResponse
		if err := w.c.Call(context.Background(), "Node.Deregister", &rpc.NodeDeregisterRequest{ID: other.NodeID(), Epoch: other.Epoch(), Secret: other.secret}, &wr); err != nil {
			t.Fatal(err)
		}
		if r := w.start(ci); r.State != string(scheduler.ContainerRunning) {
			t.Fatalf("start: %+v", r)
		}
	}()
	testutil.WaitFor(t, 15*time.Second, func() bool {
		c, ok := w.container(ci.ID)
		return ok && c.State == string(scheduler.ContainerCompleted) && c.Reason == string(scheduler.ReasonLost)
	})
	testutil.WaitFor(t, 15*time.Second, func() bool {
		for _, c := range w.allocate(rpc.AMAllocateRequest{}).Completed {
			if c.ID == ci.ID {
				return true
			}
		}
		return false
	})
	if other.Epoch() < 2 {
		t.Fatalf("the node did not register again (epoch %d)", other.Epoch())
	}
}
