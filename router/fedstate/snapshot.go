package fedstate

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"io"

	"github.com/hashicorp/raft"
	"github.com/weft-sched/weft/scheduler/federation"
)

// The snapshot format: the magic, then records, each a type byte, a
// uvarint length and that many bytes of msgpack, ending with recordEnd.
// Record types are part of the on-disk format: never reuse one.
const snapshotMagic = "WEFTFED1"

type recordType uint8

const (
	recordHeader     recordType = 1 // snapshotHeader
	recordSubcluster recordType = 2 // Subcluster
	recordHome       recordType = 3 // AppHome
	recordPolicy     recordType = 4 // federation.Policy
	recordWeights    recordType = 5 // queueWeights
	recordEnd        recordType = 0x7f
)

// maxRecord bounds one record on restore.
const maxRecord = 16 << 20

type snapshotHeader struct {
	Index      uint64            `codec:"index"`
	WeightsGen uint64            `codec:"weights_gen"`
	NextApp    uint64            `codec:"next_app"`
	Submits    map[string]uint64 `codec:"submits"`
}

type queueWeights struct {
	Queue   string            `codec:"queue"`
	Weights map[string]uint32 `codec:"weights"`
}

// Snapshot captures the current state; Persist writes it without holding
// up Apply (the state is immutable).
func (f *FSM) Snapshot() (raft.FSMSnapshot, error) { return &snapshot{s: f.State()}, nil }

type snapshot struct{ s *State }

func (sn *snapshot) Persist(sink raft.SnapshotSink) error {
	if err := WriteSnapshot(sink, sn.s); err != nil {
		sink.Cancel()
		return err
	}
	return sink.Close()
}

func (sn *snapshot) Release() {}

// WriteSnapshot writes s in the snapshot format.
func WriteSnapshot(w io.Writer, s *State) error {
	bw := bufio.NewWriter(w)
	bw.WriteString(snapshotMagic)
	put := func(t recordType, v any) error {
		body, err := encodeBody(v)
		if err != nil {
			return fmt.Errorf("federation snapshot: record type %d: %w", t, err)
		}
		bw.WriteByte(byte(t))
		var n [binary.MaxVarintLen64]byte
		bw.Write(n[:binary.PutUvarint(n[:], uint64(len(body)))])
		_, err = bw.Write(body)
		return err
	}
	if err := put(recordHeader, snapshotHeader{Index: s.index, WeightsGen: s.weightsGen, NextApp: s.nextApp, Submits: s.submits}); err != nil {
		return err
	}
	for _, sc := range s.Subclusters() {
		if err := put(recordSubcluster, sc); err != nil {
			return err
		}
	}
	for _, h := range s.AppHomes() {
		if err := put(recordHome, h); err != nil {
			return err
		}
	}
	for _, p := range s.Policies() {
		if err := put(recordPolicy, p); err != nil {
			return err
		}
	}
	for _, q := range s.WeightedQueues() {
		if err := put(recordWeights, queueWeights{Queue: q, Weights: s.weights[q]}); err != nil {
			return err
		}
	}
	bw.WriteByte(byte(recordEnd))
	return bw.Flush()
}

// Restore replaces the state with a snapshot's.
func (f *FSM) Restore(rc io.ReadCloser) error {
	defer rc.Close()
	s, err := ReadSnapshot(rc)
	if err != nil {
		return err
	}
	f.halt.Store(nil)
	f.publish(s)
	return nil
}

// ReadSnapshot reads a state written by WriteSnapshot.
func ReadSnapshot(r io.Reader) (*State, error) {
	br := bufio.NewReader(r)
	magic := make([]byte, len(snapshotMagic))
	if _, err := io.ReadFull(br, magic); err != nil || string(magic) != snapshotMagic {
		return nil, fmt.Errorf("federation snapshot: not a snapshot of this format (magic %q)", magic)
	}
	s := emptyState()
	homes, byRequest, byLocal := s.homes.Txn(), s.byRequest.Txn(), s.byLocal.Txn()
	buf := make([]byte, 0, 4096)
	sawHeader := false
	for {
		tb, err := br.ReadByte()
		if err != nil {
			return nil, fmt.Errorf("federation snapshot: truncated: %w", err)
		}
		t := recordType(tb)
		if t == recordEnd {
			break
		}
		n, err := binary.ReadUvarint(br)
		if err != nil || n > maxRecord {
			return nil, fmt.Errorf("federation snapshot: record type %d: bad length", t)
		}
		if uint64(cap(buf)) < n {
			buf = make([]byte, n)
		}
		buf = buf[:n]
		if _, err := io.ReadFull(br, buf); err != nil {
			return nil, fmt.Errorf("federation snapshot: record type %d: %w", t, err)
		}
		if t != recordHeader && !sawHeader {
			return nil, errors.New("federation snapshot: records before the header")
		}
		switch t {
		case recordHeader:
			var h snapshotHeader
			if err := decode(buf, &h); err != nil {
				return nil, fmt.Errorf("federation snapshot: header: %w", err)
			}
			s.index, s.weightsGen, s.nextApp, sawHeader = h.Index, h.WeightsGen, h.NextApp, true
			if h.Submits != nil {
				s.submits = h.Submits
			}
		case recordSubcluster:
			sc := new(Subcluster)
			if err := decode(buf, sc); err != nil {
				return nil, fmt.Errorf("federation snapshot: sub-cluster: %w", err)
			}
			s.subclusters[sc.ID] = sc
		case recordHome:
			h := new(AppHome)
			if err := decode(buf, h); err != nil {
				return nil, fmt.Errorf("federation snapshot: app home: %w", err)
			}
			homes.Insert([]byte(h.AppID), h)
			byRequest.Insert([]byte(h.RequestID), h.AppID)
			if h.LocalID != "" {
				byLocal.Insert([]byte(h.Home+"/"+h.LocalID), h.AppID)
			}
		case recordPolicy:
			var p federation.Policy
			if err := decode(buf, &p); err != nil {
				return nil, fmt.Errorf("federation snapshot: policy: %w", err)
			}
			s.policies[p.Queue] = p
		case recordWeights:
			var q queueWeights
			if err := decode(buf, &q); err != nil {
				return nil, fmt.Errorf("federation snapshot: weights: %w", err)
			}
			s.weights[q.Queue] = q.Weights
		default:
			return nil, fmt.Errorf("federation snapshot: unknown record type %d", t)
		}
	}
	if !sawHeader {
		return nil, errors.New("federation snapshot: no header")
	}
	s.homes, s.byRequest, s.byLocal = homes.Commit(), byRequest.Commit(), byLocal.Commit()
	return s, nil
}
