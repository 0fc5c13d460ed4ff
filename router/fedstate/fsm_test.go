package fedstate

import (
	"bytes"
	"errors"
	"fmt"
	"math/rand/v2"
	"reflect"
	"testing"

	"github.com/hashicorp/raft"
	"github.com/weft-sched/weft/scheduler"
	"github.com/weft-sched/weft/scheduler/federation"
)

// applier applies commands to an FSM at increasing indexes.
type applier struct {
	t     testing.TB
	f     *FSM
	index uint64
}

func newApplier(t testing.TB) *applier { return &applier{t: t, f: New()} }

func (a *applier) apply(typ MessageType, body any) any {
	a.t.Helper()
	buf, err := Encode(typ, body)
	if err != nil {
		a.t.Fatal(err)
	}
	a.index++
	return a.f.Apply(&raft.Log{Index: a.index, Type: raft.LogCommand, Data: buf})
}

func (a *applier) ok(typ MessageType, body any) any {
	a.t.Helper()
	res := a.apply(typ, body)
	if err, isErr := res.(error); isErr {
		a.t.Fatalf("command %d: %v", typ, err)
	}
	return res
}

func (a *applier) rejected(kind error, typ MessageType, body any) {
	a.t.Helper()
	res := a.apply(typ, body)
	err, isErr := res.(error)
	var r *Rejection
	if !isErr || !errors.As(err, &r) || !errors.Is(err, kind) {
		a.t.Fatalf("command %d: %v, want a %v rejection", typ, res, kind)
	}
}

func res(mem, vcores int64) scheduler.Resources {
	return scheduler.Resources{MemoryMB: mem, Vcores: vcores}
}

func beat(id string, seq uint64, vcores int64, now int64) *HeartbeatRequest {
	return &HeartbeatRequest{ID: id, Healthy: true, Servers: []string{id + ":8030"}, Leader: id + "-s1", Term: 1, Seq: seq,
		Capacity: res(vcores*1000, vcores), NodesReady: 2, NodesTotal: 2, Racks: []string{"r-" + id}, Now: now}
}

func TestHeartbeatsDriveTheSubclusterStates(t *testing.T) {
	a := newApplier(t)
	sc := a.ok(HeartbeatType, &HeartbeatRequest{ID: "sc1", Servers: []string{"a:1"}, Term: 1, Seq: 1, Reason: "no ready node", Now: 10}).(*Subcluster)
	if sc.State != federation.StateNew || sc.FirstSeen != 10 {
		t.Fatalf("first, unhealthy heartbeat: %+v", sc)
	}
	sc = a.ok(HeartbeatType, beat("sc1", 2, 100, 20)).(*Subcluster)
	if sc.State != federation.StateRunning || sc.StateSince != 20 || sc.FirstSeen != 10 || sc.Capacity.Vcores != 100 {
		t.Fatalf("healthy heartbeat: %+v", sc)
	}
	a.rejected(ErrConflict, HeartbeatType, beat("sc1", 2, 100, 30)) // not newer
	a.rejected(ErrConflict, HeartbeatType, &HeartbeatRequest{ID: "sc1", Servers: []string{"a:1"}, Term: 0, Seq: 9, Now: 30})
	// A new leader's term restarts the sequence.
	next := beat("sc1", 1, 100, 40)
	next.Term = 2
	a.ok(HeartbeatType, next)

	// Silence: the leader marks it LOST, unless a heartbeat came meanwhile.
	a.rejected(ErrConflict, MarkLostType, &MarkLostRequest{ID: "sc1", LastHeartbeat: 20, Now: 100})
	sc = a.ok(MarkLostType, &MarkLostRequest{ID: "sc1", LastHeartbeat: 40, Now: 100}).(*Subcluster)
	if sc.State != federation.StateLost || sc.StateSince != 100 {
		t.Fatalf("marked lost: %+v", sc)
	}
	back := beat("sc1", 2, 100, 110)
	back.Term = 2
	if sc = a.ok(HeartbeatType, back).(*Subcluster); sc.State != federation.StateRunning {
		t.Fatalf("a lost sub-cluster that heartbeats again: %s", sc.State)
	}

	// Decommissioned stays so whatever it reports, and only then is forgotten.
	a.rejected(ErrConflict, AdminType, &AdminRequest{ID: "sc1", Action: Forget})
	a.ok(AdminType, &AdminRequest{ID: "sc1", Action: Decommission, Now: 120})
	again := beat("sc1", 3, 100, 130)
	again.Term = 2
	if sc = a.ok(HeartbeatType, again).(*Subcluster); sc.State != federation.StateDecommissioned {
		t.Fatalf("decommissioned then heartbeat: %s", sc.State)
	}
	a.rejected(ErrInvalid, AdminType, &AdminRequest{ID: "sc1", Action: "pause"})
	a.ok(AdminType, &AdminRequest{ID: "sc1", Action: Forget})
	if a.f.State().Subcluster("sc1") != nil {
		t.Fatal("forgotten sub-cluster still there")
	}
	a.rejected(ErrNotFound, AdminType, &AdminRequest{ID: "sc1", Action: Decommission})
}

