package fsm

import (
	"bytes"
	"fmt"
	"github.com/weft-sched/weft/acl"
	"io"
	"os"
	"reflect"
	"testing"
	"time"

	"github.com/hashicorp/go-msgpack/v2/codec"
	"github.com/hashicorp/raft"
	"github.com/weft-sched/weft/scheduler"
)

// fuzzState is the state every FuzzApply input lands on: the seeded tables
// plus a running app with an outstanding ask, a guaranteed container and
// an opportunistic one, so that commands naming them reach deep code.
type fuzzState struct {
	h                 *harness
	app, am, g, oppID string
	// span is an unmanaged AM's app (from sc1), spanC its container.
	span, spanC string
}

func newFuzzState(tb testing.TB) *fuzzState {
	h := seeded(tb)
	st := h.f.State()
	s := &fuzzState{h: h, app: st.ActiveApps()[0].ID, am: st.Containers()[0].ID, oppID: "o-n1-1-1"}
	h.ok(AppRegisterType, &AppRegisterRequest{AppID: s.app, Attempt: 1, Now: 2})
	h.ok(AskUpdateType, &AskUpdateRequest{AppID: s.app, Attempt: 1, SeenIndex: h.f.State().Index(),
		Asks: []scheduler.Ask{{AskID: 1, Count: 2, Resources: small, ExecutionType: scheduler.Guaranteed}}})
	res := h.ok(PlanApplyType, &PlanApplyRequest{Now: 3, Placements: []scheduler.Placement{
		{AppID: s.app, Attempt: 1, AskID: 1, NodeID: "n1", Resources: small}}}).(*PlanResult)
	s.g = res.IDs[0]
	h.ok(ContainerUpdateType, &ContainerUpdateRequest{NodeID: "n1",
		Records: []ContainerRecord{{ID: s.oppID, AppID: s.app, Attempt: 1, AskID: 2, Resources: small,
			State: scheduler.ContainerRunning, AllocatedAt: 4, StartedAt: 4}},
		Updates: []ContainerStatus{{ID: s.am, State: scheduler.ContainerRunning, At: 4, StartedAt: 4},
			{ID: s.g, State: scheduler.ContainerRunning, At: 4, StartedAt: 4}}})
	return s
}

// withSpan adds an unmanaged AM's app (spanning here from sc1) with a
// guaranteed container. It is not part of newFuzzState: richState, which
// the golden format-1 snapshot was written from, builds on that.
func (s *fuzzState) withSpan(tb testing.TB) *fuzzState {
	h := s.h
	s.span = "app-f1"
	h.ok(AppSubmitUnmanagedType, &AppSubmitUnmanagedRequest{AppID: s.span, Home: "sc1", Subcluster: "sc2", Attempt: 1, Queue: "dev", User: "u", Now: 5})
	h.ok(AskUpdateType, &AskUpdateRequest{AppID: s.span, Attempt: 1, SeenIndex: h.f.State().Index(),
		Asks: []scheduler.Ask{{AskID: 1, Count: 1, Resources: small, ExecutionType: scheduler.Guaranteed}}})
	res := h.ok(PlanApplyType, &PlanApplyRequest{Now: 6, Placements: []scheduler.Placement{
		{AppID: s.span, Attempt: 1, AskID: 1, NodeID: "n1", Resources: small}}}).(*PlanResult)
	s.spanC = res.IDs[0]
	return s
}

