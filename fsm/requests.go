package fsm

import (
	"time"
)

// Request IDs are remembered for RequestWindow of leader time after their
// write was applied, and at most MaxRequestRecords of them: a client's
// retry comes within seconds or minutes. Both bounds are read off the log
// (the envelope's Now and the count), so every server forgets alike.
const (
	RequestWindow     = 15 * time.Minute
	MaxRequestRecords = 100_000
)

// maxRequestRecords is MaxRequestRecords; tests lower it.
var maxRequestRecords = MaxRequestRecords

// RequestEnvelope carries a client's write with its request ID (SPEC §4):
// the first entry with an ID is applied and its answer recorded; a later
// one with the same ID (a retry) is not applied again and gets the first
// answer.
type RequestEnvelope struct {
	ID string `codec:"id"`
	// Now is the leader's clock at proposal (Unix ns); records older than
	// RequestWindow by it are forgotten.
	Now int64 `codec:"now"`
	// Type and Body are the command carried.
	Type MessageType `codec:"type"`
	Body []byte      `codec:"body"`
}

// Result kinds of a request record.
const (
	resultNil    uint8 = 0
	resultError  uint8 = 1
	resultString uint8 = 2
	resultUint   uint8 = 3
	resultOther  uint8 = 4 // a value a retry cannot be given again
)

// RequestRecord is what the FSM remembers of one applied request: where it
// was applied and what it answered.
type RequestRecord struct {
	ID      string `codec:"id"`
	Index   uint64 `codec:"index"`
	At      int64  `codec:"at"`
	Kind    uint8  `codec:"kind"`
	ErrKind uint8  `codec:"err_kind"`
	Err     string `codec:"err"`
	Str     string `codec:"str"`
	Num     uint64 `codec:"num"`
}

// EncodeRequest builds a Raft command that carries body (a command of type
// t) under a client's request ID.
func EncodeRequest(id string, now int64, t MessageType, body any) ([]byte, error) {
	inner, err := Encode(t, body)
	if err != nil {
		return nil, err
	}
	return Encode(RequestType, &RequestEnvelope{ID: id, Now: now, Type: t, Body: inner[1:]})
}

// Request returns the record of a request ID, if it is remembered.
func (s *State) Request(id string) (*RequestRecord, bool) { return s.requests.Get([]byte(id)) }

// NumRequests returns how many request IDs are remembered.
func (s *State) NumRequests() int { return s.numRequests }

// recordResult turns an answer into a record.
func recordResult(r *RequestRecord, res any) {
	switch v := res.(type) {
	case nil:
		r.Kind = resultNil
	case *Rejection:
		r.Kind, r.ErrKind, r.Err = resultError, kindCode(v.Kind), v.Msg
	case error:
		r.Kind, r.Err = resultError, v.Error()
	case string:
		r.Kind, r.Str = resultString, v
	case uint64:
		r.Kind, r.Num = resultUint, v
	default:
		r.Kind = resultOther
	}
}

// Replay is what a retried request gets: the answer of its first
// application, and the Raft index at which that was applied.
type Replay struct {
	Index  uint64
	Result any
}

// result is the recorded answer, as the first application returned it.
func (r *RequestRecord) result() any {
	switch r.Kind {
	case resultError:
		return &Rejection{Kind: kindOf(r.ErrKind), Msg: r.Err}
	case resultString:
		return r.Str
	case resultUint:
		return r.Num
	case resultOther:
		return reject(ErrConflict, "request %s was already applied at index %d", r.ID, r.Index)
	}
	return nil
}

// applyRequest applies an enveloped command once per request ID; inner
// applies the command it carries (nil when the envelope is malformed).
func (f *FSM) applyRequest(t *txn, index uint64, env *RequestEnvelope, inner func(*txn) any) any {
	t.expireRequests(env.Now)
	if rec, ok := t.request(env.ID); ok {
		return &Replay{Index: rec.Index, Result: rec.result()}
	}
	if env.ID == "" || env.Type == RequestType {
		return reject(ErrInvalid, "malformed request envelope")
	}
	res := inner(t)
	rec := &RequestRecord{ID: env.ID, Index: index, At: env.Now}
	recordResult(rec, res)
	t.putRequest(rec)
	return res
}

func (t *txn) request(id string) (*RequestRecord, bool) {
	if t.requests != nil {
		return t.requests.Get([]byte(id))
	}
	return t.next.requests.Get([]byte(id))
}

func (t *txn) putRequest(r *RequestRecord) {
	if _, replaced := lazy(&t.requests, t.next.requests).Insert([]byte(r.ID), r); !replaced {
		t.next.numRequests++
	}
	lazy(&t.requestsByIndex, t.next.requestsByIndex).Insert(indexKey(r.Index), r)
}

// expireRequests forgets the oldest records: those older than
// RequestWindow before now, and any beyond MaxRequestRecords - 1 (room is
// made for the one being applied).
func (t *txn) expireRequests(now int64) {
	root := t.next.requestsByIndex.Root()
	if t.requestsByIndex != nil {
		root = t.requestsByIndex.Root()
	}
	cutoff := now - int64(RequestWindow)
	var drop []*RequestRecord
	it := root.Iterator()
	for _, r, ok := it.Next(); ok; _, r, ok = it.Next() {
		if r.At >= cutoff && t.next.numRequests-len(drop) < maxRequestRecords {
			break
		}
		drop = append(drop, r)
	}
	for _, r := range drop {
		lazy(&t.requests, t.next.requests).Delete([]byte(r.ID))
		lazy(&t.requestsByIndex, t.next.requestsByIndex).Delete(indexKey(r.Index))
	}
	t.next.numRequests -= len(drop)
}