func TestHeartbeatBounds(t *testing.T) {
	a := newApplier(t)
	bad := beat("SC1", 1, 1, 1)
	a.rejected(ErrInvalid, HeartbeatType, bad)
	noServers := beat("sc1", 1, 1, 1)
	noServers.Servers = nil
	a.rejected(ErrInvalid, HeartbeatType, noServers)
	racks := beat("sc1", 1, 1, 1)
	racks.Racks = make([]string, MaxRacks+1)
	a.rejected(ErrInvalid, HeartbeatType, racks)
	nilLoad := beat("sc1", 1, 1, 1)
	nilLoad.Queues = map[string]*federation.QueueLoad{"root.a": nil}
	a.rejected(ErrInvalid, HeartbeatType, nilLoad)
	for i := 0; i < MaxSubclusters; i++ {
		a.ok(HeartbeatType, beat(fmt.Sprintf("sc%d", i), 1, 1, 1))
	}
	a.rejected(ErrFull, HeartbeatType, beat("one-more", 1, 1, 1))
	if n := len(a.f.State().Subclusters()); n != MaxSubclusters {
		t.Fatalf("%d sub-clusters", n)
	}
}

func put(req string, queue string) *HomePutRequest {
	return &HomePutRequest{RequestID: req, Queue: queue, User: "u", Demand: res(1000, 1), Seed: Seed(req), Now: 50}
}

