package gossip

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"

	"github.com/hashicorp/go-msgpack/v2/codec"
)

// Message types of memberlist's wire protocol (memberlist net.go; its
// protocol, so they never change) that the guard must recognise.
const (
	mlPushPullMsg = 6
	mlCompoundMsg = 7
	mlUserMsg     = 8
	mlCompressMsg = 9
	mlEncryptMsg  = 10
	mlHasCrcMsg   = 12
	mlHasLabelMsg = 244
)

// Bounds on what one plaintext gossip stream may declare. memberlist
// allocates for a push/pull's node count and user-state length, and for a
// user message's length, as soon as it has decoded the header, before it
// has read a byte of what the header announces; these keep that allocation
// small. They are far above what a real pool sends: a push/pull carries one
// entry per member and serf's state of a few dozen bytes per member.
const (
	// MaxPushPullNodes bounds the members one push/pull may carry
	// (memberlist v0.6 allows 2^20).
	MaxPushPullNodes = 1 << 16
	// MaxPushPullUserState bounds the serf state one push/pull may carry
	// (memberlist v0.6 allows 20 MiB).
	MaxPushPullUserState = 8 << 20
	// MaxStreamUserMsg bounds a user message sent over a stream. serf never
	// sends one; memberlist v0.6 does not bound it at all.
	MaxStreamUserMsg = 64 << 10
	// MaxEncryptedStream bounds the ciphertext of an encrypted stream: as
	// much as the largest plaintext push/pull above (memberlist allows
	// 20 MiB).
	MaxEncryptedStream = MaxPushPullNodes*nodeSlotCost + MaxPushPullUserState
)

// nodeSlotCost is what memberlist allocates per node a push/pull header
// declares (one pushNodeState, 112 bytes on 64-bit platforms, rounded up).
const nodeSlotCost = 128

// maxHeaderBytes bounds how much of a stream the guard reads to decode a
// push/pull or user-message header (a few dozen bytes in practice).
const maxHeaderBytes = 4096

// maxCompoundDepth bounds how deeply compound packets may nest; memberlist
// never nests them.
const maxCompoundDepth = 4

// refusal is the guard's verdict against a message, as opposed to a
// failure to read one (a timeout, a reset, a malformed header), which
// memberlist would have met as well.
type refusal struct{ error }

func refuse(format string, a ...any) error { return refusal{fmt.Errorf(format, a...)} }

// isRefusal reports whether err is the guard's verdict.
func isRefusal(err error) bool {
	var r refusal
	return errors.As(err, &r)
}

var (
	errCompressed  = refuse("compressed gossip message refused: weft members never compress, and what one decompresses to is unbounded")
	errUnencrypted = refuse("unencrypted gossip stream refused: this member has a gossip key")
)

// pushPullHeader and userMsgHeader mirror memberlist's headers, field for
// field: decoded with the same codec and handle, they read exactly what
// memberlist will read.
type pushPullHeader struct {
	Nodes        int
	UserStateLen int
	Join         bool
}

type userMsgHeader struct {
	UserMsgLen int
}

