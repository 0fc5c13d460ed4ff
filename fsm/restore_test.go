package fsm

import (
	"bytes"
	"encoding/binary"
	"io"
	"runtime"
	"strings"
	"testing"

	"github.com/hashicorp/go-msgpack/v2/codec"
	"github.com/weft-sched/weft/scheduler"
)

// snapshotOf builds a format 1 snapshot by hand: the magic, the version,
// a header, then each record (a type byte and a msgpack body, or raw
// bytes).
func snapshotOf(t *testing.T, records ...any) []byte {
	t.Helper()
	var buf bytes.Buffer
	buf.Write(snapshotMagic)
	buf.WriteByte(snapshotV1)
	enc := codec.NewEncoder(&buf, msgpackHandle)
	if err := enc.Encode(&snapshotHeader{Index: 9, TableIndex: make([]uint64, numTables)}); err != nil {
		t.Fatal(err)
	}
	for _, r := range records {
		switch r := r.(type) {
		case recordType:
			buf.WriteByte(byte(r))
		case []byte:
			buf.Write(r)
		default:
			if err := enc.Encode(r); err != nil {
				t.Fatal(err)
			}
		}
	}
	return buf.Bytes()
}

func TestRestoreRefusesGarbledContentWithAnError(t *testing.T) {
	emptyChild := scheduler.DefaultQueueConfig()
	emptyChild.Root.Children = append(emptyChild.Root.Children, nil)
	node := &scheduler.Node{ID: "n1", Capacity: small}
	cases := map[string]struct {
		snap []byte
		want string
	}{
		"queue tree with an empty queue": {snapshotOf(t, recordQueueConfig, emptyChild, recordEnd), "empty child queue"},
		"queue tree with no root":        {snapshotOf(t, recordQueueConfig, &scheduler.QueueConfig{Scheduler: scheduler.DefaultSchedulerConfig()}, recordEnd), "no root queue"},
		"node record of the wrong shape": {snapshotOf(t, recordNode, []byte{0x81, 0xa2, 'i', 'd', 0x81, 0x01, 0x02}, recordEnd), "read node"},
		"app record cut short":           {snapshotOf(t, recordNode, node, recordApp, []byte{0x85}), "read app"},
		"container record not msgpack":   {snapshotOf(t, recordContainer, []byte{0xc1}, recordEnd), "read container"},
		"unknown record type":            {snapshotOf(t, recordNode, node, recordType(0x44), []byte{0x80}, recordEnd), "unknown snapshot record type 68"},
		"no end record":                  {snapshotOf(t, recordNode, node), "without an end record"},
		"header not msgpack":             {append(append([]byte(nil), snapshotMagic...), snapshotV1, 0xc1), "read header"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			f := newFuzzState(t).h.f
			before := f.State()
			err := f.Restore(io.NopCloser(bytes.NewReader(tc.snap)))
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("restore: %v, want an error mentioning %q", err, tc.want)
			}
			if f.State() != before {
				t.Fatalf("a refused snapshot changed the state")
			}
		})
	}
	// The same builder makes a snapshot that does restore, so the cases
	// above fail for the reason they name.
	f := New(nil)
	if err := f.Restore(io.NopCloser(bytes.NewReader(snapshotOf(t, recordQueueConfig, scheduler.DefaultQueueConfig(), recordNode, node, recordEnd)))); err != nil {
		t.Fatal(err)
	}
	if _, ok := f.State().Node("n1"); !ok || f.State().Index() != 9 {
		t.Fatalf("hand-built snapshot restored wrongly")
	}
}

// panicReader stands for snapshot content that makes reading panic in a
// way nobody foresaw.
type panicReader struct{}

func (panicReader) Read([]byte) (int, error) { panic("unforeseen") }

func TestRestoreTurnsAPanicWhileReadingIntoAnError(t *testing.T) {
	f := New(nil)
	before := f.State()
	err := f.Restore(io.NopCloser(panicReader{}))
	if err == nil || !strings.Contains(err.Error(), "unforeseen") {
		t.Fatalf("restore: %v, want the panic as an error", err)
	}
	if f.State() != before {
		t.Fatalf("a failed restore changed the state")
	}
}

// framed is a format 2 record with a body given as bytes.
type framed struct {
	t    recordType
	body []byte
}