func TestHomePutRanksRetriesAndAdvances(t *testing.T) {
	a := newApplier(t)
	a.rejected(ErrNoRoute, HomePutType, put("r0", "root.a")) // no sub-cluster yet
	a.ok(HeartbeatType, beat("sc1", 1, 100, 1))
	a.ok(HeartbeatType, beat("sc2", 1, 300, 1))
	a.ok(HeartbeatType, &HeartbeatRequest{ID: "sc3", Servers: []string{"c:1"}, Term: 1, Seq: 1, Now: 1}) // NEW: not routable

	h := a.ok(HomePutType, put("r1", "root.a")).(*AppHome)
	if h.AppID != "app-f1" || h.Home != "sc2" || h.State != HomeRouting || !reflect.DeepEqual(h.Ranking, []string{"sc2", "sc1"}) {
		t.Fatalf("load policy, sc2 the emptiest: %+v", h)
	}
	if sc := a.f.State().Subcluster("sc2"); sc.Routed.Vcores != 1 || sc.Homes != 1 {
		t.Fatalf("routed to sc2 not counted: %+v", sc)
	}
	// The same request again, through any router: the same mapping.
	if again := a.ok(HomePutType, put("r1", "root.a")).(*AppHome); again.AppID != "app-f1" {
		t.Fatalf("a retried request got %s", again.AppID)
	}
	if got := a.f.State().AppHomeByRequest("r1"); got == nil || got.AppID != "app-f1" {
		t.Fatalf("AppHomeByRequest: %+v", got)
	}

	// sc2 refuses: on to sc1; sc1 refuses: FAILED, nothing left to try.
	a.rejected(ErrConflict, HomeAdvanceType, &HomeAdvanceRequest{AppID: "app-f1", From: "sc1", Outcome: "refused", Now: 60})
	h = a.ok(HomeAdvanceType, &HomeAdvanceRequest{AppID: "app-f1", From: "sc2", Outcome: "refused", Message: "no queue root.a", Now: 60}).(*AppHome)
	if h.Home != "sc1" || h.State != HomeRouting || len(h.Tries) != 1 {
		t.Fatalf("after sc2 refused: %+v", h)
	}
	h = a.ok(HomeAdvanceType, &HomeAdvanceRequest{AppID: "app-f1", From: "sc1", Outcome: "refused", Now: 61}).(*AppHome)
	if h.State != HomeFailed || h.Home != "" || len(h.Tries) != 2 {
		t.Fatalf("after both refused: %+v", h)
	}
	a.rejected(ErrConflict, HomeSettleType, &HomeSettleRequest{AppID: "app-f1", Home: "sc1", State: HomeSubmitted})

	// Settling: only at the current home, only once.
	h2 := a.ok(HomePutType, put("r2", "root.a")).(*AppHome)
	a.rejected(ErrConflict, HomeSettleType, &HomeSettleRequest{AppID: h2.AppID, Home: "sc9", State: HomeSubmitted})
	a.rejected(ErrInvalid, HomeSettleType, &HomeSettleRequest{AppID: h2.AppID, Home: h2.Home, State: HomeRouting})
	a.rejected(ErrInvalid, HomeSettleType, &HomeSettleRequest{AppID: h2.AppID, Home: h2.Home, State: HomeSubmitted, Now: 70})
	a.ok(HomeSettleType, &HomeSettleRequest{AppID: h2.AppID, Home: h2.Home, State: HomeSubmitted, LocalID: "app-17", Now: 70})
	if got := a.f.State().AppHomeByLocal(h2.Home, "app-17"); got == nil || got.AppID != h2.AppID {
		t.Fatalf("AppHomeByLocal: %+v", got)
	}
	a.rejected(ErrConflict, HomeAdvanceType, &HomeAdvanceRequest{AppID: h2.AppID, From: h2.Home, Outcome: "late"})

	// IN_DOUBT (a try timed out after it went out): never sent elsewhere
	// on a home that stops answering, only on its refusal.
	h3 := a.ok(HomePutType, put("r3", "root.a")).(*AppHome)
	a.ok(HomeSettleType, &HomeSettleRequest{AppID: h3.AppID, Home: h3.Home, State: HomeInDoubt, Now: 71})
	a.rejected(ErrConflict, HomeAdvanceType, &HomeAdvanceRequest{AppID: h3.AppID, From: h3.Home, Outcome: OutcomeUnreachable, Now: 72})
	if got := a.f.State().AppHome(h3.AppID); got.State != HomeInDoubt || got.Home != h3.Home {
		t.Fatalf("an IN_DOUBT app moved on without its home's answer: %+v", got)
	}
	if got := a.ok(HomeAdvanceType, &HomeAdvanceRequest{AppID: h3.AppID, From: h3.Home, Outcome: OutcomeRefused, Now: 73}).(*AppHome); got.Home == h3.Home {
		t.Fatalf("an IN_DOUBT app its home refused stayed there: %+v", got)
	}
	// The fence: fenced moves an IN_DOUBT app on only once its home is
	// decommissioned.
	h4 := a.ok(HomePutType, put("r4", "root.a")).(*AppHome)
	a.ok(HomeSettleType, &HomeSettleRequest{AppID: h4.AppID, Home: h4.Home, State: HomeInDoubt, Now: 74})
	a.rejected(ErrConflict, HomeAdvanceType, &HomeAdvanceRequest{AppID: h4.AppID, From: h4.Home, Outcome: OutcomeFenced, Now: 75})
	a.ok(AdminType, &AdminRequest{ID: h4.Home, Action: Decommission})
	if got := a.ok(HomeAdvanceType, &HomeAdvanceRequest{AppID: h4.AppID, From: h4.Home, Outcome: OutcomeFenced, Now: 76}).(*AppHome); got.Home == h4.Home {
		t.Fatalf("an IN_DOUBT app fenced off its decommissioned home stayed there: %+v", got)
	}
	a.ok(AdminType, &AdminRequest{ID: h4.Home, Action: Recommission})

	// A heartbeat of the home resets what was routed to it.
	a.ok(HeartbeatType, beat("sc2", 2, 300, 80))
	if sc := a.f.State().Subcluster("sc2"); !sc.Routed.IsZero() {
		t.Fatalf("routed after a heartbeat: %+v", sc.Routed)
	}

	// GC drops settled mappings by age.
	if n := a.ok(HomeGCType, &HomeGCRequest{Before: 51, FailedBefore: 0}).(int); n != 1 {
		t.Fatalf("GC dropped %d, want the submitted one", n)
	}
	if a.f.State().AppHome(h2.AppID) != nil || a.f.State().AppHomeByRequest("r2") != nil || a.f.State().AppHomeByLocal(h2.Home, "app-17") != nil ||
		a.f.State().AppHome("app-f1") == nil {
		t.Fatal("GC dropped the wrong mappings")
	}
}

