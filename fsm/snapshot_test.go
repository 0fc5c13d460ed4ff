package fsm

import (
	"bytes"
	"fmt"
	"io"
	"os"
	"reflect"
	"runtime/debug"
	"sync"
	"testing"

	"github.com/hashicorp/go-msgpack/v2/codec"
	"github.com/hashicorp/raft"
	"github.com/weft-sched/weft/scheduler"
)

// richState is the fuzz state with every fuzz seed command applied to it
// in turn (those refused change nothing): finished and active apps, live
// and completed containers with exit codes, preemption marks, extended
// resources, ACL policies and tokens, remembered requests.
func richState(tb testing.TB) *FSM {
	s := newFuzzState(tb)
	f, index := s.h.f, s.h.index
	cmds := s.commands(tb)
	for _, data := range cmds[:len(cmds)-1] { // the last halts the FSM
		index++
		if h, ok := f.Apply(&raft.Log{Index: index, Term: 1, Type: raft.LogCommand, Data: data}).(*HaltError); ok {
			tb.Fatalf("seed command halted the FSM: %v", h)
		}
	}
	// An app on a node of its own with a container completed with an exit
	// code, one running and one never started.
	h := s.h
	h.index = index
	h.register("n3", 1<<20)
	app := h.runningApp("n3")
	h.ok(AskUpdateType, &AskUpdateRequest{AppID: app, Attempt: 1, SeenIndex: h.index,
		Asks: []scheduler.Ask{{AskID: 1, Count: 3, Resources: small, ExecutionType: scheduler.Guaranteed}}})
	placements := make([]scheduler.Placement, 3)
	for i := range placements {
		placements[i] = scheduler.Placement{AppID: app, Attempt: 1, AskID: 1, NodeID: "n3", Resources: small}
	}
	ids := h.ok(PlanApplyType, &PlanApplyRequest{Placements: placements, Now: 20}).(*PlanResult).IDs
	three := 3
	h.ok(ContainerUpdateType, &ContainerUpdateRequest{NodeID: "n3", Updates: []ContainerStatus{
		{ID: ids[0], State: scheduler.ContainerCompleted, ExitCode: &three, Reason: scheduler.ReasonExited, Diagnostics: "exit 3", At: 30},
		{ID: ids[1], State: scheduler.ContainerRunning, At: 30, StartedAt: 30}}})
	return f
}

// sameState reports, naming the first, how a and b differ in any table or
// index: every tree's keys and values, the counters and everything
// statesEqual compares.
func sameState(a, b *State) error {
	if !statesEqual(a, b) {
		return fmt.Errorf("index, table indexes, queues or workload keys differ")
	}
	if a.numFinished != b.numFinished || a.numRequests != b.numRequests || a.acl.bootstrapIndex != b.acl.bootstrapIndex {
		return fmt.Errorf("counters differ: finished %d/%d, requests %d/%d, bootstrap %d/%d",
			a.numFinished, b.numFinished, a.numRequests, b.numRequests, a.acl.bootstrapIndex, b.acl.bootstrapIndex)
	}
	for _, t := range []struct {
		name string
		a, b any
	}{
		{"nodes", a.nodes, b.nodes}, {"apps", a.apps, b.apps}, {"activeApps", a.activeApps, b.activeApps},
		{"containers", a.containers, b.containers}, {"byApp", a.byApp, b.byApp},
		{"byAppChange", a.byAppChange, b.byAppChange}, {"liveByNode", a.liveByNode, b.liveByNode},
		{"marked", a.marked, b.marked}, {"unstarted", a.unstarted, b.unstarted},
		{"draining", a.draining, b.draining}, {"down", a.down, b.down}, {"finished", a.finished, b.finished},
		{"requests", a.requests, b.requests}, {"requestsByIndex", a.requestsByIndex, b.requestsByIndex},
		{"acl tokens", a.acl.tokens, b.acl.tokens}, {"acl by secret", a.acl.bySecret, b.acl.bySecret},
		{"acl policies", a.acl.policies, b.acl.policies},
	} {
		ka, va := treeContents(t.a)
		kb, vb := treeContents(t.b)
		if !reflect.DeepEqual(ka, kb) {
			return fmt.Errorf("%s: keys differ:\n%q\n%q", t.name, ka, kb)
		}
		if !reflect.DeepEqual(va, vb) {
			return fmt.Errorf("%s: values differ", t.name)
		}
	}
	return nil
}

// treeContents lists the keys and values of any of the state's trees.
func treeContents(tree any) (keys []string, vals []any) {
	if ix, ok := tree.(index[*scheduler.Container]); ok {
		ix.Ascend("", func(k string, v *scheduler.Container) bool {
			keys, vals = append(keys, k), append(vals, v)
			return true
		})
		return keys, vals
	}
	rv := reflect.ValueOf(tree)
	it := rv.MethodByName("Root").Call(nil)[0].MethodByName("Iterator").Call(nil)[0]
	next := it.MethodByName("Next")
	for {
		out := next.Call(nil)
		if !out[2].Bool() {
			return keys, vals
		}
		keys = append(keys, string(out[0].Bytes()))
		vals = append(vals, out[1].Interface())
	}
}

