package fsm

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"slices"

	iradix "github.com/hashicorp/go-immutable-radix/v2"
	"github.com/hashicorp/go-msgpack/v2/codec"
	"github.com/hashicorp/raft"
	"github.com/weft-sched/weft/acl"
	"github.com/weft-sched/weft/scheduler"
)

// A snapshot is the magic, a format version byte, a header, then records,
// then an end record (so that a truncated snapshot is detected on
// restore). This binary writes format 2 and reads formats 1 and 2.
//
// Format 2: the header is a uvarint length and a msgpack snapshotHeader;
// each record is its type byte, a uvarint length and a body of exactly
// that length — a container's in the binary layout of
// snapshot_container.go, every other record msgpack; the end record is
// its type byte alone. Records come table by table, in the order
// writeSnapshot writes them, each table in key order.
//
// Format 1 (snapshot_v1.go): the header and each record's body are
// msgpack with no length before them.
var snapshotMagic = []byte("WEFTSNAP")

const (
	snapshotV1      = 1
	snapshotV2      = 2
	snapshotVersion = snapshotV2
)

// maxRecordBytes bounds one record of a format 2 snapshot. (A record
// holds one row; the largest, an app or the queue configuration, came
// through a request of at most 8 MiB.)
const maxRecordBytes = 64 << 20

// recordType is the byte before each snapshot record. Values are part of the
// snapshot format: never reuse or renumber one. A type with the high bit set
// may be skipped by a server that does not know it.
type recordType uint8

const (
	recordQueueConfig recordType = 1
	recordNode        recordType = 2
	recordApp         recordType = 3
	recordContainer   recordType = 4
	recordRequest     recordType = 5
	recordACLToken    recordType = 8
	recordACLPolicy   recordType = 9
	recordACLMeta     recordType = 10
	recordWorkloadKey recordType = 20
	recordEnd         recordType = 0x7f
)

type snapshotHeader struct {
	Index      uint64   `codec:"index"`
	TableIndex []uint64 `codec:"table_index"`
}

type snapshot struct {
	state *State
}

// Persist writes the state to sink in the current snapshot format.
func (s *snapshot) Persist(sink raft.SnapshotSink) error {
	if err := writeSnapshot(sink, s.state); err != nil {
		sink.Cancel()
		return err
	}
	return sink.Close()
}

func (s *snapshot) Release() {}

// snapshotWriter frames format 2 records.
type snapshotWriter struct {
	bw     *bufio.Writer
	enc    *codec.Encoder // encodes into body
	body   []byte
	length []byte // a record's length, reused
}

// frame writes a record: its type, the length of body, then body.
func (w *snapshotWriter) frame(t recordType, body []byte) error {
	w.bw.WriteByte(byte(t))
	return w.lengthAndBody(body)
}

func (w *snapshotWriter) lengthAndBody(body []byte) error {
	w.length = binary.AppendUvarint(w.length[:0], uint64(len(body)))
	w.bw.Write(w.length)
	_, err := w.bw.Write(body)
	return err
}

// msgpack writes a record whose body is v in msgpack.
func (w *snapshotWriter) msgpack(t recordType, v any) error {
	w.body = w.body[:0]
	w.enc.ResetBytes(&w.body)
	if err := w.enc.Encode(v); err != nil {
		return err
	}
	return w.frame(t, w.body)
}

