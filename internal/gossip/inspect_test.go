package gossip

import (
	"bytes"
	"errors"
	"io"
	"strings"
	"testing"

	"github.com/hashicorp/go-msgpack/v2/codec"
)

// msg is a message type byte followed by v in msgpack, as memberlist
// writes one.
func msg(t testing.TB, typ byte, v any) []byte {
	t.Helper()
	var buf bytes.Buffer
	buf.WriteByte(typ)
	var h codec.MsgpackHandle
	if err := codec.NewEncoder(&buf, &h).Encode(v); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

func label(l string, rest []byte) []byte {
	return append([]byte{mlHasLabelMsg, byte(len(l))}, append([]byte(l), rest...)...)
}

// exactReader yields b and then fails: a test that inspection never reads
// past what it needs, as it must not when the sender waits for an answer.
type exactReader struct{ b []byte }

var errReadPast = errors.New("read past the end of what the peer sent")

func (r *exactReader) Read(p []byte) (int, error) {
	if len(r.b) == 0 {
		return 0, errReadPast
	}
	n := copy(p, r.b)
	r.b = r.b[n:]
	return n, nil
}

func TestTheIssuesPushPullHeaderIs33Bytes(t *testing.T) {
	m := msg(t, mlPushPullMsg, pushPullHeader{Nodes: 1 << 30})
	if len(m) != 33 {
		t.Fatalf("crafted push/pull header is %d bytes, want the issue's 33", len(m))
	}
	if _, err := inspectStream(&exactReader{m}, false); err == nil || !strings.Contains(err.Error(), "1073741824 members") {
		t.Fatalf("inspect = %v, want it refused for its node count", err)
	}
}

func TestInspectStream(t *testing.T) {
	pp := func(nodes, state int) []byte {
		return msg(t, mlPushPullMsg, pushPullHeader{Nodes: nodes, UserStateLen: state, Join: true})
	}
	tests := []struct {
		name      string
		in        []byte
		encrypted bool
		cost      int64
		refused   string // "" if it passes
	}{
		{"a real pool's push/pull", pp(40, 3000), false, 40*nodeSlotCost + 3000, ""},
		{"the most members accepted", pp(MaxPushPullNodes, 0), false, MaxPushPullNodes * nodeSlotCost, ""},
		{"one member more", pp(MaxPushPullNodes+1, 0), false, 0, "65537 members"},
		{"memberlist's own bound", pp(1<<20, 0), false, 0, "members"},
		{"negative members", pp(-1, 0), false, 0, "-1 members"},
		{"the most state accepted", pp(0, MaxPushPullUserState), false, MaxPushPullUserState, ""},
		{"too much state", pp(0, MaxPushPullUserState+1), false, 0, "bytes of state"},
		{"negative state", pp(0, -5), false, 0, "bytes of state"},
		{"behind a label", label("dc1", pp(3, 10)), false, 3*nodeSlotCost + 10, ""},
		{"huge behind a label", label("dc1", pp(1<<30, 0)), false, 0, "members"},
		{"a small user message", msg(t, mlUserMsg, userMsgHeader{UserMsgLen: 100}), false, 100, ""},
		{"a huge user message", msg(t, mlUserMsg, userMsgHeader{UserMsgLen: 1 << 40}), false, 0, "user message header declares"},
		{"compressed", []byte{mlCompressMsg, 0x82}, false, 0, "compressed"},
		{"compressed behind a label", label("x", []byte{mlCompressMsg}), false, 0, "compressed"},
		{"a ping over TCP", msg(t, 0, struct{ SeqNo uint32 }{7}), false, 0, ""},
		{"encrypted, in plaintext mode (memberlist refuses it)", []byte{mlEncryptMsg}, false, 0, ""},
		{"not a msgpack header", []byte{mlPushPullMsg, 0xc1}, false, 0, "push/pull header"},
		{"encrypted, with a key", []byte{mlEncryptMsg, 0, 0, 0, 9}, true, 9, ""},
		{"encrypted behind a label, with a key", label("l", []byte{mlEncryptMsg, 0, 1, 0, 0}), true, 1 << 16, ""},
		{"the largest encrypted stream", []byte{mlEncryptMsg, 1, 0, 0, 0}, true, MaxEncryptedStream, ""},
		{"a larger encrypted stream", []byte{mlEncryptMsg, 1, 0, 0, 1}, true, 0, "encrypted stream declares 16777217 bytes"},
		{"plaintext push/pull, with a key", pp(1, 0), true, 0, "unencrypted"},
		{"compressed, with a key", []byte{mlCompressMsg}, true, 0, "unencrypted"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cost, err := inspectStream(&exactReader{tt.in}, tt.encrypted)
			switch {
			case tt.refused == "" && err != nil:
				t.Fatalf("refused: %v", err)
			case tt.refused == "" && cost != tt.cost:
				t.Fatalf("cost = %d, want %d", cost, tt.cost)
			case tt.refused != "" && (err == nil || !strings.Contains(err.Error(), tt.refused)):
				t.Fatalf("inspect = %d, %v; want refused with %q", cost, err, tt.refused)
			case errors.Is(err, errReadPast):
				t.Fatalf("inspection read past the message head: %v", err)
			}
		})
	}
}

