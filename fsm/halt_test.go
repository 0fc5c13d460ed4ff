package fsm

import (
	"bytes"
	"errors"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/raft"
)

// seeded returns a harness holding a node, an app with its AM placed, and a
// remembered client request: every table has something in it.
func seeded(t testing.TB, opts ...Option) *harness {
	h := &harness{t: t, f: New(nil, opts...)}
	h.ok(QueueConfigApplyType, &QueueConfigApplyRequest{Config: testConfig(), Now: 1})
	h.register("n1", 8192)
	app := h.submit(2)
	h.placeAM(app, "n1", 1)
	h.request("r1", time.Unix(1000, 0), AppSubmitType, submitSpec("b"))
	return h
}

func raw(index uint64, data ...byte) *raft.Log {
	return &raft.Log{Index: index, Term: 1, Type: raft.LogCommand, Data: data}
}

// mustHalt checks that res is the halt at index and that the FSM says so.
func mustHalt(t *testing.T, f *FSM, res any, index uint64, reason string) {
	t.Helper()
	h, ok := res.(*HaltError)
	if !ok || h.Index != index || !strings.Contains(h.Reason, reason) {
		t.Fatalf("result %#v, want a halt at index %d mentioning %q", res, index, reason)
	}
	if f.HaltErr() != h {
		t.Fatalf("HaltErr = %v, want the halt returned", f.HaltErr())
	}
	select {
	case <-f.Halted():
	default:
		t.Fatalf("Halted channel not closed")
	}
}

func TestIgnorableUnknownTypeIsSkippedAndLaterEntriesApply(t *testing.T) {
	h := seeded(t)
	h.index++
	if res := h.f.Apply(raw(h.index, byte(IgnoreUnknownTypeFlag|0x11), 0x80)); res != nil {
		t.Fatalf("ignorable unknown command returned %v", res)
	}
	if h.f.State().Index() != h.index {
		t.Fatalf("ignored command did not advance the index")
	}
	// Inside a client request too: answered nil and remembered.
	if res := h.request("r2", time.Unix(1001, 0), IgnoreUnknownTypeFlag|0x22, map[string]int{"x": 1}); res != nil {
		t.Fatalf("ignorable unknown request returned %v", res)
	}
	if _, ok := h.f.State().Request("r2"); !ok {
		t.Fatalf("the ignored request was not remembered")
	}
	n := len(h.f.State().Apps())
	h.submit(1)
	if len(h.f.State().Apps()) != n+1 || h.f.HaltErr() != nil {
		t.Fatalf("a command after ignorable ones was not applied")
	}
}

func TestUnappliableEntryHaltsBeforeChangingAnything(t *testing.T) {
	submit, err := Encode(AppSubmitType, submitSpec("late"))
	if err != nil {
		t.Fatal(err)
	}
	badEnvelope, err := Encode(RequestType, &RequestEnvelope{ID: "r9", Now: time.Unix(1e6, 0).UnixNano(), Type: 0x33, Body: []byte{0x80}})
	if err != nil {
		t.Fatal(err)
	}
	badInner, err := Encode(RequestType, &RequestEnvelope{ID: "r9", Now: time.Unix(1e6, 0).UnixNano(), Type: AppSubmitType, Body: []byte{0xc1}})
	if err != nil {
		t.Fatal(err)
	}
	cases := map[string]struct {
		data   []byte
		reason string
	}{
		"unknown type":             {[]byte{0x42, 0x80}, "unknown command type 66"},
		"unknown type, no body":    {[]byte{0x7f}, "unknown command type 127"},
		"known type, corrupt body": {[]byte{byte(AppSubmitType), 0xc1}, "command type 4 does not decode"},
		"known type, wrong shape":  {[]byte{byte(NodeRegisterType), 0x81, 0xa2, 'i', 'd', 0x81, 0x01, 0x02}, "command type 2 does not decode"},
		"empty":                    {nil, "empty command"},
		"corrupt request envelope": {[]byte{byte(RequestType), 0x92}, "command type 13 does not decode"},
		// The envelope's Now is far past r1's window: had the request been
		// applied, r1 would be forgotten. It must still be there.
		"unknown type in a request":             {badEnvelope, "unknown command type 51 inside a client request"},
		"corrupt command in a request envelope": {badInner, "command type 4 inside a client request does not decode"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			h := seeded(t)
			before := h.f.State()
			n := h.index
			// One batch: a good command, the bad one, another good one.
			res := h.f.ApplyBatch([]*raft.Log{
				command(t, n+1, NodeRegisterType, &NodeRegisterRequest{ID: "n2", Capacity: small}),
				raw(n+2, tc.data...),
				{Index: n + 3, Term: 1, Type: raft.LogCommand, Data: submit},
			})
			if _, ok := res[0].(uint64); !ok {
				t.Fatalf("the entry before the bad one answered %v", res[0])
			}
			mustHalt(t, h.f, res[1], n+2, tc.reason)
			if res[2] != res[1] {
				t.Fatalf("the entry after the bad one answered %v, want the halt", res[2])
			}
			st := h.f.State()
			checkInvariants(t, st)
			if st.Index() != n+1 {
				t.Fatalf("state index %d, want %d (the last entry before the halt)", st.Index(), n+1)
			}
			if _, ok := st.Node("n2"); !ok {
				t.Fatalf("the entry before the halt was not applied")
			}
			if len(st.Apps()) != len(before.Apps()) {
				t.Fatalf("an entry after the halt was applied")
			}
			if _, ok := st.Request("r1"); !ok {
				t.Fatalf("the halted entry expired request records")
			}
			// Every later entry changes nothing, not even the published state.
			for i := uint64(4); i < 7; i++ {
				if r := h.f.Apply(&raft.Log{Index: n + i, Term: 1, Type: raft.LogCommand, Data: submit}); r != res[1] {
					t.Fatalf("entry %d after the halt answered %v", n+i, r)
				}
			}
			if h.f.State() != st {
				t.Fatalf("a halted FSM published a new state")
			}
			// No snapshot (it would be labelled past what was applied), no
			// restore.
			if _, err := h.f.Snapshot(); err == nil || !errors.As(err, new(*HaltError)) {
				t.Fatalf("halted FSM took a snapshot: %v", err)
			}
			if err := h.f.Restore(io.NopCloser(bytes.NewReader(persist(t, seeded(t).f)))); err == nil {
				t.Fatalf("halted FSM restored a snapshot")
			}
			if h.f.State() != st {
				t.Fatalf("a refused restore changed the state")
			}
		})
	}
}