// spanCommands returns commands against the unmanaged AM's app of
// withSpan: a new span, the next attempt, a retry, an older attempt, its
// AM ending it KILLED, a report of its container; then the app's counters.
// (Commands added since the golden format-1 snapshot go here, not in
// commands, which richState replays.)
func (s *fuzzState) spanCommands(tb testing.TB) [][]byte {
	bodies := []struct {
		t    MessageType
		body any
	}{
		{AppSubmitUnmanagedType, &AppSubmitUnmanagedRequest{AppID: "app-f2", Home: "sc3", Subcluster: "sc2", Attempt: 1,
			Queue: "prod", User: "u", Priority: 3, Name: "spanning", Now: 10}},
		{AppSubmitUnmanagedType, &AppSubmitUnmanagedRequest{AppID: s.span, Home: "sc1", Subcluster: "sc2", Attempt: 2, Queue: "dev", User: "u", Now: 10}},
		{AppSubmitUnmanagedType, &AppSubmitUnmanagedRequest{AppID: s.span, Home: "sc1", Subcluster: "sc2", Attempt: 1, Queue: "dev", User: "u", Now: 10}},
		{AppSubmitUnmanagedType, &AppSubmitUnmanagedRequest{AppID: s.app, Home: "sc1", Subcluster: "sc2", Attempt: 2, Queue: "dev", User: "u", Now: 10}},
		{AppFinishType, &AppFinishRequest{AppID: s.span, Attempt: 1, State: scheduler.AppKilled, Diagnostics: "home killed", Now: 10}},
		{ContainerUpdateType, &ContainerUpdateRequest{NodeID: "n1", Updates: []ContainerStatus{{ID: s.spanC, State: scheduler.ContainerRunning, At: 10}}}},
		// Counters (SPEC §19): new ones, a bad name, an AM's final ones.
		{AppCountersType, &AppCountersRequest{AppID: s.app, Attempt: 1, Counters: scheduler.Counters{"maps.data_local": 3, "shuffle.bytes.rack": 1 << 40}}},
		{AppCountersType, &AppCountersRequest{AppID: s.app, Attempt: 1, Counters: scheduler.Counters{"Bad Name": -1}}},
		{AppFinishType, &AppFinishRequest{AppID: s.app, Attempt: 1, State: scheduler.AppFinished, Counters: scheduler.Counters{"tnd": 8}, Now: 10}},
	}
	var out [][]byte
	for i, b := range bodies {
		data, err := Encode(b.t, b.body)
		if err != nil {
			tb.Fatal(err)
		}
		req, err := EncodeRequest(fmt.Sprintf("span-%d", i), time.Unix(1000, 0).UnixNano(), b.t, b.body)
		if err != nil {
			tb.Fatal(err)
		}
		out = append(out, data, req)
	}
	return out
}

