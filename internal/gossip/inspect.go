package gossip

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/hashicorp/go-msgpack/v2/codec"
	"github.com/hashicorp/memberlist"
)

// Message types of memberlist's wire protocol (memberlist net.go) and of
// serf's messages inside memberlist user messages (serf messages.go): their
// protocols, so they never change.
const (
	mlAliveMsg    = 4
	mlPushPullMsg = 6
	mlCompoundMsg = 7
	mlUserMsg     = 8
	mlCompressMsg = 9
	mlEncryptMsg  = 10
	mlHasCrcMsg   = 12
	mlHasLabelMsg = 244

	serfQueryMsg        = 4
	serfInternalQueries = "_serf_"
)

// serfKeyQueries are serf's internal queries that list and change every
// member's gossip keyring. Any holder of a gossip key could send them, and
// every member would install, use or remove the key it names (and a key
// installed so is gossiped to every holder of the old one, so a leaked key
// could never be rotated out). weft members never send them: the servers
// change each member's keyring over mutual TLS for a caller with
// operator:write (Keyring.Apply). So they are refused wherever they
// arrive, encrypted or not.
var serfKeyQueries = map[string]bool{
	serfInternalQueries + "install-key": true,
	serfInternalQueries + "use-key":     true,
	serfInternalQueries + "remove-key":  true,
	serfInternalQueries + "list-keys":   true,
}

// Bounds on what one gossip stream may declare. memberlist allocates for a
// push/pull's member count and state length, for a user message's length
// and for an encrypted stream's length as soon as it has decoded them. They
// are far above what a real pool sends (a push/pull carries one entry of a
// few hundred bytes per member, and serf's state of a few dozen bytes per
// member), and the budget (guard.go) lets a push/pull of a pool of about
// 30,000 members through.
const (
	// MaxPushPullNodes bounds the members one push/pull may carry
	// (memberlist v0.6 allows 2^20).
	MaxPushPullNodes = 1 << 15
	// MaxPushPullUserState bounds the serf state one push/pull may carry
	// (memberlist v0.6 allows 20 MiB).
	MaxPushPullUserState = 4 << 20
	// MaxStreamUserMsg bounds a user message sent over a stream. serf never
	// sends one; memberlist v0.6 does not bound it at all.
	MaxStreamUserMsg = 64 << 10
	// MaxEncryptedStream bounds an encrypted stream's ciphertext
	// (memberlist allows 20 MiB).
	MaxEncryptedStream = 8 << 20
)

// nodeSlotCost is what memberlist allocates per member a push/pull declares
// (one pushNodeState, 112 bytes on 64-bit platforms, rounded up).
const nodeSlotCost = 128

// maxHeaderBytes bounds how much of a stream the guard reads to decode a
// push/pull or user-message header (a few dozen bytes in practice).
const maxHeaderBytes = 4096

// maxCompoundDepth bounds how deeply compound packets may nest; memberlist
// never nests them.
const maxCompoundDepth = 4

// refusal is the guard's verdict against a message, as opposed to a
// failure to read one (a timeout, a reset), which memberlist would have met
// as well.
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

// The messages below mirror memberlist's and serf's, field for field where
// the guard reads a field: decoded with the same codec and handle, they
// read exactly what memberlist and serf will read.

type pushPullHeader struct {
	Nodes        int
	UserStateLen int
	Join         bool
}

type pushNodeState struct {
	Name        string
	Addr        []byte
	Port        uint16
	Meta        []byte
	Incarnation uint32
	State       int
	Vsn         []uint8
}

type userMsgHeader struct {
	UserMsgLen int
}

type alive struct {
	Incarnation uint32
	Node        string
	Addr        []byte
	Port        uint16
	Meta        []byte
	Vsn         []uint8
}

type serfQuery struct {
	Filters [][]byte
	Name    string
	Payload []byte
}

// vsnLen is how many protocol versions memberlist sends with each member
// (pmin, pmax, pcur, dmin, dmax, dcur), and indexes without checking when a
// message carries any.
const vsnLen = 6

// inspectStream reads the first message of a stream from r and decides
// whether memberlist may read it. It reads the whole message for every
// type memberlist would allocate for on the word of a header, or whose
// content memberlist or serf trust, so memberlist only ever gets a message
// that has fully arrived and passed. It returns what memberlist will
// allocate for the message beyond a copy of the bytes read, or an error: a
// refusal saying why, or the failure to read.
//
// With encrypted set, only an encrypted message passes, no longer than
// MaxEncryptedStream: memberlist authenticates it before decoding anything.
// Without, the message is plaintext and anyone may have sent it: a
// compressed message is refused, push/pull and user-message headers must
// declare no more than the bounds above, every member a push/pull carries
// must carry its protocol versions, and a serf query must be one serf can
// handle.
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
		var n [4]byte
		if _, err := io.ReadFull(r, n[:]); err != nil {
			return 0, err
		}
		l := int64(binary.BigEndian.Uint32(n[:]))
		if l > MaxEncryptedStream {
			return 0, refuse("encrypted stream declares %d bytes; at most %d are accepted", l, MaxEncryptedStream)
		}
		if _, err := io.CopyN(io.Discard, r, l); err != nil {
			return 0, err
		}
		return l, nil // the plaintext
	}
	switch t {
	case mlCompressMsg:
		return 0, errCompressed
	case mlPushPullMsg:
		return inspectPushPull(r)
	case mlUserMsg:
		var h userMsgHeader
		if err := decodeHeader(r, &h); err != nil {
			return 0, fmt.Errorf("user message header: %w", err)
		}
		if h.UserMsgLen < 0 || h.UserMsgLen > MaxStreamUserMsg {
			return 0, refuse("user message header declares %d bytes; at most %d are accepted", h.UserMsgLen, MaxStreamUserMsg)
		}
		body := make([]byte, h.UserMsgLen)
		if _, err := io.ReadFull(r, body); err != nil {
			return 0, err
		}
		return 0, inspectSerf(body)
	}
	// Anything else (a ping over TCP, an error reply, a type memberlist
	// does not know) memberlist decodes with allocations bounded by the
	// bytes that arrive, and trusts nothing in it.
	return 0, nil
}

