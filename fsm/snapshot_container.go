package fsm

import (
	"encoding/binary"
	"errors"
	"fmt"
	"maps"
	"slices"

	"github.com/weft-sched/weft/scheduler"
)

// A container record of snapshot format 2 is written field by field in
// this fixed order, without field names and without reflection: a
// million of them are most of a large snapshot (format 1 spent ~3 s of
// CPU decoding them by reflection, and wrote 350 bytes a container).
//
//	string ID, AppID, NodeID   uvarint length, then the bytes
//	varint Attempt             zigzag
//	uvarint AskID
//	varint MemoryMB, Vcores    then uvarint count, then count (string name, varint amount) in name order
//	string ExecutionType, State
//	byte flags                 containerFlag*; other bits must be 0
//	varint PreemptKillAt; string PreemptFor, PreemptReason, KillReason
//	varint ExitCode            only if containerHasExitCode
//	string Reason, Diagnostics
//	varint AllocatedAt, StartedAt, FinishedAt
//	uvarint CreateIndex, ModifyIndex
//
// The record's length frames it, and the decoder must use exactly that
// many bytes. A field added to scheduler.Container needs a place here
// (TestContainerCodecCoversEveryField fails until it has one) and a new
// snapshot format version.
const (
	containerIsAM byte = 1 << iota
	containerDistributed
	containerPromoted
	containerKillRequested
	containerHasExitCode
	containerKnownFlags = containerIsAM | containerDistributed | containerPromoted | containerKillRequested | containerHasExitCode
)

// appendContainer appends c's format 2 record body to b.
func appendContainer(b []byte, c *scheduler.Container) []byte {
	b = appendString(b, c.ID)
	b = appendString(b, c.AppID)
	b = appendString(b, c.NodeID)
	b = binary.AppendVarint(b, int64(c.Attempt))
	b = binary.AppendUvarint(b, c.AskID)
	b = binary.AppendVarint(b, c.Resources.MemoryMB)
	b = binary.AppendVarint(b, c.Resources.Vcores)
	b = binary.AppendUvarint(b, uint64(len(c.Resources.Extended)))
	if len(c.Resources.Extended) > 0 {
		for _, name := range slices.Sorted(maps.Keys(c.Resources.Extended)) {
			b = appendString(b, name)
			b = binary.AppendVarint(b, c.Resources.Extended[name])
		}
	}
	b = appendString(b, string(c.ExecutionType))
	b = appendString(b, string(c.State))
	var flags byte
	if c.IsAM {
		flags |= containerIsAM
	}
	if c.Distributed {
		flags |= containerDistributed
	}
	if c.Promoted {
		flags |= containerPromoted
	}
	if c.KillRequested {
		flags |= containerKillRequested
	}
	if c.ExitCode != nil {
		flags |= containerHasExitCode
	}
	b = append(b, flags)
	b = binary.AppendVarint(b, c.PreemptKillAt)
	b = appendString(b, c.PreemptFor)
	b = appendString(b, c.PreemptReason)
	b = appendString(b, string(c.KillReason))
	if c.ExitCode != nil {
		b = binary.AppendVarint(b, int64(*c.ExitCode))
	}
	b = appendString(b, string(c.Reason))
	b = appendString(b, c.Diagnostics)
	b = binary.AppendVarint(b, c.AllocatedAt)
	b = binary.AppendVarint(b, c.StartedAt)
	b = binary.AppendVarint(b, c.FinishedAt)
	b = binary.AppendUvarint(b, c.CreateIndex)
	return binary.AppendUvarint(b, c.ModifyIndex)
}

func appendString(b []byte, s string) []byte {
	b = binary.AppendUvarint(b, uint64(len(s)))
	return append(b, s...)
}

var errContainerRecord = errors.New("malformed container record")

// recordReader reads the fields of one record body. Its first error
// sticks: later reads return zero values, and err says what went wrong.
// Every length is checked against the bytes left, so a record can never
// make it allocate more than the record holds.
type recordReader struct {
	b      []byte
	err    error
	intern *interner
}

func (r *recordReader) fail(what string) {
	if r.err == nil {
		r.err = fmt.Errorf("%w: bad %s", errContainerRecord, what)
	}
	r.b = nil
}

func (r *recordReader) uvarint(what string) uint64 {
	v, n := binary.Uvarint(r.b)
	if n <= 0 {
		r.fail(what)
		return 0
	}
	r.b = r.b[n:]
	return v
}