func restoreBytes(t testing.TB, data []byte) *FSM {
	t.Helper()
	f := New(nil)
	if err := f.Restore(io.NopCloser(bytes.NewReader(data))); err != nil {
		t.Fatal(err)
	}
	return f
}

func TestRichStateHoldsWhatTheSnapshotTestsNeed(t *testing.T) {
	st := richState(t).State()
	var exitCodes, completed, live int
	for _, c := range st.Containers() {
		if c.ExitCode != nil {
			exitCodes++
		}
		if c.State.Live() {
			live++
		} else {
			completed++
		}
	}
	if exitCodes == 0 || completed == 0 || live == 0 || st.acl.tokens.Len() == 0 || st.numRequests == 0 ||
		st.finished.Len() == 0 || st.activeApps.Len() == 0 || st.unstarted.Len() == 0 {
		t.Fatalf("rich state too poor: %d exit codes, %d completed, %d live, %d tokens, %d requests, %d finished, %d active apps, %d unstarted",
			exitCodes, completed, live, st.acl.tokens.Len(), st.numRequests, st.finished.Len(), st.activeApps.Len(), st.unstarted.Len())
	}
}

func TestSnapshotRoundTripKeepsEveryTableAndIndex(t *testing.T) {
	for name, f := range map[string]*FSM{"empty": New(nil), "fuzz": newFuzzState(t).h.f, "rich": richState(t)} {
		t.Run(name, func(t *testing.T) {
			data := persist(t, f)
			if data[len(snapshotMagic)] != snapshotV2 {
				t.Fatalf("persisted format %d, want %d", data[len(snapshotMagic)], snapshotV2)
			}
			g := restoreBytes(t, data)
			if err := sameState(f.State(), g.State()); err != nil {
				t.Fatalf("restored state differs: %v", err)
			}
			checkInvariants(t, g.State())
			if again := persist(t, g); !bytes.Equal(again, data) {
				t.Fatalf("the snapshot of the restored state differs from the original")
			}
		})
	}
}

// testdata/snapshot-v1.bin was written by weft at commit 8079d7f (format
// 1, the last binary to write it) from richState; a server upgraded in
// place restores it, so it must keep restoring to the same state.
func TestFormat1SnapshotFromTheOldBinaryRestores(t *testing.T) {
	data, err := os.ReadFile("testdata/snapshot-v1.bin")
	if err != nil {
		t.Fatal(err)
	}
	if data[len(snapshotMagic)] != snapshotV1 {
		t.Fatalf("golden file is format %d", data[len(snapshotMagic)])
	}
	want := richState(t).State()
	// The golden file predates Attempt.NotCounted: the binary that wrote
	// it counted every ended AM attempt (this FSM is the test's own).
	for _, a := range want.Apps() {
		for i := range a.Attempts {
			a.Attempts[i].NotCounted = false
		}
	}
	got := restoreBytes(t, data).State()
	if err := sameState(want, got); err != nil {
		t.Fatalf("format 1 snapshot restored differently: %v", err)
	}
	// And the state it restored to survives a format 2 round trip.
	if err := sameState(want, restoreBytes(t, persist(t, restoreBytes(t, data))).State()); err != nil {
		t.Fatalf("format 1 → 2 → state: %v", err)
	}
}

// TestFormat1ReaderMatchesFormat2 writes states in format 1 (with the
// test writer below, the old writer's code) and checks both readers
// agree.
func TestFormat1ReaderMatchesFormat2(t *testing.T) {
	for name, f := range map[string]*FSM{"fuzz": newFuzzState(t).h.f, "rich": richState(t)} {
		var v1 bytes.Buffer
		if err := writeSnapshotV1(&v1, f.State()); err != nil {
			t.Fatal(err)
		}
		if err := sameState(restoreBytes(t, v1.Bytes()).State(), restoreBytes(t, persist(t, f)).State()); err != nil {
			t.Fatalf("%s: format 1 and format 2 restore differently: %v", name, err)
		}
	}
}