// inspectPushPull reads a push/pull after its type byte: the header, every
// member, and serf's state.
func inspectPushPull(r io.Reader) (int64, error) {
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
	var mh codec.MsgpackHandle
	dec := codec.NewDecoder(r, &mh)
	for i := 0; i < h.Nodes; i++ {
		var n pushNodeState
		if err := dec.Decode(&n); err != nil {
			return 0, fmt.Errorf("push/pull member %d: %w", i+1, err)
		}
		// memberlist indexes up to six versions of a member that carries
		// any (and all six of every member of a join, with a merge
		// delegate) without checking; it always sends six.
		if len(n.Vsn) < vsnLen {
			return 0, refuse("push/pull member %q carries %d protocol versions, not %d", n.Name, len(n.Vsn), vsnLen)
		}
	}
	if _, err := io.CopyN(io.Discard, r, int64(h.UserStateLen)); err != nil {
		return 0, err
	}
	return int64(h.Nodes) * nodeSlotCost, nil
}

// inspectSerf checks a serf message (a memberlist user message's body):
// serf indexes a query's filters and an internal query's payload without
// checking them, and its key queries are nobody's to send.
func inspectSerf(buf []byte) error {
	if len(buf) == 0 || buf[0] != serfQueryMsg {
		return nil
	}
	var q serfQuery
	if err := decodeBytes(buf[1:], &q); err != nil {
		return refuse("serf query: %v", err)
	}
	for _, f := range q.Filters {
		if len(f) == 0 {
			return refuse("serf query %q has an empty filter", q.Name)
		}
	}
	if serfKeyQueries[q.Name] {
		return refuse("serf key query %q refused: gossip keys change only through the servers' keyring methods ('weft operator gossip keyring', operator:write)", q.Name)
	}
	if strings.HasPrefix(q.Name, serfInternalQueries) && len(q.Payload) == 0 {
		return refuse("serf internal query %q has no payload", q.Name)
	}
	return nil
}

// inspectSealed inspects an encrypted stream's first message, given whole
// as it arrived (label header, type, length, ciphertext): the plaintext a
// key of the keyring opens is inspected as a plaintext stream's message
// is. It returns what memberlist will allocate to decode the plaintext. A
// message no key opens passes: memberlist refuses it itself.
func inspectSealed(msg []byte, keys *memberlist.Keyring) (int64, error) {
	var label []byte
	if len(msg) >= 2 && msg[0] == mlHasLabelMsg {
		n := int(msg[1])
		if len(msg) < 2+n {
			return 0, nil
		}
		label, msg = msg[2:2+n], msg[2+n:]
	}
	const header = 5 // the type byte and the ciphertext's length
	if len(msg) < header {
		return 0, nil
	}
	ad := append(append([]byte(nil), msg[:header]...), label...)
	plain, err := openMessage(keys, msg[header:], ad)
	if err != nil {
		return 0, nil
	}
	return inspectStream(bytes.NewReader(plain), false)
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

func decodeBytes(b []byte, out any) error {
	var h codec.MsgpackHandle
	return codec.NewDecoder(bytes.NewReader(b), &h).Decode(out)
}

// inspectPacket decides whether memberlist may handle a gossip packet (one
// UDP datagram). A packet is refused if it holds anywhere a compressed
// message, an alive message with too few protocol versions, or a serf
// query serf cannot handle or no one may send (a key query); everything
// else memberlist decodes from the datagram itself, which bounds it. With
// keys (an encrypted pool) that is what a key of the keyring opens; a
// packet none opens passes, for memberlist to drop.
func inspectPacket(buf []byte, keys *memberlist.Keyring) error {
	var label []byte
	if len(buf) > 0 && buf[0] == mlHasLabelMsg {
		if len(buf) < 2 || len(buf) < 2+int(buf[1]) {
			return refuse("truncated label header")
		}
		label, buf = buf[2:2+int(buf[1])], buf[2+int(buf[1]):]
	}
	if keys != nil {
		plain, err := openMessage(keys, buf, label)
		if err != nil {
			return nil
		}
		buf = plain
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
	case mlAliveMsg:
		var a alive
		if err := decodeBytes(buf[1:], &a); err != nil {
			return refuse("alive message: %v", err)
		}
		// memberlist skips an alive message's versions when it carries
		// none, and indexes all six when it carries any.
		if len(a.Vsn) != 0 && len(a.Vsn) < vsnLen {
			return refuse("alive message for %q carries %d protocol versions, not %d", a.Node, len(a.Vsn), vsnLen)
		}
	case mlUserMsg:
		return inspectSerf(buf[1:])
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