func (r *recordReader) varint(what string) int64 {
	v, n := binary.Varint(r.b)
	if n <= 0 {
		r.fail(what)
		return 0
	}
	r.b = r.b[n:]
	return v
}

func (r *recordReader) int(what string) int {
	v := r.varint(what)
	if int64(int(v)) != v {
		r.fail(what)
		return 0
	}
	return int(v)
}

func (r *recordReader) byte(what string) byte {
	if len(r.b) == 0 {
		r.fail(what)
		return 0
	}
	v := r.b[0]
	r.b = r.b[1:]
	return v
}

func (r *recordReader) bytes(what string) []byte {
	n := r.uvarint(what)
	if n > uint64(len(r.b)) {
		r.fail(what)
		return nil
	}
	v := r.b[:n]
	r.b = r.b[n:]
	return v
}

// string reads a string that is its own copy.
func (r *recordReader) string(what string) string { return string(r.bytes(what)) }

// shared reads a string that many records repeat (an app or node ID, a
// state), shared between them rather than copied for each.
func (r *recordReader) shared(what string) string { return r.intern.string(r.bytes(what)) }

// decodeContainer decodes a format 2 container record body.
func decodeContainer(body []byte, in *interner) (*scheduler.Container, error) {
	r := recordReader{b: body, intern: in}
	c := &scheduler.Container{
		ID:      r.string("id"),
		AppID:   r.shared("app_id"),
		NodeID:  r.shared("node_id"),
		Attempt: r.int("attempt"),
		AskID:   r.uvarint("ask_id"),
	}
	c.Resources.MemoryMB = r.varint("memory")
	c.Resources.Vcores = r.varint("vcores")
	if n := r.uvarint("extended resources"); n > 0 {
		// Each entry takes at least two bytes: n beyond that is a lie.
		if n > uint64(len(r.b)/2) {
			r.fail("extended resources")
		} else {
			c.Resources.Extended = make(map[string]int64, n)
			last := ""
			for i := uint64(0); i < n && r.err == nil; i++ {
				name := r.shared("extended resource name")
				if i > 0 && name <= last {
					r.fail("extended resource order")
				}
				c.Resources.Extended[name] = r.varint("extended resource")
				last = name
			}
		}
	}
	c.ExecutionType = scheduler.ExecutionType(r.shared("execution_type"))
	c.State = scheduler.ContainerState(r.shared("state"))
	flags := r.byte("flags")
	if flags&^containerKnownFlags != 0 {
		r.fail("flags")
	}
	c.IsAM = flags&containerIsAM != 0
	c.Distributed = flags&containerDistributed != 0
	c.Promoted = flags&containerPromoted != 0
	c.KillRequested = flags&containerKillRequested != 0
	c.PreemptKillAt = r.varint("preempt_kill_at")
	c.PreemptFor = r.shared("preempt_for")
	c.PreemptReason = r.shared("preempt_reason")
	c.KillReason = scheduler.ExitReason(r.shared("kill_reason"))
	if flags&containerHasExitCode != 0 {
		code := r.int("exit_code")
		c.ExitCode = &code
	}
	c.Reason = scheduler.ExitReason(r.shared("reason"))
	c.Diagnostics = r.string("diagnostics")
	c.AllocatedAt = r.varint("allocated_at")
	c.StartedAt = r.varint("started_at")
	c.FinishedAt = r.varint("finished_at")
	c.CreateIndex = r.uvarint("create_index")
	c.ModifyIndex = r.uvarint("modify_index")
	if r.err != nil {
		return nil, r.err
	}
	if len(r.b) != 0 {
		return nil, fmt.Errorf("%w: %d bytes after the last field", errContainerRecord, len(r.b))
	}
	return c, nil
}

// interner hands out one string for each distinct value it is asked for,
// so that a million containers share their app and node IDs and states
// instead of each holding a copy. It stops remembering new values past
// maxInterned (a snapshot's strings are then just copied).
type interner struct{ m map[string]string }

const maxInterned = 1 << 16

func (in *interner) string(b []byte) string {
	if len(b) == 0 {
		return ""
	}
	if s, ok := in.m[string(b)]; ok {
		return s
	}
	s := string(b)
	if in.m == nil {
		in.m = make(map[string]string)
	}
	if len(in.m) < maxInterned {
		in.m[s] = s
	}
	return s
}
