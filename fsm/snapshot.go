package fsm

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"

	"github.com/hashicorp/go-msgpack/v2/codec"
	"github.com/hashicorp/raft"
	"github.com/weft-sched/weft/scheduler"
)

// snapshotMagic opens every weft snapshot; the byte after it is the format
// version.
var snapshotMagic = []byte("WEFTSNAP")

const snapshotVersion = 1

// recordType is the byte before each snapshot record. Values are part of the
// snapshot format: never reuse or renumber one. A type with the high bit set
// may be skipped by a server that does not know it.
type recordType uint8

const (
	recordQueueConfig recordType = 1
	recordEnd         recordType = 0x7f
)

type snapshotHeader struct {
	Index      uint64   `codec:"index"`
	TableIndex []uint64 `codec:"table_index"`
}

type snapshot struct {
	state *State
}

// Persist writes the state to sink: the magic, the version, a header, then
// records each prefixed by its type byte, then an end record so that a
// truncated snapshot is detected on restore.
func (s *snapshot) Persist(sink raft.SnapshotSink) error {
	if err := writeSnapshot(sink, s.state); err != nil {
		sink.Cancel()
		return err
	}
	return sink.Close()
}

func (s *snapshot) Release() {}

func writeSnapshot(w io.Writer, st *State) error {
	bw := bufio.NewWriterSize(w, 256<<10)
	enc := codec.NewEncoder(bw, msgpackHandle)
	bw.Write(snapshotMagic)
	bw.WriteByte(snapshotVersion)
	hdr := snapshotHeader{Index: st.index, TableIndex: st.tableIndex[:]}
	if err := enc.Encode(&hdr); err != nil {
		return fmt.Errorf("write snapshot header: %w", err)
	}
	record := func(t recordType, body any) error {
		if err := bw.WriteByte(byte(t)); err != nil {
			return err
		}
		return enc.Encode(body)
	}
	if err := record(recordQueueConfig, st.queues); err != nil {
		return fmt.Errorf("write queue configuration: %w", err)
	}
	if err := bw.WriteByte(byte(recordEnd)); err != nil {
		return err
	}
	return bw.Flush()
}

func readSnapshot(r io.Reader) (*State, error) {
	br := bufio.NewReaderSize(r, 256<<10)
	magic := make([]byte, len(snapshotMagic)+1)
	if _, err := io.ReadFull(br, magic); err != nil {
		return nil, fmt.Errorf("read header: %w", err)
	}
	if !bytes.Equal(magic[:len(snapshotMagic)], snapshotMagic) {
		return nil, errors.New("not a weft snapshot")
	}
	if v := magic[len(snapshotMagic)]; v != snapshotVersion {
		return nil, fmt.Errorf("snapshot format version %d is not supported by this binary (want %d)", v, snapshotVersion)
	}
	dec := codec.NewDecoder(br, msgpackHandle)
	var hdr snapshotHeader
	if err := dec.Decode(&hdr); err != nil {
		return nil, fmt.Errorf("read header: %w", err)
	}
	s := newState()
	s.index = hdr.Index
	copy(s.tableIndex[:], hdr.TableIndex)
	for {
		b, err := br.ReadByte()
		if err != nil {
			return nil, fmt.Errorf("snapshot ends without an end record: %w", err)
		}
		switch t := recordType(b); t {
		case recordEnd:
			return s, nil
		case recordQueueConfig:
			var c scheduler.QueueConfig
			if err := dec.Decode(&c); err != nil {
				return nil, fmt.Errorf("read queue configuration: %w", err)
			}
			s.setQueues(&c)
		default:
			if t&0x80 == 0 {
				return nil, fmt.Errorf("unknown snapshot record type %d", t)
			}
			var skip codec.Raw
			if err := dec.Decode(&skip); err != nil {
				return nil, fmt.Errorf("skip record type %d: %w", t, err)
			}
		}
	}
}
