package server

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/rpc"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hashicorp/raft"
	"github.com/weft-sched/weft/fsm"
	"github.com/weft-sched/weft/internal/inflight"
	"github.com/weft-sched/weft/internal/testutil"
	wrpc "github.com/weft-sched/weft/rpc"
	"github.com/weft-sched/weft/scheduler"
)

// waitFresh waits until s answers blocking reads from its own state.
func waitFresh(t *testing.T, s *Server) {
	t.Helper()
	testutil.WaitFor(t, 15*time.Second, func() bool { fresh, _ := s.node.Fresh(); return fresh })
}

// answer is what a call started in the background came to.
type answer struct {
	err  error
	list wrpc.AppListResponse
}

// blockingAppList starts a blocking App.List on client, waiting for an
// index past min for up to five minutes.
func blockingAppList(client *rpc.Client, token string, min uint64) <-chan answer {
	out := make(chan answer, 1)
	go func() {
		var a answer
		req := &wrpc.AppListRequest{RequestHeader: wrpc.RequestHeader{AuthToken: token, MinQueryIndex: min, MaxWait: wrpc.MaxBlockingWait}}
		a.err = wireError(client.Call("App.List", req, &a.list))
		out <- a
	}()
	return out
}

// wireError gives a server's answer over a raw connection ("[code]
// message") its code back, as the rpc package's clients do.
func wireError(err error) error {
	se, ok := err.(rpc.ServerError)
	if !ok {
		return err
	}
	code, msg, ok := strings.Cut(strings.TrimPrefix(string(se), "["), "] ")
	if !ok {
		return err
	}
	return &wrpc.Error{Code: wrpc.Code(code), Message: msg}
}

// await waits for a background call's answer.
func await(t *testing.T, what string, ch <-chan answer) answer {
	t.Helper()
	select {
	case a := <-ch:
		return a
	case <-time.After(30 * time.Second):
		t.Fatalf("%s: no answer in 30s", what)
		return answer{}
	}
}

// stillWaiting fails the test if a background call has answered.
func stillWaiting(t *testing.T, what string, ch <-chan answer) {
	t.Helper()
	select {
	case a := <-ch:
		t.Fatalf("%s answered (%v) where it should wait", what, a.err)
	default:
	}
}

// dialFrom opens a plain RPC connection to s from ip, as a client on
// another host would.
func dialFrom(t *testing.T, s *Server, ip string) *rpc.Client {
	t.Helper()
	d := net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(ip)}}
	conn, err := d.Dial("tcp", s.RPCAddr())
	if err != nil {
		t.Fatal(err)
	}
	conn.Write([]byte{byte(wrpc.ConnRPC)})
	client := newRawClient(conn)
	t.Cleanup(func() { client.Close() })
	return client
}