func writeSnapshot(w io.Writer, st *State) error {
	sw := &snapshotWriter{bw: bufio.NewWriterSize(w, 256<<10)}
	sw.enc = codec.NewEncoderBytes(&sw.body, msgpackHandle)
	sw.bw.Write(snapshotMagic)
	sw.bw.WriteByte(snapshotVersion)
	sw.body = sw.body[:0]
	sw.enc.ResetBytes(&sw.body)
	if err := sw.enc.Encode(&snapshotHeader{Index: st.index, TableIndex: st.tableIndex[:]}); err != nil {
		return fmt.Errorf("write snapshot header: %w", err)
	}
	if err := sw.lengthAndBody(sw.body); err != nil {
		return fmt.Errorf("write snapshot header: %w", err)
	}
	if err := sw.msgpack(recordQueueConfig, st.queues); err != nil {
		return fmt.Errorf("write queue configuration: %w", err)
	}
	for _, k := range st.workloadKeys {
		if err := sw.msgpack(recordWorkloadKey, k); err != nil {
			return fmt.Errorf("write workload keys: %w", err)
		}
	}
	if err := writeTable(sw, st.nodes, recordNode); err != nil {
		return fmt.Errorf("write nodes: %w", err)
	}
	if err := writeTable(sw, st.apps, recordApp); err != nil {
		return fmt.Errorf("write apps: %w", err)
	}
	var body []byte
	var err error
	st.containers.Ascend("", func(_ string, c *scheduler.Container) bool {
		body = appendContainer(body[:0], c)
		err = sw.frame(recordContainer, body)
		return err == nil
	})
	if err != nil {
		return fmt.Errorf("write containers: %w", err)
	}
	if err := writeTable(sw, st.requestsByIndex, recordRequest); err != nil {
		return fmt.Errorf("write request records: %w", err)
	}
	// Policies before tokens: a token names policies.
	if err := writeTable(sw, st.acl.policies, recordACLPolicy); err != nil {
		return fmt.Errorf("write ACL policies: %w", err)
	}
	if err := writeTable(sw, st.acl.tokens, recordACLToken); err != nil {
		return fmt.Errorf("write ACL tokens: %w", err)
	}
	if err := sw.msgpack(recordACLMeta, &aclMeta{BootstrapIndex: st.acl.bootstrapIndex}); err != nil {
		return fmt.Errorf("write ACL state: %w", err)
	}
	if err := sw.bw.WriteByte(byte(recordEnd)); err != nil {
		return err
	}
	return sw.bw.Flush()
}

func writeTable[T any](w *snapshotWriter, tree *iradix.Tree[T], t recordType) error {
	it := tree.Root().Iterator()
	for _, v, ok := it.Next(); ok; _, v, ok = it.Next() {
		if err := w.msgpack(t, v); err != nil {
			return err
		}
	}
	return nil
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
	switch v := magic[len(snapshotMagic)]; v {
	case snapshotV1:
		return readSnapshotV1(br)
	case snapshotV2:
		return readSnapshotV2(br)
	default:
		return nil, fmt.Errorf("snapshot format version %d is not supported by this binary (it reads %d and %d)", v, snapshotV1, snapshotV2)
	}
}

func readSnapshotV2(br *bufio.Reader) (*State, error) {
	var buf []byte
	body := func() ([]byte, error) {
		n, err := binary.ReadUvarint(br)
		if err != nil {
			return nil, err
		}
		return readBody(br, n, &buf)
	}
	// Msgpack bodies are decoded from a copy: a decoded []byte field may
	// share the bytes it was decoded from.
	dec := codec.NewDecoderBytes(nil, msgpackHandle)
	decode := func(b []byte) func(any) error {
		return func(v any) error {
			dec.ResetBytes(bytes.Clone(b))
			if err := dec.Decode(v); err != nil {
				return err
			}
			if n := dec.NumBytesRead(); n != len(b) {
				return fmt.Errorf("%d bytes after the record's value", len(b)-n)
			}
			return nil
		}
	}
	b, err := body()
	if err != nil {
		return nil, fmt.Errorf("read header: %w", err)
	}
	var hdr snapshotHeader
	if err := decode(b)(&hdr); err != nil {
		return nil, fmt.Errorf("read header: %w", err)
	}
	rs := newRestorer(&hdr)
	var in interner
	for {
		t, err := br.ReadByte()
		if err != nil {
			return nil, fmt.Errorf("snapshot ends without an end record: %w", err)
		}
		if recordType(t) == recordEnd {
			return rs.finish(), nil
		}
		b, err := body()
		if err != nil {
			return nil, fmt.Errorf("snapshot ends within a record of type %d: %w", t, err)
		}
		switch t := recordType(t); t {
		case recordContainer:
			c, err := decodeContainer(b, &in)
			if err != nil {
				return nil, fmt.Errorf("read container: %w", err)
			}
			rs.container(c)
		default:
			if err := rs.record(t, decode(b)); errors.Is(err, errUnknownRecord) && t&0x80 != 0 {
				continue // a record of a later version that may be skipped
			} else if err != nil {
				return nil, err
			}
		}
	}
}