func TestPoliciesAndWeightsDecideTheHome(t *testing.T) {
	a := newApplier(t)
	for _, id := range []string{"sc1", "sc2", "sc3"} {
		a.ok(HeartbeatType, beat(id, 1, 100, 1))
	}
	a.rejected(ErrInvalid, PolicyApplyType, &PolicyApplyRequest{Policies: []federation.Policy{{Queue: "root.a", Router: "fastest"}}})
	a.ok(PolicyApplyType, &PolicyApplyRequest{Policies: []federation.Policy{
		{Router: federation.Weighted},
		{Queue: "root.pinned", Router: federation.Priority, Weights: map[string]uint32{"sc3": 5, "sc1": 1}},
		{Queue: "root.closed", Router: federation.Reject},
	}})
	a.rejected(ErrInvalid, HomePutType, put("closed", "root.closed.x"))
	if h := a.ok(HomePutType, put("p", "root.pinned.x")).(*AppHome); h.Home != "sc3" || !reflect.DeepEqual(h.Ranking, []string{"sc3", "sc1"}) {
		t.Fatalf("priority: %+v", h)
	}
	// The generator's weights: sc2 gets nothing, sc1 a quarter.
	a.ok(WeightsWriteType, &WeightsWriteRequest{Generation: 1, Weights: map[string]map[string]uint32{"root.w": {"sc1": 250, "sc2": 0, "sc3": 750}}})
	a.rejected(ErrConflict, WeightsWriteType, &WeightsWriteRequest{Generation: 1})
	counts := map[string]int{}
	for i := 0; i < 100; i++ {
		counts[a.ok(HomePutType, put(fmt.Sprint("w", i), "root.w")).(*AppHome).Home]++
	}
	if counts["sc2"] != 0 || counts["sc1"] < 23 || counts["sc1"] > 27 || counts["sc3"] < 73 {
		t.Fatalf("100 apps by weights 250/0/750: %v", counts)
	}
	// Replace drops the policies not given.
	a.ok(PolicyApplyType, &PolicyApplyRequest{Replace: true, Policies: []federation.Policy{{Router: federation.Load}}})
	if ps := a.f.State().Policies(); len(ps) != 1 || ps[0].Router != federation.Load {
		t.Fatalf("after replace: %+v", ps)
	}
}

func TestUnknownCommandsHaltUnlessIgnorable(t *testing.T) {
	a := newApplier(t)
	a.ok(HeartbeatType, beat("sc1", 1, 100, 1))
	a.index++
	if res := a.f.Apply(&raft.Log{Index: a.index, Type: raft.LogCommand, Data: []byte{byte(0x40 | ignoreUnknownFlag), 0xc0}}); res != nil {
		t.Fatalf("ignorable unknown command: %v", res)
	}
	a.index++
	res := a.f.Apply(&raft.Log{Index: a.index, Type: raft.LogCommand, Data: []byte{0x40, 0xc0}})
	var h *HaltError
	if err, _ := res.(error); !errors.As(err, &h) || a.f.Halted() == nil {
		t.Fatalf("unknown command: %v", res)
	}
	// Halted: nothing applies any more, the state stays.
	before := a.f.State()
	a.apply(HeartbeatType, beat("sc2", 1, 100, 2))
	if a.f.State() != before || a.f.State().Subcluster("sc2") != nil {
		t.Fatal("a halted FSM applied a command")
	}
}