// snapshotV2Of builds a format 2 snapshot by hand: the magic, the version,
// a framed header, then records: a recordType followed by a msgpack
// body, a framed record, or raw bytes.
func snapshotV2Of(t *testing.T, records ...any) []byte {
	t.Helper()
	msgpack := func(v any) []byte {
		var b []byte
		if err := codec.NewEncoderBytes(&b, msgpackHandle).Encode(v); err != nil {
			t.Fatal(err)
		}
		return b
	}
	frame := func(b []byte) []byte { return append(binary.AppendUvarint(nil, uint64(len(b))), b...) }
	var buf bytes.Buffer
	buf.Write(snapshotMagic)
	buf.WriteByte(snapshotV2)
	buf.Write(frame(msgpack(&snapshotHeader{Index: 9, TableIndex: make([]uint64, numTables)})))
	for i := 0; i < len(records); i++ {
		switch r := records[i].(type) {
		case recordType:
			buf.WriteByte(byte(r))
			if r != recordEnd {
				i++
				buf.Write(frame(msgpack(records[i])))
			}
		case framed:
			buf.WriteByte(byte(r.t))
			buf.Write(frame(r.body))
		case []byte:
			buf.Write(r)
		}
	}
	return buf.Bytes()
}

func TestRestoreRefusesGarbledFormat2WithAnError(t *testing.T) {
	node := &scheduler.Node{ID: "n1", Capacity: small}
	container := appendContainer(nil, &scheduler.Container{ID: "c-1-0", AppID: "a", NodeID: "n1", State: scheduler.ContainerRunning})
	cases := map[string]struct {
		snap []byte
		want string
	}{
		"container record cut short":      {snapshotV2Of(t, framed{recordContainer, container[:len(container)-2]}, recordEnd), "read container"},
		"container record too long":       {snapshotV2Of(t, framed{recordContainer, append(bytes.Clone(container), 1)}, recordEnd), "read container"},
		"node record of the wrong shape":  {snapshotV2Of(t, framed{recordNode, []byte{0x81, 0xa2, 'i', 'd', 0x81, 0x01, 0x02}}, recordEnd), "read node"},
		"node record with bytes after it": {snapshotV2Of(t, framed{recordNode, append(snapshotV2Body(t, node), 0xc0)}, recordEnd), "bytes after"},
		"record over the size limit":      {snapshotV2Of(t, []byte{byte(recordNode)}, binary.AppendUvarint(nil, maxRecordBytes+1), recordEnd), "over the limit"},
		"record longer than the snapshot": {snapshotV2Of(t, []byte{byte(recordNode), 0xff, 0x7f, 0x80}), "ends within a record"},
		"unknown record type":             {snapshotV2Of(t, recordNode, node, framed{0x44, []byte{0x80}}, recordEnd), "unknown snapshot record type 68"},
		"queue tree with no root":         {snapshotV2Of(t, recordQueueConfig, &scheduler.QueueConfig{Scheduler: scheduler.DefaultSchedulerConfig()}, recordEnd), "no root queue"},
		"no end record":                   {snapshotV2Of(t, recordNode, node), "without an end record"},
		"header longer than the snapshot": {append(append([]byte(nil), snapshotMagic...), snapshotV2, 0x90, 0x01), "read header"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			f := newFuzzState(t).h.f
			before := f.State()
			err := f.Restore(io.NopCloser(bytes.NewReader(tc.snap)))
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("restore: %v, want an error mentioning %q", err, tc.want)
			}
			if f.State() != before {
				t.Fatalf("a refused snapshot changed the state")
			}
		})
	}
	// The same builder makes a snapshot that does restore.
	f := New(nil)
	if err := f.Restore(io.NopCloser(bytes.NewReader(snapshotV2Of(t, recordQueueConfig, scheduler.DefaultQueueConfig(),
		recordNode, node, framed{recordContainer, container}, recordEnd)))); err != nil {
		t.Fatal(err)
	}
	if _, ok := f.State().Container("c-1-0"); !ok || f.State().Index() != 9 {
		t.Fatalf("hand-built snapshot restored wrongly")
	}
}

func snapshotV2Body(t *testing.T, v any) []byte {
	var b []byte
	if err := codec.NewEncoderBytes(&b, msgpackHandle).Encode(v); err != nil {
		t.Fatal(err)
	}
	return b
}

func TestRestoreDoesNotAllocateWhatARecordOnlyClaims(t *testing.T) {
	// A record claiming 60 MiB, followed by a few bytes.
	snap := snapshotV2Of(t, []byte{byte(recordNode)}, binary.AppendUvarint(nil, 60<<20), []byte("short"))
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	err := New(nil).Restore(io.NopCloser(bytes.NewReader(snap)))
	runtime.ReadMemStats(&after)
	if err == nil {
		t.Fatal("a record cut short restored")
	}
	if got := after.TotalAlloc - before.TotalAlloc; got > 4<<20 {
		t.Fatalf("restore allocated %d bytes for a record of a few", got)
	}
}
