package fsm

import (
	"bytes"
	"fmt"

	"github.com/hashicorp/go-msgpack/v2/codec"
	"github.com/weft-sched/weft/scheduler"
)

// MessageType is the leading byte of every Raft command.
type MessageType uint8

// Command types. Values are part of the on-disk log format: never reuse or
// renumber one.
const (
	QueueConfigApplyType MessageType = 1
)

// IgnoreUnknownTypeFlag marks a command that a server which does not know
// its type may skip, so that newer servers can add optional commands during
// a rolling upgrade.
const IgnoreUnknownTypeFlag MessageType = 0x80

// QueueConfigApplyRequest replaces the queue configuration atomically.
type QueueConfigApplyRequest struct {
	Config *scheduler.QueueConfig `codec:"config"`
	// Now is the leader's clock when it proposed the command, in Unix
	// nanoseconds; Apply uses it instead of reading a clock.
	Now int64 `codec:"now"`
}

// msgpackHandle is the codec for commands and snapshot records.
var msgpackHandle = func() *codec.MsgpackHandle {
	h := &codec.MsgpackHandle{}
	h.RawToString = true
	h.WriteExt = true
	return h
}()

// Encode builds a Raft command: the type byte, then body as msgpack.
func Encode(t MessageType, body any) ([]byte, error) {
	var buf bytes.Buffer
	buf.WriteByte(byte(t))
	if err := codec.NewEncoder(&buf, msgpackHandle).Encode(body); err != nil {
		return nil, fmt.Errorf("encode command %d: %w", t, err)
	}
	return buf.Bytes(), nil
}

func decode(buf []byte, out any) error {
	return codec.NewDecoderBytes(buf, msgpackHandle).Decode(out)
}