// A blocking read that reaches a follower waits on the follower's own
// state (nothing is forwarded for it), wakes on a write made through the
// leader, and says how stale it may be; a consistent read is forwarded.
// When the follower loses its leader, a blocking read waiting there
// answers at once and says it knows no leader.
func TestFollowerAnswersBlockingReadsFromItsOwnState(t *testing.T) {
	c := newTestCluster(t)
	c.tune = func(cfg *Config) { cfg.RaftConfig = steadyRaftConfig() } // the follower stays fresh throughout
	s1 := c.start("s1", 3)
	c.start("s2", 3, s1.SerfAddr())
	c.start("s3", 3, s1.SerfAddr())
	c.waitForLeader()
	c.waitForVoters("s1", "s2", "s3")
	l, f := c.leader(), c.follower()
	waitFresh(t, f)
	var first wrpc.AppListResponse
	if err := c.call(f, "App.List", &wrpc.AppListRequest{RequestHeader: wrpc.RequestHeader{AllowStale: true}}, &first); err != nil {
		t.Fatal(err)
	}
	client := dialFrom(t, f, "127.0.0.1")
	waiting := blockingAppList(client, "", first.Index)
	id := submit(t, c, l, "watched")
	got := await(t, "a blocking read through a follower", waiting)
	if got.err != nil || len(got.list.Apps) != 1 || got.list.Apps[0].ID != id {
		t.Fatalf("blocking read answered %v, apps %+v; want app %s", got.err, got.list.Apps, id)
	}
	if !got.list.KnownLeader || got.list.Index <= first.Index {
		t.Fatalf("answer's meta %+v: want a known leader and an index past %d", got.list.ResponseMeta, first.Index)
	}
	if peak := f.node.ClientForwards().Peak(); peak != 0 {
		t.Fatalf("the follower forwarded %d calls for a blocking read it could answer itself", peak)
	}
	var consistent wrpc.AppListResponse
	if err := c.call(f, "App.List", &wrpc.AppListRequest{}, &consistent); err != nil || len(consistent.Apps) != 1 {
		t.Fatalf("consistent read through the follower: %v, %d apps", err, len(consistent.Apps))
	}
	if peak := f.node.ClientForwards().Peak(); peak != 1 {
		t.Fatalf("a consistent read through the follower forwarded %d calls, want 1", peak)
	}

	// The follower loses every other server: the read waiting on it
	// answers long before its five minutes.
	waiting = blockingAppList(client, "", got.list.Index)
	stillWaiting(t, "a blocking read with nothing new", waiting)
	for _, id := range c.ids() {
		if id != f.NodeID() {
			c.stop(id)
		}
	}
	got = await(t, "a blocking read on a follower that lost its leader", waiting)
	if got.err != nil || got.list.KnownLeader && got.list.LastContact < time.Second {
		t.Fatalf("answered %v with meta %+v: want the state it had and that it lost the leader", got.err, got.list.ResponseMeta)
	}
	if len(got.list.Apps) != 1 {
		t.Fatalf("answered %d apps, want the one it holds", len(got.list.Apps))
	}
}

// A waiting blocking read looks at its index on every change, and builds
// its answer only when it answers: many readers waiting while the state
// changes cost a lookup each, not a listing each.
func TestBlockingQueryBuildsOnlyWhenItAnswers(t *testing.T) {
	c := newTestCluster(t)
	s := c.start("solo", 1)
	c.waitForLeader()
	waitFresh(t, s)
	start := s.State().Index()
	var watched, built atomic.Int64
	watch := func(st *fsm.State) (uint64, error) {
		watched.Add(1)
		return st.TableIndex(fsm.TableApps), nil
	}
	build := func(st *fsm.State) (uint64, error) {
		built.Add(1)
		return st.TableIndex(fsm.TableApps), nil
	}
	hdr := &wrpc.RequestHeader{MinQueryIndex: max(start, s.State().TableIndex(fsm.TableApps)), MaxWait: time.Minute}
	done := make(chan error, 1)
	var meta wrpc.ResponseMeta
	go func() { done <- s.blockingQuery(context.Background(), hdr, &meta, watch, build) }()
	// Changes that are not apps wake it; it only looks.
	for i := 0; i < 5; i++ {
		var wr wrpc.WriteResponse
		if err := c.call(s, "Queue.Apply", &wrpc.QueueApplyRequest{Config: twoQueueConfig(float64(i + 1))}, &wr); err != nil {
			t.Fatal(err)
		}
		testutil.WaitFor(t, 5*time.Second, func() bool { return watched.Load() > int64(i+1) })
	}
	if n := built.Load(); n != 0 {
		t.Fatalf("the waiting read built its answer %d times before anything it reads changed", n)
	}
	id := submit(t, c, s, "news")
	select {
	case err := <-done:
		if err != nil || built.Load() != 1 {
			t.Fatalf("answered %v after %d builds; want one build", err, built.Load())
		}
	case <-time.After(30 * time.Second):
		t.Fatalf("the read was not woken by app %s", id)
	}
}