// commands returns real commands against the state: every command type,
// some inside client requests. They seed the fuzz corpora.
func (s *fuzzState) commands(tb testing.TB) [][]byte {
	zero := 0
	bodies := []struct {
		t    MessageType
		body any
	}{
		{QueueConfigApplyType, &QueueConfigApplyRequest{Config: scheduler.DefaultQueueConfig(), Now: 10}},
		{QueueConfigApplyType, &QueueConfigApplyRequest{Config: testConfig(), Now: 10}},
		{NodeRegisterType, &NodeRegisterRequest{ID: "n2", Address: "n2:8049", Rack: "r1", Capacity: scheduler.Resources{MemoryMB: 4096, Vcores: 4, Extended: map[string]int64{"gpu": 2}}, Now: 10}},
		{NodeRegisterType, &NodeRegisterRequest{ID: "n1", Address: "n1:8049", Capacity: scheduler.Resources{MemoryMB: 512, Vcores: 1}, Now: 10}},
		{NodeStatusType, &NodeStatusRequest{ID: "n1", Epoch: 1, Status: scheduler.NodeDown, Reason: "ttl", Now: 10}},
		{NodeStatusType, &NodeStatusRequest{ID: "n1", Epoch: 1, Status: scheduler.NodeDraining, Now: 10}},
		{AppSubmitType, submitSpec("x")},
		{AppRegisterType, &AppRegisterRequest{AppID: s.app, Attempt: 1, Now: 10}},
		{AppFinishType, &AppFinishRequest{AppID: s.app, Attempt: 1, State: scheduler.AppFinished, Now: 10}},
		{AppFinishType, &AppFinishRequest{AppID: s.app, State: scheduler.AppKilled, Diagnostics: "killed", Now: 10}},
		{AskUpdateType, &AskUpdateRequest{AppID: s.app, Attempt: 1, SeenIndex: 3, Asks: []scheduler.Ask{
			{AskID: 1, Count: 5, Resources: small, ExecutionType: scheduler.Guaranteed, Locality: scheduler.Locality{Nodes: []string{"n1"}, Racks: []string{"r1"}}},
			{AskID: 3, Count: 1, Resources: scheduler.Resources{MemoryMB: 100, Vcores: 1, Extended: map[string]int64{"gpu": 1}}, ExecutionType: scheduler.Guaranteed}}}},
		{PlanApplyType, &PlanApplyRequest{Now: 10, Placements: []scheduler.Placement{
			{AppID: s.app, Attempt: 1, AskID: 1, NodeID: "n1", Resources: small},
			{AppID: s.app, Attempt: 1, AskID: 1, NodeID: "n1", Resources: small, Opportunistic: true},
			{AppID: s.app, Attempt: 1, NodeID: "n1", Resources: small, IsAM: true}}}},
		{ContainerUpdateType, &ContainerUpdateRequest{NodeID: "n1",
			Records: []ContainerRecord{{ID: "o-n1-1-2", AppID: s.app, Attempt: 1, AskID: 2, Resources: small, State: scheduler.ContainerQueued, AllocatedAt: 9}},
			Updates: []ContainerStatus{{ID: s.g, State: scheduler.ContainerCompleted, ExitCode: &zero, Reason: scheduler.ReasonExited, At: 10},
				{ID: s.am, State: scheduler.ContainerCompleted, ExitCode: &zero, Reason: scheduler.ReasonExited, At: 10}}}},
		{ContainerUpdateBatchType, &ContainerUpdateBatchRequest{Updates: []ContainerUpdateRequest{
			{NodeID: "n9", Records: []ContainerRecord{{ID: "o-n9-1-1", AppID: s.app, Attempt: 1, AskID: 2, Resources: small, State: scheduler.ContainerQueued, AllocatedAt: 9}}},
			{NodeID: "n1", Updates: []ContainerStatus{{ID: s.g, State: scheduler.ContainerCompleted, ExitCode: &zero, Reason: scheduler.ReasonExited, At: 10}}}}}},
		{ContainerStopType, &ContainerStopRequest{AppID: s.app, IDs: []string{s.g, s.oppID}, Reason: scheduler.ReasonKilled, Now: 10}},
		{PromoteType, &PromoteRequest{AppID: s.app, Attempt: 1, IDs: []string{s.oppID, s.g}, Now: 10}},
		{PreemptMarkType, &PreemptMarkRequest{Marks: []PreemptMark{{ContainerID: s.g, ForApp: "app-9", Reason: "fair share"}}, KillAt: 20, Now: 10}},
		{ACLPolicyUpsertType, &ACLPolicyUpsertRequest{Policies: []*acl.Policy{{Name: "dev", Rules: "queue \"root.dev\" { policy = \"submit\" }\nnode { policy = \"read\" }\n"}}}},
		{ACLBootstrapType, &ACLBootstrapRequest{Token: &acl.Token{AccessorID: "0b1c2d3e-0000-4000-8000-000000000001", SecretHash: acl.HashSecret("s1"), Name: "bootstrap", Type: acl.TypeManagement}}},
		{ACLTokenUpsertType, &ACLTokenUpsertRequest{Tokens: []*acl.Token{{AccessorID: "0b1c2d3e-0000-4000-8000-000000000002", SecretHash: acl.HashSecret("s2"), Name: "alice", Type: acl.TypeClient, Policies: []string{"dev"}}}}},
		{ACLTokenDeleteType, &ACLTokenDeleteRequest{AccessorIDs: []string{"0b1c2d3e-0000-4000-8000-000000000002"}}},
		{ACLPolicyDeleteType, &ACLPolicyDeleteRequest{Names: []string{"dev"}}},
		{NodeDrainType, &NodeDrainRequest{ID: "n1", Drain: true, Deadline: 20, Now: 10}},
		{NodeDrainType, &NodeDrainRequest{ID: "n1", Now: 10}},
		{GCType, &GCRequest{AppIDs: []string{s.app, "app-999"}, NodeIDs: []string{"n1", "n9"}}},
	}
	var out [][]byte
	for i, b := range bodies {
		data, err := Encode(b.t, b.body)
		if err != nil {
			tb.Fatal(err)
		}
		out = append(out, data)
		if i%3 == 0 {
			req, err := EncodeRequest(fmt.Sprintf("req-%d", i), time.Unix(1000, 0).UnixNano(), b.t, b.body)
			if err != nil {
				tb.Fatal(err)
			}
			out = append(out, req)
		}
	}
	// A retry of the remembered request, and types nobody knows.
	replay, err := EncodeRequest("r1", time.Unix(1000, 0).UnixNano(), AppSubmitType, submitSpec("b"))
	if err != nil {
		tb.Fatal(err)
	}
	return append(out, replay, []byte{byte(IgnoreUnknownTypeFlag | 1), 0x80}, []byte{0x42, 0x80})
}