func TestHaltIsDeterministic(t *testing.T) {
	// Two servers with the same log stop at the same entry with the same
	// state and the same reason, whether the entries come one by one or
	// in a batch.
	a, b := seeded(t), seeded(t)
	n := a.index
	logs := []*raft.Log{
		command(t, n+1, NodeRegisterType, &NodeRegisterRequest{ID: "n2", Capacity: small}),
		raw(n+2, 0x55),
		command(t, n+3, NodeRegisterType, &NodeRegisterRequest{ID: "n3", Capacity: small}),
	}
	for _, l := range logs {
		a.f.Apply(l)
	}
	b.f.ApplyBatch(logs)
	if *a.f.HaltErr() != *b.f.HaltErr() || !statesEqual(a.f.State(), b.f.State()) ||
		len(a.f.State().Nodes()) != 2 || len(b.f.State().Nodes()) != 2 {
		t.Fatalf("halts differ: %v / %v", a.f.HaltErr(), b.f.HaltErr())
	}
}

func TestSkipIndexSkipsExactlyThatEntry(t *testing.T) {
	// The seeded harness applies 5 entries; the garbage is at 7.
	const bad = 7
	logs := func(t *testing.T) []*raft.Log {
		return []*raft.Log{
			command(t, 6, NodeRegisterType, &NodeRegisterRequest{ID: "n2", Capacity: small}),
			raw(bad, 0x42, 0x80),
			command(t, 8, NodeRegisterType, &NodeRegisterRequest{ID: "n3", Capacity: small}),
		}
	}
	// Two servers started with the escape hatch agree, and go on past it.
	a, b := seeded(t, WithSkipIndex(bad)), seeded(t, WithSkipIndex(bad))
	if a.index != bad-2 {
		t.Fatalf("seeded harness at index %d; the test needs %d", a.index, bad-2)
	}
	for _, l := range logs(t) {
		if res := a.f.Apply(l); isHalt(res) {
			t.Fatalf("entry %d halted with the skip index set: %v", l.Index, res)
		}
	}
	res := b.f.ApplyBatch(logs(t))
	if res[1] != nil {
		t.Fatalf("the skipped entry answered %v", res[1])
	}
	if a.f.HaltErr() != nil || b.f.HaltErr() != nil || !statesEqual(a.f.State(), b.f.State()) {
		t.Fatalf("skipping diverged or halted: %v / %v", a.f.HaltErr(), b.f.HaltErr())
	}
	for _, st := range []*State{a.f.State(), b.f.State()} {
		checkInvariants(t, st)
		if st.Index() != 8 || len(st.Nodes()) != 3 {
			t.Fatalf("after the skip: index %d, %d nodes; want 8, 3", st.Index(), len(st.Nodes()))
		}
	}

	// The hatch names one entry: garbage elsewhere still halts.
	c := seeded(t, WithSkipIndex(bad))
	c.f.Apply(command(t, 6, NodeRegisterType, &NodeRegisterRequest{ID: "n2", Capacity: small}))
	mustHalt(t, c.f, c.f.Apply(raw(bad+1, 0x42, 0x80)), bad+1, "unknown command type 66")

	// An entry at that index that can be applied is applied, not skipped.
	d := seeded(t, WithSkipIndex(bad))
	d.f.Apply(command(t, 6, NodeRegisterType, &NodeRegisterRequest{ID: "n2", Capacity: small}))
	if res := d.f.Apply(command(t, bad, NodeRegisterType, &NodeRegisterRequest{ID: "n3", Capacity: small})); res != uint64(1) {
		t.Fatalf("a good entry at the skip index answered %v", res)
	}
	if _, ok := d.f.State().Node("n3"); !ok {
		t.Fatalf("a good entry at the skip index was skipped")
	}
}

// isHalt reports whether an apply result is a halt.
func isHalt(res any) bool {
	_, ok := res.(*HaltError)
	return ok
}

func TestHaltErrorNamesIndexTypeAndReason(t *testing.T) {
	f := New(nil)
	res := f.Apply(raw(12, 0x42))
	msg := res.(error).Error()
	for _, want := range []string{"index 12", "unknown command type 66", "nothing at or after index 12 was applied"} {
		if !strings.Contains(msg, want) {
			t.Fatalf("halt message %q does not say %q", msg, want)
		}
	}
	if h := f.HaltErr(); h.Type != 0x42 || h.Index != 12 {
		t.Fatalf("halt %+v", h)
	}
}