// Blocking queries are bounded per client address and per token: past a
// bound the call is answered rate_limited at once, and the places come
// back when the calls end. A caller whose token may read no queue is
// refused before it waits or costs a place.
func TestBlockingQueriesAreBoundedPerClientAndPerToken(t *testing.T) {
	c := newTestCluster(t)
	c.acl = true
	c.tune = func(cfg *Config) { cfg.BlockingQueries = BlockingLimits{PerClient: 3, PerToken: 4, Total: 100} }
	s := c.start("solo", 1)
	c.waitForLeader()
	waitFresh(t, s)
	mgmt, reader := bootstrapReader(t, c, s)
	index := s.State().Index()

	anon := dialFrom(t, s, "127.0.0.2")
	denied := await(t, "an anonymous blocking read", blockingAppList(anon, "", index))
	if !errors.Is(denied.err, wrpc.ErrPermissionDenied) {
		t.Fatalf("an anonymous blocking read answered %v, want permission denied", denied.err)
	}
	if _, peak := s.blockingWaiting(); peak != 0 {
		t.Fatalf("a refused caller took %d places", peak)
	}

	a := dialFrom(t, s, "127.0.0.2")
	var waiting []<-chan answer
	for i := 0; i < 3; i++ {
		waiting = append(waiting, blockingAppList(a, reader, index))
	}
	testutil.WaitFor(t, 10*time.Second, func() bool { now, _ := s.blockingWaiting(); return now == 3 })
	over := await(t, "a fourth blocking read from one address", blockingAppList(a, reader, index))
	if !errors.Is(over.err, wrpc.ErrRateLimited) {
		t.Fatalf("a fourth blocking read from 127.0.0.2 answered %v, want rate_limited", over.err)
	}
	// From another address the token has one place left.
	b := dialFrom(t, s, "127.0.0.3")
	waiting = append(waiting, blockingAppList(b, reader, index))
	testutil.WaitFor(t, 10*time.Second, func() bool { now, _ := s.blockingWaiting(); return now == 4 })
	over = await(t, "a fifth blocking read with one token", blockingAppList(b, reader, index))
	if !errors.Is(over.err, wrpc.ErrRateLimited) {
		t.Fatalf("a fifth blocking read with one token answered %v, want rate_limited", over.err)
	}
	// Another token from that address still waits.
	waiting = append(waiting, blockingAppList(b, mgmt, index))
	testutil.WaitFor(t, 10*time.Second, func() bool { now, _ := s.blockingWaiting(); return now == 5 })
	for _, w := range waiting {
		stillWaiting(t, "an admitted blocking read", w)
	}
	if _, peak := s.blockingWaiting(); peak != 5 {
		t.Fatalf("%d blocking reads held at once, want 5", peak)
	}

	// The callers go away: every place comes back.
	a.Close()
	b.Close()
	testutil.WaitFor(t, 10*time.Second, func() bool {
		now, _ := s.blockingWaiting()
		return now == 0 && s.blocking.byClient.Keys() == 0 && s.blocking.byToken.Keys() == 0
	})
}

// bootstrapReader makes the management token and a token that may read
// root.default only; it returns both secrets.
func bootstrapReader(t *testing.T, c *testCluster, s *Server) (mgmt, reader string) {
	t.Helper()
	var boot wrpc.ACLTokenResponse
	breq := &wrpc.ACLBootstrapRequest{}
	breq.AccessorID, breq.SecretID = wrpc.NewACLIDs()
	if err := c.call(s, "ACL.Bootstrap", breq, &boot); err != nil {
		t.Fatal(err)
	}
	m := aclClient{c: c, secret: breq.SecretID}
	if err := m.call(s, "ACL.PolicyApply", &wrpc.ACLPolicyApplyRequest{Policy: wrpc.ACLPolicy{Name: "reader", Rules: `queue "root.default" { policy = "read" }`}}, &wrpc.WriteResponse{}); err != nil {
		t.Fatal(err)
	}
	treq := &wrpc.ACLTokenCreateRequest{Name: "reader", Policies: []string{"reader"}}
	treq.AccessorID, treq.SecretID = wrpc.NewACLIDs()
	if err := m.call(s, "ACL.TokenCreate", treq, &wrpc.ACLTokenResponse{}); err != nil {
		t.Fatal(err)
	}
	return breq.SecretID, treq.SecretID
}