// FuzzApply feeds arbitrary bytes to the FSM as one committed log entry.
// The FSM must never panic: it applies the entry (and the state's
// invariants hold, the same on two replicas) or halts having changed
// nothing.
func FuzzApply(f *testing.F) {
	base := newFuzzState(f).withSpan(f)
	for _, c := range append(base.commands(f), base.spanCommands(f)...) {
		f.Add(c)
	}
	// Each input starts from a restore of the state, which is cheaper than
	// building it again.
	snap := persist(f, base.h.f)
	fresh := func(t *testing.T) *FSM {
		g := New(nil)
		if err := g.Restore(io.NopCloser(bytes.NewReader(snap))); err != nil {
			t.Fatal(err)
		}
		return g
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		a, b := fresh(t), fresh(t)
		before := a.State()
		index := before.Index() + 1
		res := a.Apply(&raft.Log{Index: index, Term: 1, Type: raft.LogCommand, Data: data})
		if h, halted := res.(*HaltError); halted {
			if h.Index != index || a.HaltErr() != h || a.State() != before {
				t.Fatalf("halt %v changed the state or was not recorded", h)
			}
			return
		}
		st := a.State()
		checkInvariants(t, st)
		if st.Index() != index {
			t.Fatalf("state index %d after applying entry %d", st.Index(), index)
		}
		// Deterministic: a second replica reaches the same state and answer.
		resB := b.Apply(&raft.Log{Index: index, Term: 1, Type: raft.LogCommand, Data: data})
		if fmt.Sprint(res) != fmt.Sprint(resB) || !sameTables(st, b.State()) {
			t.Fatalf("two replicas diverged on one entry: %v / %v", res, resB)
		}
		// What was applied can be snapshotted and restored.
		g := New(nil)
		if err := g.Restore(io.NopCloser(bytes.NewReader(persist(t, a)))); err != nil {
			t.Fatalf("restore a snapshot of the applied state: %v", err)
		}
		if !sameTables(st, g.State()) {
			t.Fatalf("the restored state differs from the applied one")
		}
	})
}

// sameTables compares every table of two states.
func sameTables(a, b *State) bool {
	return statesEqual(a, b) && reflect.DeepEqual(a.Nodes(), b.Nodes()) && reflect.DeepEqual(a.Apps(), b.Apps()) &&
		reflect.DeepEqual(a.Containers(), b.Containers()) && reflect.DeepEqual(a.ActiveApps(), b.ActiveApps()) &&
		a.NumRequests() == b.NumRequests()
}