// writeSnapshotV1 writes st in snapshot format 1, as weft did before
// format 2 (kept in tests only, to test the format 1 reader).
func writeSnapshotV1(w io.Writer, st *State) error {
	var buf bytes.Buffer
	buf.Write(snapshotMagic)
	buf.WriteByte(snapshotV1)
	enc := codec.NewEncoder(&buf, msgpackHandle)
	if err := enc.Encode(&snapshotHeader{Index: st.index, TableIndex: st.tableIndex[:]}); err != nil {
		return err
	}
	record := func(t recordType, body any) error {
		buf.WriteByte(byte(t))
		return enc.Encode(body)
	}
	if err := record(recordQueueConfig, st.queues); err != nil {
		return err
	}
	for _, k := range st.workloadKeys {
		if err := record(recordWorkloadKey, k); err != nil {
			return err
		}
	}
	for _, table := range []struct {
		t    recordType
		tree any
	}{{recordNode, st.nodes}, {recordApp, st.apps}, {recordContainer, st.containers}, {recordRequest, st.requestsByIndex},
		{recordACLPolicy, st.acl.policies}, {recordACLToken, st.acl.tokens}} {
		_, vals := treeContents(table.tree)
		for _, v := range vals {
			if err := record(table.t, v); err != nil {
				return err
			}
		}
	}
	if err := record(recordACLMeta, &aclMeta{BootstrapIndex: st.acl.bootstrapIndex}); err != nil {
		return err
	}
	buf.WriteByte(byte(recordEnd))
	_, err := w.Write(buf.Bytes())
	return err
}

// allFieldsSet is a container with every field set to something other
// than its zero value (found by reflection, so that a field added later
// is set too).
func allFieldsSet(t *testing.T) *scheduler.Container {
	c := &scheduler.Container{}
	v := reflect.ValueOf(c).Elem()
	for i := 0; i < v.NumField(); i++ {
		setNonZero(t, v.Type().Field(i).Name, v.Field(i), i)
	}
	return c
}

func setNonZero(t *testing.T, name string, f reflect.Value, i int) {
	switch f.Kind() {
	case reflect.String:
		f.SetString(fmt.Sprintf("%s-%d", name, i))
	case reflect.Int, reflect.Int64:
		f.SetInt(int64(-1000 - i))
	case reflect.Uint64:
		f.SetUint(uint64(1<<40 + i))
	case reflect.Bool:
		f.SetBool(true)
	case reflect.Pointer:
		f.Set(reflect.New(f.Type().Elem()))
		setNonZero(t, name, f.Elem(), i)
	case reflect.Map:
		f.Set(reflect.MakeMap(f.Type()))
		for j := 0; j < 3; j++ {
			f.SetMapIndex(reflect.ValueOf(fmt.Sprintf("r%d", j)), reflect.ValueOf(int64(j-1)))
		}
	case reflect.Struct:
		for j := 0; j < f.NumField(); j++ {
			setNonZero(t, name+"."+f.Type().Field(j).Name, f.Field(j), i*10+j)
		}
	default:
		t.Fatalf("field %s of kind %s: teach the container record codec (snapshot_container.go) and this test about it", name, f.Kind())
	}
}

func TestContainerCodecCoversEveryField(t *testing.T) {
	want := allFieldsSet(t)
	var in interner
	got, err := decodeContainer(appendContainer(nil, want), &in)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("container changed through its snapshot record (a field the codec misses?):\n got %+v\nwant %+v", got, want)
	}
	zero := &scheduler.Container{}
	if got, err := decodeContainer(appendContainer(nil, zero), &in); err != nil || !reflect.DeepEqual(got, zero) {
		t.Fatalf("zero container: %+v, %v", got, err)
	}
}

func TestContainerRecordRefusesMalformedBodies(t *testing.T) {
	good := appendContainer(nil, allFieldsSet(t))
	// A zero container's record: ten empty strings and zeros, then the
	// flags byte.
	badFlags := appendContainer(nil, &scheduler.Container{})
	badFlags[10] = 0x80
	cases := map[string][]byte{
		"empty":            nil,
		"cut short":        good[:len(good)-1],
		"trailing bytes":   append(bytes.Clone(good), 0),
		"unknown flag":     badFlags,
		"string too long":  {0xff, 0xff, 0xff, 0xff, 0x0f, 'a'},
		"varint overflows": append([]byte{0, 0, 0}, bytes.Repeat([]byte{0xff}, 11)...),
		"extended count lies": func() []byte {
			b := appendString(nil, "c")
			b = appendString(appendString(b, "a"), "n")
			b = append(b, 2, 1, 2, 4) // attempt, ask, memory, vcores
			return append(b, 0xff, 0xff, 0xff, 0xff, 0x0f)
		}(),
	}
	for name, body := range cases {
		var in interner
		if c, err := decodeContainer(body, &in); err == nil {
			t.Errorf("%s: decoded %+v, want an error", name, c)
		}
	}
}

func TestRestoreTurnsTheGarbageCollectorBackOn(t *testing.T) {
	data := persist(t, richState(t))
	prev := debug.SetGCPercent(137)
	defer debug.SetGCPercent(prev)
	// Restores at once, overlapping, succeeding and failing.
	var wg sync.WaitGroup
	for i := 0; i < 8; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			snap := data
			if i%2 == 1 {
				snap = data[:len(data)/2]
			}
			New(nil).Restore(io.NopCloser(bytes.NewReader(snap)))
		}()
	}
	wg.Wait()
	if got := debug.SetGCPercent(137); got != 137 {
		t.Fatalf("GC percent %d after the restores, want 137 as before", got)
	}
}
