package rpc

import (
	"bytes"
	"encoding/binary"
	"net"
	"testing"
)

// writeLog is a net.Conn that records each Write.
type writeLog struct {
	net.Conn
	writes [][]byte
}

func (w *writeLog) Write(p []byte) (int, error) {
	w.writes = append(w.writes, append([]byte(nil), p...))
	return len(p), nil
}

func yamuxHeader(typ byte, length uint32) []byte {
	h := make([]byte, yamuxHeaderSize)
	h[1] = typ
	binary.BigEndian.PutUint32(h[4:8], 7) // stream ID
	binary.BigEndian.PutUint32(h[8:12], length)
	return h
}

// A data frame's header goes out in one write with its body; every other
// write (frames without a body, large bodies) passes through as it came,
// and the bytes are the same in the same order.
func TestFrameConnCoalescesDataFrames(t *testing.T) {
	log := &writeLog{}
	c := newFrameConn(log)
	write := func(p []byte) {
		t.Helper()
		if n, err := c.Write(p); err != nil || n != len(p) {
			t.Fatalf("Write(%d bytes) = %d, %v", len(p), n, err)
		}
	}
	body := []byte("hello")
	large := bytes.Repeat([]byte{'z'}, maxCoalescedBody+1)
	const typeWindowUpdate = 1
	var sent [][]byte
	for _, p := range [][]byte{
		yamuxHeader(yamuxTypeData, uint32(len(body))), body,
		yamuxHeader(typeWindowUpdate, 0),
		yamuxHeader(yamuxTypeData, 0),
		yamuxHeader(yamuxTypeData, uint32(len(large))), large,
	} {
		write(p)
		sent = append(sent, p)
	}
	wantSizes := []int{yamuxHeaderSize + len(body), yamuxHeaderSize, yamuxHeaderSize, yamuxHeaderSize, len(large)}
	if len(log.writes) != len(wantSizes) {
		t.Fatalf("%d writes reached the connection, want %d", len(log.writes), len(wantSizes))
	}
	for i, w := range log.writes {
		if len(w) != wantSizes[i] {
			t.Errorf("write %d: %d bytes, want %d", i, len(w), wantSizes[i])
		}
	}
	if got, want := bytes.Join(log.writes, nil), bytes.Join(sent, nil); !bytes.Equal(got, want) {
		t.Fatal("the bytes written differ from what yamux wrote")
	}
}