// FuzzRestore feeds arbitrary bytes to Restore as a snapshot. It must
// never panic: a snapshot it cannot read is an error and changes nothing
// (Raft then refuses it); one it reads persists and restores again to the
// same state.
func FuzzRestore(f *testing.F) {
	s := newFuzzState(f)
	snap := persist(f, s.h.f)
	f.Add(snap)
	f.Add(persist(f, New(nil)))
	f.Add(snap[:len(snap)/2])
	f.Add(append(append([]byte(nil), snap[:len(snap)-1]...), 0x81, 0x01, 0x80, byte(recordEnd)))
	f.Add(append(append([]byte(nil), snap[:len(snap)-1]...), 0x33, 0x01, 0x80, byte(recordEnd)))
	// Format 1: the old binary's golden snapshot, and one of this state.
	if golden, err := os.ReadFile("testdata/snapshot-v1.bin"); err == nil {
		f.Add(golden)
	}
	var v1 bytes.Buffer
	if err := writeSnapshotV1(&v1, s.h.f.State()); err != nil {
		f.Fatal(err)
	}
	f.Add(v1.Bytes())
	f.Fuzz(func(t *testing.T, data []byte) {
		g := New(nil)
		before := g.State()
		if err := g.Restore(io.NopCloser(bytes.NewReader(data))); err != nil {
			if g.State() != before {
				t.Fatalf("a failed restore changed the state")
			}
			return
		}
		again := New(nil)
		if err := again.Restore(io.NopCloser(bytes.NewReader(persist(t, g)))); err != nil {
			t.Fatalf("the snapshot of a restored state does not restore: %v", err)
		}
		if !sameTables(g.State(), again.State()) {
			t.Fatalf("a restored state changed through snapshot and restore")
		}
	})
}

// FuzzContainerRecord feeds arbitrary bytes to the snapshot's container
// record decoder. It must never panic nor allocate beyond the record's
// length; a record it accepts encodes and decodes again to the same
// container.
func FuzzContainerRecord(f *testing.F) {
	zero := 0
	for _, c := range []*scheduler.Container{{}, {ID: "c-9-0", AppID: "app-1", NodeID: "n1", Attempt: 1, AskID: 2,
		Resources:     scheduler.Resources{MemoryMB: 1024, Vcores: 1, Extended: map[string]int64{"gpu": 1, "fpga": 2}},
		ExecutionType: scheduler.Guaranteed, State: scheduler.ContainerCompleted, ExitCode: &zero, Reason: scheduler.ReasonExited,
		KillRequested: true, PreemptKillAt: 5, PreemptFor: "app-2", AllocatedAt: 1, StartedAt: 2, FinishedAt: 3, CreateIndex: 9, ModifyIndex: 12}} {
		f.Add(appendContainer(nil, c))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		var in interner
		c, err := decodeContainer(data, &in)
		if err != nil {
			return
		}
		again, err := decodeContainer(appendContainer(nil, c), &in)
		if err != nil {
			t.Fatalf("an accepted record does not decode once encoded again: %v", err)
		}
		if !reflect.DeepEqual(c, again) {
			t.Fatalf("container changed through encode and decode:\n%+v\n%+v", c, again)
		}
	})
}