// readBody reads a record body of n bytes into *buf, which it reuses. The
// buffer grows by at most 1 MiB ahead of the bytes that arrived, so a
// length that lies costs little more memory than was actually sent.
func readBody(r io.Reader, n uint64, buf *[]byte) ([]byte, error) {
	if n > maxRecordBytes {
		return nil, fmt.Errorf("record of %d bytes is over the limit of %d", n, maxRecordBytes)
	}
	b := (*buf)[:0]
	for len(b) < int(n) {
		m := min(int(n)-len(b), 1<<20)
		b = slices.Grow(b, m)
		got, err := io.ReadFull(r, b[len(b):len(b)+m])
		b = b[:len(b)+got]
		if err != nil {
			return nil, err
		}
	}
	*buf = b
	return b, nil
}

var errUnknownRecord = errors.New("unknown snapshot record type")

// restorer builds the State a snapshot describes, record by record, in
// the transactions of a fresh state; finish builds the container indexes
// and commits.
type restorer struct {
	s                         *State
	nodes, draining, down     *iradix.Txn[*scheduler.Node]
	apps, active, finished    *iradix.Txn[*scheduler.App]
	activeUIDs                *iradix.Txn[*scheduler.App]
	requests, requestsByIndex *iradix.Txn[*RequestRecord]
	aclTokens, aclBySecret    *iradix.Txn[*acl.Token]
	aclPolicies               *iradix.Txn[*acl.Policy]
	containers                []*scheduler.Container // in the order read
}

func newRestorer(hdr *snapshotHeader) *restorer {
	s := newState()
	s.index = hdr.Index
	copy(s.tableIndex[:], hdr.TableIndex)
	return &restorer{
		s:     s,
		nodes: s.nodes.Txn(), draining: s.draining.Txn(), down: s.down.Txn(),
		apps: s.apps.Txn(), active: s.activeApps.Txn(), finished: s.finished.Txn(), activeUIDs: s.activeUIDs.Txn(),
		requests: s.requests.Txn(), requestsByIndex: s.requestsByIndex.Txn(),
		aclTokens: s.acl.tokens.Txn(), aclBySecret: s.acl.bySecret.Txn(), aclPolicies: s.acl.policies.Txn(),
	}
}