func TestInspectStreamTruncated(t *testing.T) {
	full := msg(t, mlPushPullMsg, pushPullHeader{Nodes: 3})
	for n := 0; n < len(full); n++ {
		if _, err := inspectStream(bytes.NewReader(full[:n]), false); err == nil {
			t.Fatalf("a stream cut after %d bytes passed", n)
		}
	}
	enc := []byte{mlEncryptMsg, 0, 0, 1, 0}
	for n := 0; n < len(enc); n++ {
		if _, err := inspectStream(bytes.NewReader(enc[:n]), true); err == nil {
			t.Fatalf("an encrypted stream cut after %d bytes passed", n)
		}
	}
	if _, err := inspectStream(bytes.NewReader(nil), false); err != io.EOF {
		t.Fatalf("empty stream: %v, want io.EOF", err)
	}
}

// compound builds a memberlist compound message of parts.
func compound(parts ...[]byte) []byte {
	out := []byte{mlCompoundMsg, byte(len(parts))}
	for _, p := range parts {
		out = append(out, byte(len(p)>>8), byte(len(p)))
	}
	for _, p := range parts {
		out = append(out, p...)
	}
	return out
}

func TestInspectPacket(t *testing.T) {
	ping := []byte{0, 0x81}
	comp := []byte{mlCompressMsg, 0x82, 1, 2}
	crc := func(b []byte) []byte { return append([]byte{mlHasCrcMsg, 1, 2, 3, 4}, b...) }
	nest := func(depth int, inner []byte) []byte {
		for i := 0; i < depth; i++ {
			inner = compound(inner)
		}
		return inner
	}
	tests := []struct {
		name      string
		in        []byte
		encrypted bool
		refused   bool
	}{
		{"ping", ping, false, false},
		{"compressed", comp, false, true},
		{"compound of plain messages", compound(ping, ping), false, false},
		{"compound holding a compressed part", compound(ping, comp), false, true},
		{"crc then compound with compression", crc(compound(comp)), false, true},
		{"label then compressed", label("dc", comp), false, true},
		{"truncated compound before the compressed part", compound(ping, comp)[:2+4+2+1], false, false},
		{"compound nested as deep as allowed", nest(maxCompoundDepth, ping), false, false},
		{"compound nested deeper", nest(maxCompoundDepth+1, ping), false, true},
		{"empty", nil, false, false},
		{"truncated label", []byte{mlHasLabelMsg, 9, 'a'}, false, true},
		{"anything, with a key", comp, true, false},
		{"truncated label, with a key", []byte{mlHasLabelMsg, 9}, true, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := inspectPacket(tt.in, tt.encrypted)
			if (err != nil) != tt.refused {
				t.Fatalf("inspectPacket = %v, want refused %v", err, tt.refused)
			}
		})
	}
}

// Only the guard's verdicts are logged as refusals; a stream that could not
// be read is memberlist's ordinary failure.
func TestRefusalsAreTellable(t *testing.T) {
	_, verdict := inspectStream(&exactReader{msg(t, mlPushPullMsg, pushPullHeader{Nodes: 1 << 30})}, false)
	_, malformed := inspectStream(&exactReader{[]byte{mlPushPullMsg, 0xc1}}, false)
	_, cut := inspectStream(bytes.NewReader([]byte{mlPushPullMsg, 0x83}), false)
	if !isRefusal(verdict) || !isRefusal(errCompressed) || !isRefusal(inspectPacket([]byte{mlCompressMsg}, false)) {
		t.Fatalf("verdicts not told as refusals: %v", verdict)
	}
	if isRefusal(malformed) || isRefusal(cut) || isRefusal(io.EOF) {
		t.Fatalf("read failures told as refusals: %v, %v", malformed, cut)
	}
}