// commandBodies makes an empty body of each command type; the test below
// keeps it in step with decodeCommand.
var commandBodies = map[MessageType]func() any{
	QueueConfigApplyType:     func() any { return new(QueueConfigApplyRequest) },
	NodeRegisterType:         func() any { return new(NodeRegisterRequest) },
	NodeStatusType:           func() any { return new(NodeStatusRequest) },
	AppSubmitType:            func() any { return new(AppSubmitRequest) },
	AppRegisterType:          func() any { return new(AppRegisterRequest) },
	AppFinishType:            func() any { return new(AppFinishRequest) },
	AskUpdateType:            func() any { return new(AskUpdateRequest) },
	PlanApplyType:            func() any { return new(PlanApplyRequest) },
	ContainerUpdateType:      func() any { return new(ContainerUpdateRequest) },
	ContainerUpdateBatchType: func() any { return new(ContainerUpdateBatchRequest) },
	ContainerStopType:        func() any { return new(ContainerStopRequest) },
	PromoteType:              func() any { return new(PromoteRequest) },
	PreemptMarkType:          func() any { return new(PreemptMarkRequest) },
	RequestType:              func() any { return new(RequestEnvelope) },
	ACLBootstrapType:         func() any { return new(ACLBootstrapRequest) },
	ACLTokenUpsertType:       func() any { return new(ACLTokenUpsertRequest) },
	ACLTokenDeleteType:       func() any { return new(ACLTokenDeleteRequest) },
	ACLPolicyUpsertType:      func() any { return new(ACLPolicyUpsertRequest) },
	ACLPolicyDeleteType:      func() any { return new(ACLPolicyDeleteRequest) },
	WorkloadKeyType:          func() any { return new(WorkloadKeyRequest) },
	NodeSecretResetType:      func() any { return new(NodeSecretResetRequest) },
	NodeDrainType:            func() any { return new(NodeDrainRequest) },
	GCType:                   func() any { return new(GCRequest) },
	AppSubmitUnmanagedType:   func() any { return new(AppSubmitUnmanagedRequest) },
	AppCountersType:          func() any { return new(AppCountersRequest) },
	AppBlacklistType:         func() any { return new(AppBlacklistRequest) },
}

func TestCommandBodiesCoverEveryType(t *testing.T) {
	f := New(nil)
	for i := 0; i < 256; i++ {
		mt := MessageType(i)
		_, err := f.decodeCommand(1, mt, []byte{0x80})
		known := err == nil && mt&IgnoreUnknownTypeFlag == 0
		if _, listed := commandBodies[mt]; known != listed && mt != RequestType {
			t.Errorf("command type %d: decodes %v, listed for FuzzCommandRoundTrip %v", i, known, listed)
		}
	}
}

// canonicalHandle is msgpackHandle with map keys sorted, for comparing
// values by their encoding.
var canonicalHandle = func() *codec.MsgpackHandle {
	h := &codec.MsgpackHandle{}
	h.RawToString, h.WriteExt, h.Canonical = true, true, true
	return h
}()

// canonical encodes v with map keys sorted.
func canonical(t *testing.T, v any) []byte {
	var buf bytes.Buffer
	if err := codec.NewEncoder(&buf, canonicalHandle).Encode(v); err != nil {
		t.Fatalf("encode %T: %v", v, err)
	}
	return buf.Bytes()
}

// FuzzCommandRoundTrip decodes arbitrary bytes as the body of each command
// type; whatever decodes must encode and decode again to the same value, or
// a command would mean one thing to the leader and another in the log.
func FuzzCommandRoundTrip(f *testing.F) {
	s := newFuzzState(f).withSpan(f)
	for _, c := range append(s.commands(f), s.spanCommands(f)...) {
		f.Add(c)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		if len(data) == 0 {
			return
		}
		mk, ok := commandBodies[MessageType(data[0])]
		if !ok {
			return
		}
		first := mk()
		if decode(data[1:], first) != nil {
			return
		}
		enc, err := Encode(MessageType(data[0]), first)
		if err != nil {
			t.Fatalf("a decoded %T does not encode: %v", first, err)
		}
		second := mk()
		if err := decode(enc[1:], second); err != nil {
			t.Fatalf("an encoded %T does not decode: %v", first, err)
		}
		if !bytes.Equal(canonical(t, first), canonical(t, second)) {
			t.Fatalf("%T changed through encode and decode:\n%+v\n%+v", first, first, second)
		}
	})
}
