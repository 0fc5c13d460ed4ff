package fsm

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"

	iradix "github.com/hashicorp/go-immutable-radix/v2"
	"github.com/hashicorp/go-msgpack/v2/codec"
	"github.com/hashicorp/raft"
	"github.com/weft-sched/weft/acl"
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
	for _, k := range st.workloadKeys {
		if err := record(recordWorkloadKey, k); err != nil {
			return fmt.Errorf("write workload keys: %w", err)
		}
	}
	if err := writeTable(st.nodes, recordNode, record); err != nil {
		return fmt.Errorf("write nodes: %w", err)
	}
	if err := writeTable(st.apps, recordApp, record); err != nil {
		return fmt.Errorf("write apps: %w", err)
	}
	if err := writeTable(st.containers, recordContainer, record); err != nil {
		return fmt.Errorf("write containers: %w", err)
	}
	if err := writeTable(st.requestsByIndex, recordRequest, record); err != nil {
		return fmt.Errorf("write request records: %w", err)
	}
	// Policies before tokens: a token names policies.
	if err := writeTable(st.acl.policies, recordACLPolicy, record); err != nil {
		return fmt.Errorf("write ACL policies: %w", err)
	}
	if err := writeTable(st.acl.tokens, recordACLToken, record); err != nil {
		return fmt.Errorf("write ACL tokens: %w", err)
	}
	if err := record(recordACLMeta, &aclMeta{BootstrapIndex: st.acl.bootstrapIndex}); err != nil {
		return fmt.Errorf("write ACL state: %w", err)
	}
	if err := bw.WriteByte(byte(recordEnd)); err != nil {
		return err
	}
	return bw.Flush()
}

func writeTable[T any](tree *iradix.Tree[T], t recordType, record func(recordType, any) error) error {
	it := tree.Root().Iterator()
	for _, v, ok := it.Next(); ok; _, v, ok = it.Next() {
		if err := record(t, v); err != nil {
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
	nodes, apps, active := s.nodes.Txn(), s.apps.Txn(), s.activeApps.Txn()
	containers, byApp, live := s.containers.Txn(), s.byApp.Txn(), s.liveByNode.Txn()
	byAppChange := s.byAppChange.Txn()
	marked, unstarted := s.marked.Txn(), s.unstarted.Txn()
	draining, down, finished := s.draining.Txn(), s.down.Txn(), s.finished.Txn()
	requests, requestsByIndex := s.requests.Txn(), s.requestsByIndex.Txn()
	aclTokens, aclBySecret, aclPolicies := s.acl.tokens.Txn(), s.acl.bySecret.Txn(), s.acl.policies.Txn()
	// Containers are indexed once all are read (restore_index.go), so
	// that each secondary index is built in key order.
	var read []*scheduler.Container
	duplicates := false
	for {
		b, err := br.ReadByte()
		if err != nil {
			return nil, fmt.Errorf("snapshot ends without an end record: %w", err)
		}
		switch t := recordType(b); t {
		case recordEnd:
			if duplicates {
				read = lastOfEach(containers, read)
			}
			indexContainers(read, byApp, byAppChange, live, marked, unstarted)
			s.nodes, s.apps, s.activeApps = nodes.CommitOnly(), apps.CommitOnly(), active.CommitOnly()
			s.containers, s.byApp, s.liveByNode = containers.CommitOnly(), byApp.CommitOnly(), live.CommitOnly()
			s.byAppChange = byAppChange.CommitOnly()
			s.marked, s.unstarted = marked.CommitOnly(), unstarted.CommitOnly()
			s.draining, s.down, s.finished = draining.CommitOnly(), down.CommitOnly(), finished.CommitOnly()
			s.requests, s.requestsByIndex = requests.CommitOnly(), requestsByIndex.CommitOnly()
			s.acl.tokens, s.acl.bySecret, s.acl.policies = aclTokens.CommitOnly(), aclBySecret.CommitOnly(), aclPolicies.CommitOnly()
			return s, nil
		case recordNode:
			n := new(scheduler.Node)
			if err := dec.Decode(n); err != nil {
				return nil, fmt.Errorf("read node: %w", err)
			}
			if old, replaced := nodes.Insert([]byte(n.ID), n); replaced {
				if k := downKey(old); k != nil {
					down.Delete(k)
				}
				draining.Delete([]byte(old.ID))
			}
			if k := drainingKey(n); k != nil {
				draining.Insert(k, n)
			}
			if k := downKey(n); k != nil {
				down.Insert(k, n)
			}
		case recordApp:
			a := new(scheduler.App)
			if err := dec.Decode(a); err != nil {
				return nil, fmt.Errorf("read app: %w", err)
			}
			if old, replaced := apps.Insert([]byte(a.ID), a); replaced {
				// A damaged snapshot holds an app twice: the last one wins.
				active.Delete(indexKey(old.CreateIndex))
				if _, ok := finished.Delete(finishedKey(old)); ok {
					s.numFinished--
				}
			}
			if !a.State.Terminal() {
				active.Insert(indexKey(a.CreateIndex), a)
			} else if _, replaced := finished.Insert(finishedKey(a), a); !replaced {
				s.numFinished++
			}
		case recordContainer:
			c := new(scheduler.Container)
			if err := dec.Decode(c); err != nil {
				return nil, fmt.Errorf("read container: %w", err)
			}
			if _, replaced := containers.Insert([]byte(c.ID), c); replaced {
				duplicates = true
			}
			read = append(read, c)
		case recordRequest:
			r := new(RequestRecord)
			if err := dec.Decode(r); err != nil {
				return nil, fmt.Errorf("read request record: %w", err)
			}
			if _, replaced := requests.Insert([]byte(r.ID), r); !replaced {
				s.numRequests++
			}
			requestsByIndex.Insert(indexKey(r.Index), r)
		case recordACLToken:
			tok := new(acl.Token)
			if err := dec.Decode(tok); err != nil {
				return nil, fmt.Errorf("read ACL token: %w", err)
			}
			aclTokens.Insert([]byte(tok.AccessorID), tok)
			aclBySecret.Insert(tok.SecretHash, tok)
		case recordACLPolicy:
			p := new(acl.Policy)
			if err := dec.Decode(p); err != nil {
				return nil, fmt.Errorf("read ACL policy: %w", err)
			}
			if err := restoreACLPolicy(p); err != nil {
				return nil, fmt.Errorf("read ACL policy: %w", err)
			}
			aclPolicies.Insert([]byte(p.Name), p)
		case recordACLMeta:
			var m aclMeta
			if err := dec.Decode(&m); err != nil {
				return nil, fmt.Errorf("read ACL state: %w", err)
			}
			s.acl.bootstrapIndex = m.BootstrapIndex
		case recordWorkloadKey:
			k := new(WorkloadKey)
			if err := dec.Decode(k); err != nil {
				return nil, fmt.Errorf("read workload key: %w", err)
			}
			if n := len(s.workloadKeys); n > 0 && s.workloadKeys[n-1].ID >= k.ID {
				return nil, fmt.Errorf("workload key %d follows key %d: keys must be in ID order", k.ID, s.workloadKeys[n-1].ID)
			}
			s.workloadKeys = append(s.workloadKeys, k)
		case recordQueueConfig:
			var c scheduler.QueueConfig
			if err := dec.Decode(&c); err != nil {
				return nil, fmt.Errorf("read queue configuration: %w", err)
			}
			if err := wellFormed(&c); err != nil {
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