// inspectStream reads the head of a stream's first message from r and
// decides whether memberlist may read it. It returns how many bytes
// memberlist will allocate on the header's word alone (before reading what
// the header announces), or an error: a refusal saying why the stream is
// refused, or the failure to read its head.
//
// With encrypted set, only an encrypted message passes, its ciphertext no
// longer than MaxEncryptedStream: memberlist buffers it whole, then
// authenticates it before decoding anything (and refuses anything else
// itself). Without, the message is plaintext and anyone may have sent it: a
// compressed message is refused, and a push/pull or user-message header
// must declare no more than the bounds above.
func inspectStream(r io.Reader, encrypted bool) (cost int64, err error) {
	t, err := readByte(r)
	if err != nil {
		return 0, err
	}
	if t == mlHasLabelMsg {
		n, err := readByte(r)
		if err != nil {
			return 0, err
		}
		if _, err := io.CopyN(io.Discard, r, int64(n)); err != nil {
			return 0, err
		}
		if t, err = readByte(r); err != nil {
			return 0, err
		}
	}
	if encrypted {
		if t != mlEncryptMsg {
			return 0, errUnencrypted
		}
		// memberlist buffers the whole ciphertext, up to what its length
		// word declares, before it can authenticate any of it.
		var n [4]byte
		if _, err := io.ReadFull(r, n[:]); err != nil {
			return 0, err
		}
		l := int64(binary.BigEndian.Uint32(n[:]))
		if l > MaxEncryptedStream {
			return 0, refuse("encrypted stream declares %d bytes; at most %d are accepted", l, MaxEncryptedStream)
		}
		return l, nil
	}
	switch t {
	case mlCompressMsg:
		return 0, errCompressed
	case mlPushPullMsg:
		var h pushPullHeader
		if err := decodeHeader(r, &h); err != nil {
			return 0, fmt.Errorf("push/pull header: %w", err)
		}
		if h.Nodes < 0 || h.Nodes > MaxPushPullNodes {
			return 0, refuse("push/pull header declares %d members; at most %d are accepted", h.Nodes, MaxPushPullNodes)
		}
		if h.UserStateLen < 0 || h.UserStateLen > MaxPushPullUserState {
			return 0, refuse("push/pull header declares %d bytes of state; at most %d are accepted", h.UserStateLen, MaxPushPullUserState)
		}
		return int64(h.Nodes)*nodeSlotCost + int64(h.UserStateLen), nil
	case mlUserMsg:
		var h userMsgHeader
		if err := decodeHeader(r, &h); err != nil {
			return 0, fmt.Errorf("user message header: %w", err)
		}
		if h.UserMsgLen < 0 || h.UserMsgLen > MaxStreamUserMsg {
			return 0, refuse("user message header declares %d bytes; at most %d are accepted", h.UserMsgLen, MaxStreamUserMsg)
		}
		return int64(h.UserMsgLen), nil
	}
	// Anything else (a ping over TCP, an error reply, a type memberlist
	// does not know) is decoded by memberlist with allocations bounded by
	// the bytes that arrive.
	return 0, nil
}

func readByte(r io.Reader) (byte, error) {
	var b [1]byte
	if _, err := io.ReadFull(r, b[:]); err != nil {
		return 0, err
	}
	return b[0], nil
}

// decodeHeader decodes one msgpack value from r with memberlist's handle,
// reading at most maxHeaderBytes. The decoder reads no further than the
// value's last byte, so a stream whose sender waits for an answer after a
// short message is not left waiting here.
func decodeHeader(r io.Reader, out any) error {
	var h codec.MsgpackHandle
	return codec.NewDecoder(io.LimitReader(r, maxHeaderBytes), &h).Decode(out)
}

// inspectPacket decides whether memberlist may handle a gossip packet (one
// UDP datagram). With encrypted set every packet passes: memberlist
// decrypts and authenticates it before decoding anything, and drops it if
// that fails. Without, a packet that holds a compressed message anywhere is
// refused; everything else memberlist decodes from the datagram itself,
// which bounds it.
func inspectPacket(buf []byte, encrypted bool) error {
	if len(buf) > 0 && buf[0] == mlHasLabelMsg {
		if len(buf) < 2 || len(buf) < 2+int(buf[1]) {
			return refuse("truncated label header")
		}
		buf = buf[2+int(buf[1]):]
	}
	if encrypted {
		return nil
	}
	if len(buf) >= 5 && buf[0] == mlHasCrcMsg {
		buf = buf[5:]
	}
	return inspectCommand(buf, 0)
}

// inspectCommand looks at one message of a packet, and at each part of a
// compound message, as memberlist's handleCommand will.
func inspectCommand(buf []byte, depth int) error {
	if len(buf) == 0 {
		return nil // memberlist drops it
	}
	switch buf[0] {
	case mlCompressMsg:
		return errCompressed
	case mlCompoundMsg:
		if depth >= maxCompoundDepth {
			return refuse("compound messages nested more than %d deep", maxCompoundDepth)
		}
		buf = buf[1:]
		if len(buf) < 1 {
			return nil
		}
		n := int(buf[0])
		buf = buf[1:]
		if len(buf) < 2*n {
			return nil // memberlist drops a truncated length table
		}
		lengths := buf[:2*n]
		buf = buf[2*n:]
		for i := 0; i < n; i++ {
			l := int(lengths[2*i])<<8 | int(lengths[2*i+1])
			if len(buf) < l {
				return nil // memberlist handles the parts before a truncated one, as we did
			}
			if err := inspectCommand(buf[:l], depth+1); err != nil {
				return err
			}
			buf = buf[l:]
		}
	}
	return nil
}