// randomLog drives an FSM through a random but valid-looking history.
func randomLog(t testing.TB, seed uint64, n int) *applier {
	a := newApplier(t)
	r := rand.New(rand.NewPCG(seed, 1))
	seqs := map[string]uint64{}
	ids := []string{"sc1", "sc2", "sc3", "sc4"}
	for i := 0; i < n; i++ {
		id := ids[r.IntN(len(ids))]
		switch r.IntN(6) {
		case 0, 1:
			seqs[id]++
			b := beat(id, seqs[id], int64(50+r.IntN(200)), int64(i))
			b.Healthy = r.IntN(5) > 0
			b.Used = res(int64(r.IntN(50))*1000, int64(r.IntN(50)))
			b.Queues = map[string]*federation.QueueLoad{"root.a": {Used: res(1, 1)}}
			a.apply(HeartbeatType, b)
		case 2:
			a.apply(HomePutType, put(fmt.Sprint("req", r.IntN(n)), "root.a"))
		case 3:
			if hs := a.f.State().AppHomes(); len(hs) > 0 {
				h := hs[r.IntN(len(hs))]
				a.apply(HomeAdvanceType, &HomeAdvanceRequest{AppID: h.AppID, From: h.Home, Outcome: "refused", Now: int64(i)})
			}
		case 4:
			if hs := a.f.State().AppHomes(); len(hs) > 0 {
				h := hs[r.IntN(len(hs))]
				a.apply(HomeSettleType, &HomeSettleRequest{AppID: h.AppID, Home: h.Home, State: HomeSubmitted, LocalID: fmt.Sprint("app-", i), Now: int64(i)})
				a.apply(SpanAddType, &SpanAddRequest{AppID: h.AppID, Subcluster: id, Now: int64(i)})
			}
		case 5:
			if sc := a.f.State().Subcluster(id); sc != nil {
				a.apply(MarkLostType, &MarkLostRequest{ID: id, LastHeartbeat: sc.LastHeartbeat, Now: int64(i)})
			}
		}
	}
	a.ok(PolicyApplyType, &PolicyApplyRequest{Policies: []federation.Policy{{Queue: "root.a", Router: federation.Weighted}}})
	a.ok(WeightsWriteType, &WeightsWriteRequest{Generation: 3, Weights: map[string]map[string]uint32{"root.a": {"sc1": 10, "sc2": 990}}})
	return a
}

func TestSpansOfASubmittedApp(t *testing.T) {
	a := newApplier(t)
	a.ok(HeartbeatType, beat("sc1", 1, 100, 1))
	a.ok(HeartbeatType, beat("sc2", 1, 100, 1))
	a.ok(HeartbeatType, beat("sc3", 1, 100, 1))
	h := a.ok(HomePutType, put("r1", "root.a")).(*AppHome)
	other := "sc1"
	if h.Home == other {
		other = "sc2"
	}
	a.rejected(ErrConflict, SpanAddType, &SpanAddRequest{AppID: h.AppID, Subcluster: other}) // not SUBMITTED yet
	a.ok(HomeSettleType, &HomeSettleRequest{AppID: h.AppID, Home: h.Home, State: HomeSubmitted, LocalID: "app-3", Now: 5})
	a.rejected(ErrNotFound, SpanAddType, &SpanAddRequest{AppID: "app-f99", Subcluster: other})
	a.rejected(ErrNotFound, SpanAddType, &SpanAddRequest{AppID: h.AppID, Subcluster: "sc9"})
	a.rejected(ErrInvalid, SpanAddType, &SpanAddRequest{AppID: h.AppID, Subcluster: h.Home})
	got := a.ok(SpanAddType, &SpanAddRequest{AppID: h.AppID, Subcluster: other, Now: 6}).(*AppHome)
	again := a.ok(SpanAddType, &SpanAddRequest{AppID: h.AppID, Subcluster: other, Now: 7}).(*AppHome)
	if !reflect.DeepEqual(got.Spans, []string{other}) || !reflect.DeepEqual(again.Spans, []string{other}) {
		t.Fatalf("spans %v then %v, want [%s] once", got.Spans, again.Spans, other)
	}
	if by := a.f.State().AppHomeByLocal(h.Home, "app-3"); by == nil || !reflect.DeepEqual(by.Spans, []string{other}) {
		t.Fatalf("the mapping by local ID does not hold the span: %+v", by)
	}
}