// record decodes one msgpack record of type t with decode and adds it to
// the state; errUnknownRecord if t is none it knows.
func (rs *restorer) record(t recordType, decode func(any) error) error {
	s := rs.s
	switch t {
	case recordNode:
		n := new(scheduler.Node)
		if err := decode(n); err != nil {
			return fmt.Errorf("read node: %w", err)
		}
		if old, replaced := rs.nodes.Insert([]byte(n.ID), n); replaced {
			if k := downKey(old); k != nil {
				rs.down.Delete(k)
			}
			rs.draining.Delete([]byte(old.ID))
		}
		if k := drainingKey(n); k != nil {
			rs.draining.Insert(k, n)
		}
		if k := downKey(n); k != nil {
			rs.down.Insert(k, n)
		}
	case recordApp:
		a := new(scheduler.App)
		if err := decode(a); err != nil {
			return fmt.Errorf("read app: %w", err)
		}
		if old, replaced := rs.apps.Insert([]byte(a.ID), a); replaced {
			// A damaged snapshot holds an app twice: the last one wins.
			rs.active.Delete(indexKey(old.CreateIndex))
			if _, ok := rs.finished.Delete(finishedKey(old)); ok {
				s.numFinished--
			}
			if holder, ok := rs.activeUIDs.Get(uidKey(old.UID)); ok && holder.ID == old.ID {
				rs.activeUIDs.Delete(uidKey(old.UID))
				s.numActiveUIDs--
			}
		}
		if !a.State.Terminal() {
			rs.active.Insert(indexKey(a.CreateIndex), a)
			if a.UID != 0 {
				if _, replaced := rs.activeUIDs.Insert(uidKey(a.UID), a); !replaced {
					s.numActiveUIDs++
				}
			}
		} else if _, replaced := rs.finished.Insert(finishedKey(a), a); !replaced {
			s.numFinished++
		}
	case recordContainer:
		c := new(scheduler.Container)
		if err := decode(c); err != nil {
			return fmt.Errorf("read container: %w", err)
		}
		rs.container(c)
	case recordRequest:
		r := new(RequestRecord)
		if err := decode(r); err != nil {
			return fmt.Errorf("read request record: %w", err)
		}
		if _, replaced := rs.requests.Insert([]byte(r.ID), r); !replaced {
			s.numRequests++
		}
		rs.requestsByIndex.Insert(indexKey(r.Index), r)
	case recordACLToken:
		tok := new(acl.Token)
		if err := decode(tok); err != nil {
			return fmt.Errorf("read ACL token: %w", err)
		}
		rs.aclTokens.Insert([]byte(tok.AccessorID), tok)
		rs.aclBySecret.Insert(tok.SecretHash, tok)
	case recordACLPolicy:
		p := new(acl.Policy)
		if err := decode(p); err != nil {
			return fmt.Errorf("read ACL policy: %w", err)
		}
		if err := restoreACLPolicy(p); err != nil {
			return fmt.Errorf("read ACL policy: %w", err)
		}
		rs.aclPolicies.Insert([]byte(p.Name), p)
	case recordACLMeta:
		var m aclMeta
		if err := decode(&m); err != nil {
			return fmt.Errorf("read ACL state: %w", err)
		}
		s.acl.bootstrapIndex = m.BootstrapIndex
	case recordWorkloadKey:
		k := new(WorkloadKey)
		if err := decode(k); err != nil {
			return fmt.Errorf("read workload key: %w", err)
		}
		if n := len(s.workloadKeys); n > 0 && s.workloadKeys[n-1].ID >= k.ID {
			return fmt.Errorf("workload key %d follows key %d: keys must be in ID order", k.ID, s.workloadKeys[n-1].ID)
		}
		s.workloadKeys = append(s.workloadKeys, k)
	case recordQueueConfig:
		var c scheduler.QueueConfig
		if err := decode(&c); err != nil {
			return fmt.Errorf("read queue configuration: %w", err)
		}
		if err := wellFormed(&c); err != nil {
			return fmt.Errorf("read queue configuration: %w", err)
		}
		s.setQueues(&c)
	default:
		return fmt.Errorf("%w %d", errUnknownRecord, t)
	}
	return nil
}

// container adds a container; the container tables are built by finish.
func (rs *restorer) container(c *scheduler.Container) {
	rs.containers = append(rs.containers, c)
}

// finish builds the container tables and returns the restored state.
func (rs *restorer) finish() *State {
	s := rs.s
	restoreContainers(s, byIDLastWins(rs.containers))
	s.nodes, s.draining, s.down = rs.nodes.CommitOnly(), rs.draining.CommitOnly(), rs.down.CommitOnly()
	s.apps, s.activeApps, s.finished = rs.apps.CommitOnly(), rs.active.CommitOnly(), rs.finished.CommitOnly()
	s.activeUIDs = rs.activeUIDs.CommitOnly()
	s.requests, s.requestsByIndex = rs.requests.CommitOnly(), rs.requestsByIndex.CommitOnly()
	s.acl.tokens, s.acl.bySecret, s.acl.policies = rs.aclTokens.CommitOnly(), rs.aclBySecret.CommitOnly(), rs.aclPolicies.CommitOnly()
	return s
}

// wellFormed checks what resolving a queue tree relies on: a root and no
// empty queue. No configuration Apply accepted lacks either, so only a
// damaged snapshot fails it. (Apply's full validation is not repeated: a
// rule added since the snapshot was written must not make it unreadable.)
func wellFormed(c *scheduler.QueueConfig) error {
	if c.Root == nil {
		return errors.New("no root queue")
	}
	var walk func(q *scheduler.QueueSpec, path string) error
	walk = func(q *scheduler.QueueSpec, path string) error {
		for _, ch := range q.Children {
			if ch == nil {
				return fmt.Errorf("queue %s has an empty child queue", path)
			}
			if err := walk(ch, path+"."+ch.Name); err != nil {
				return err
			}
		}
		return nil
	}
	return walk(c.Root, c.Root.Name)
}