// A flood of client calls through a follower is bounded where it arrives:
// while AM long-polls from a client connection hold the follower's places
// for forwarded client calls, a burst of client reads through it is
// refused rate_limited at once and never more are forwarded than the
// bound, while an agent's heartbeats and registration through the same
// follower (forwarded on connections and places of their own) are all
// answered and its nodes stay READY. When the held calls end, client calls
// through the follower are served again.
func TestClientFloodThroughAFollowerStarvesNoHeartbeat(t *testing.T) {
	c := newTestCluster(t)
	c.tune = func(cfg *Config) {
		cfg.ClientForwards = inflight.Limits{Total: 4, PerKey: 4}
		cfg.RaftConfig = steadyRaftConfig() // one leader throughout, on a busy machine too
	}
	s1 := c.start("s1", 3)
	c.start("s2", 3, s1.SerfAddr())
	c.start("s3", 3, s1.SerfAddr())
	l := c.waitForLeader()
	c.waitForVoters("s1", "s2", "s3")
	f := c.follower()
	node := registerFake(t, c, f, "n1", scheduler.Resources{MemoryMB: 4096, Vcores: 4})
	app := submit(t, c, l, "held")
	tok, _ := node.amToken(t, l, app)
	if err := c.call(l, "AM.Register", &wrpc.AMRegisterRequest{AppID: app, Attempt: 1, Token: tok}, &wrpc.AMRegisterResponse{}); err != nil {
		t.Fatal(err)
	}

	// Four AM long-polls from a client connection hold every place: the
	// leader answers each only when its wait ends, and each is sent again.
	held := wrpc.NewPool(nil)
	defer held.Shutdown()
	ctx, release := context.WithCancel(context.Background())
	defer release()
	var holders sync.WaitGroup
	for i := 0; i < 4; i++ {
		holders.Add(1)
		go func() {
			defer holders.Done()
			for ctx.Err() == nil {
				req := &wrpc.AMAllocateRequest{AppID: app, Attempt: 1, Token: tok}
				req.MinQueryIndex, req.MaxWait = 1<<40, wrpc.MaxBlockingWait
				held.Call(ctx, f.RPCAddr(), "AM.Allocate", req, &wrpc.AMAllocateResponse{})
			}
		}()
	}
	testutil.WaitFor(t, 10*time.Second, func() bool { total, _ := f.node.ClientForwards().InFlight(""); return total == 4 })

	flood := wrpc.NewPool(nil)
	defer flood.Shutdown()
	var wg sync.WaitGroup
	var answered, limited atomic.Int64
	var otherErr atomic.Value
	for i := 0; i < 32; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for j := 0; j < 20; j++ {
				var resp wrpc.AppListResponse
				switch err := flood.Call(context.Background(), f.RPCAddr(), "App.List", &wrpc.AppListRequest{}, &resp); {
				case err == nil:
					answered.Add(1)
				case errors.Is(err, wrpc.ErrRateLimited):
					limited.Add(1)
				default:
					otherErr.Store(fmt.Sprint(err))
				}
			}
		}()
	}
	for seq := uint64(1); seq <= 20; seq++ {
		node.heartbeat(t, f, wrpc.HeartbeatRequest{Seq: seq})
	}
	registerFake(t, c, f, "n2", scheduler.Resources{MemoryMB: 4096, Vcores: 4})
	wg.Wait()
	t.Logf("flood: %d refused rate_limited, %d answered", limited.Load(), answered.Load())
	if other := otherErr.Load(); other != nil || limited.Load() == 0 {
		t.Fatalf("%d of %d flood calls refused rate_limited; another answer: %v", limited.Load(), 32*20, other)
	}
	if peak := f.node.ClientForwards().Peak(); peak > 4 {
		t.Fatalf("the follower forwarded %d client calls at once, past its bound of 4", peak)
	}
	for _, id := range []string{"n1", "n2"} {
		if n, ok := l.State().Node(id); !ok || n.Status != scheduler.NodeReady {
			t.Fatalf("node %s after the flood: %+v", id, n)
		}
	}

	// The held calls end: the follower forwards client calls again.
	release()
	holders.Wait()
	testutil.WaitFor(t, 10*time.Second, func() bool { total, _ := f.node.ClientForwards().InFlight(""); return total == 0 })
	var resp wrpc.AppListResponse
	if err := c.call(f, "App.List", &wrpc.AppListRequest{}, &resp); err != nil || len(resp.Apps) != 1 {
		t.Fatalf("a read through the follower after the flood: %v, %d apps", err, len(resp.Apps))
	}
}

// steadyRaftConfig is Raft's own timing, for tests that need one leader
// throughout while they load the machine.
func steadyRaftConfig() *raft.Config {
	c := raft.DefaultConfig()
	c.CommitTimeout = 5 * time.Millisecond
	return c
}