func TestSnapshotRoundTrip(t *testing.T) {
	a := randomLog(t, 7, 500)
	var buf bytes.Buffer
	if err := WriteSnapshot(&buf, a.f.State()); err != nil {
		t.Fatal(err)
	}
	restored := New()
	if err := restored.Restore(nopCloser{bytes.NewReader(buf.Bytes())}); err != nil {
		t.Fatal(err)
	}
	var again bytes.Buffer
	if err := WriteSnapshot(&again, restored.State()); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(buf.Bytes(), again.Bytes()) {
		t.Fatal("a restored state snapshots differently")
	}
	s, r := a.f.State(), restored.State()
	if s.Index() != r.Index() || len(s.AppHomes()) == 0 || !reflect.DeepEqual(s.AppHomes(), r.AppHomes()) ||
		!reflect.DeepEqual(s.Subclusters(), r.Subclusters()) || !reflect.DeepEqual(s.Policies(), r.Policies()) {
		t.Fatal("restored state differs")
	}
	// The restored FSM goes on exactly as the original: same next app ID,
	// same ranking sequence.
	a2 := &applier{t: t, f: restored, index: a.index}
	for i := 0; i < 20; i++ {
		x := a.apply(HomePutType, put(fmt.Sprint("after", i), "root.a"))
		y := a2.apply(HomePutType, put(fmt.Sprint("after", i), "root.a"))
		if !reflect.DeepEqual(x, y) {
			t.Fatalf("after restore, put %d: %v against %v", i, y, x)
		}
	}
	for _, bad := range [][]byte{nil, []byte("WEFTFED1"), []byte("WEFTFED1\x02\x01\xc0"), append([]byte("WEFTFED1\x01"), 0xff, 0xff, 0xff, 0xff, 0x7f)} {
		if _, err := ReadSnapshot(bytes.NewReader(bad)); err == nil {
			t.Errorf("ReadSnapshot(%q) accepted it", bad)
		}
	}
}

func TestApplyIsDeterministic(t *testing.T) {
	var snaps [2]bytes.Buffer
	for i := range snaps {
		if err := WriteSnapshot(&snaps[i], randomLog(t, 11, 800).f.State()); err != nil {
			t.Fatal(err)
		}
	}
	if !bytes.Equal(snaps[0].Bytes(), snaps[1].Bytes()) {
		t.Fatal("the same log applied twice gave two states")
	}
}

type nopCloser struct{ *bytes.Reader }

func (nopCloser) Close() error { return nil }

func FuzzApply(f *testing.F) {
	for typ := HeartbeatType; typ <= maxKnownType; typ++ {
		f.Add(byte(typ), []byte{0x80})
	}
	seed, _ := Encode(HeartbeatType, beat("sc1", 1, 1, 1))
	f.Add(seed[0], seed[1:])
	f.Fuzz(func(t *testing.T, typ byte, body []byte) {
		a := newApplier(t)
		a.ok(HeartbeatType, beat("sc1", 1, 100, 1))
		a.index++
		a.f.Apply(&raft.Log{Index: a.index, Type: raft.LogCommand, Data: append([]byte{typ}, body...)})
		var buf bytes.Buffer
		if err := WriteSnapshot(&buf, a.f.State()); err != nil {
			t.Fatal(err)
		}
		if _, err := ReadSnapshot(&buf); err != nil {
			t.Fatalf("a state reached by a command does not restore: %v", err)
		}
	})
}
