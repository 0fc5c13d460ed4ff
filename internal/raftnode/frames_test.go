package raftnode

import (
	"bytes"
	"errors"
	"io"
	"net"
	"testing"
	"time"

	"github.com/hashicorp/go-msgpack/v2/codec"
	"github.com/hashicorp/raft"
	"github.com/weft-sched/weft/internal/msgpackscan"
)

func raftMessage(t *testing.T, typ byte, req any) []byte {
	t.Helper()
	var out []byte
	if err := codec.NewEncoderBytes(&out, &codec.MsgpackHandle{}).Encode(req); err != nil {
		t.Fatal(err)
	}
	return append([]byte{typ}, out...)
}

// readThrough writes stream into one end of a pipe and reads it all
// through a raftFrameConn on the other, bounded at max bytes a message.
func readThrough(t *testing.T, stream []byte, max int) (int, error) {
	t.Helper()
	a, b := net.Pipe()
	defer a.Close()
	go func() {
		a.Write(stream)
		a.Close()
	}()
	fc := NewFrameConn(b, max, 10*time.Second)
	n, err := io.Copy(io.Discard, struct{ io.Reader }{fc})
	return int(n), err
}

func TestRaftMessagesPastTheBoundCloseTheConnection(t *testing.T) {
	small := raftMessage(t, 0, &raft.AppendEntriesRequest{Term: 1, Entries: []*raft.Log{{Data: []byte("x")}}})
	big := raftMessage(t, 0, &raft.AppendEntriesRequest{Term: 1, Entries: []*raft.Log{{Data: make([]byte, 4096)}}})
	// Pipelined messages within the bound pass.
	stream := bytes.Repeat(small, 50)
	if n, err := readThrough(t, stream, 1024); err != nil || n != len(stream) {
		t.Fatalf("small messages: read %d of %d: %v", n, len(stream), err)
	}
	// A message past it fails the read and closes the connection.
	stream = append(append([]byte(nil), small...), big...)
	n, err := readThrough(t, stream, 1024)
	if !errors.Is(err, msgpackscan.ErrTooLarge) {
		t.Fatalf("a 4 KiB message with a 1 KiB bound: read %d bytes, err %v", n, err)
	}
}

func TestRaftSnapshotsStreamPastTheBound(t *testing.T) {
	snapshot := bytes.Repeat([]byte{0xc1}, 8000) // not msgpack: it must not be scanned
	header := raftMessage(t, installSnapshotType, &raft.InstallSnapshotRequest{Term: 1, Size: int64(len(snapshot)),
		Configuration: []byte("servers")})
	next := raftMessage(t, 0, &raft.AppendEntriesRequest{Term: 1})
	stream := append(append(append([]byte(nil), header...), snapshot...), next...)
	if n, err := readThrough(t, stream, 1024); err != nil || n != len(stream) {
		t.Fatalf("snapshot of 8000 bytes with a 1 KiB message bound: read %d of %d: %v", n, len(stream), err)
	}
	// The header itself is bounded.
	huge := raftMessage(t, installSnapshotType, &raft.InstallSnapshotRequest{Term: 1, Size: 1,
		Configuration: make([]byte, MaxSnapshotHeader)})
	if _, err := readThrough(t, huge, MaxMessage); !errors.Is(err, msgpackscan.ErrTooLarge) {
		t.Fatalf("an InstallSnapshot header of 1 MiB: err %v", err)
	}
	// A header without a valid size cannot say where the snapshot ends.
	bad := raftMessage(t, installSnapshotType, map[string]any{"Term": 1, "Size": -5})
	if _, err := readThrough(t, bad, 1024); err == nil {
		t.Fatal("InstallSnapshot with a negative size accepted")
	}
}

// The attack: anyone speaking Raft on the RPC port sent a 100 MiB
// message and the server read it all. Now the connection is closed at the
// bound, and the server goes on.
// deadlineConn records the read deadlines set on it.
type deadlineConn struct {
	net.Conn
	deadlines []time.Time
}

func (d *deadlineConn) SetReadDeadline(t time.Time) error {
	d.deadlines = append(d.deadlines, t)
	return nil
}

func TestRaftHandshakeDeadlineEndsWithTheFirstWholeMessage(t *testing.T) {
	msg := raftMessage(t, 0, &raft.AppendEntriesRequest{Term: 1})
	dc := &deadlineConn{}
	fc := NewFrameConn(dc, 1024, time.Second)
	// The first half of a message pushes the deadline back...
	if err := fc.follow(msg[:5]); err != nil {
		t.Fatal(err)
	}
	if fc.started {
		t.Fatal("half a message ended the handshake")
	}
	// ... and the rest of it ends it.
	if err := fc.follow(msg[5:]); err != nil {
		t.Fatal(err)
	}
	if !fc.started || len(dc.deadlines) != 1 || !dc.deadlines[0].IsZero() {
		t.Fatalf("after a whole message: started %v, deadlines set %v", fc.started, dc.deadlines)
	}
}
