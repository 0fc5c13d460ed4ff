package gossip

import (
	"bytes"
	"crypto/aes"
	"crypto/cipher"
	"crypto/rand"
	"errors"
	"io"
	"strings"
	"testing"

	"github.com/hashicorp/go-msgpack/v2/codec"
	"github.com/hashicorp/memberlist"
)

// enc is v in msgpack, as memberlist and serf write it.
func enc(t testing.TB, v any) []byte {
	t.Helper()
	var buf bytes.Buffer
	var h codec.MsgpackHandle
	if err := codec.NewEncoder(&buf, &h).Encode(v); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// msg is a message type byte followed by v in msgpack.
func msg(t testing.TB, typ byte, v any) []byte {
	return append([]byte{typ}, enc(t, v)...)
}

func label(l string, rest []byte) []byte {
	return append([]byte{mlHasLabelMsg, byte(len(l))}, append([]byte(l), rest...)...)
}

var goodVsn = []uint8{1, 5, 2, 2, 5, 4}

// pushPull is a whole push/pull stream message: header, members, state.
func pushPull(t testing.TB, join bool, state []byte, members ...pushNodeState) []byte {
	out := msg(t, mlPushPullMsg, pushPullHeader{Nodes: len(members), UserStateLen: len(state), Join: join})
	for _, m := range members {
		out = append(out, enc(t, m)...)
	}
	return append(out, state...)
}

func node(name string, vsn []uint8) pushNodeState {
	return pushNodeState{Name: name, Addr: []byte{127, 0, 0, 1}, Port: 8031, State: 0, Vsn: vsn}
}

// query is a memberlist user message carrying a serf query.
func query(t testing.TB, name string, payload []byte, filters ...[]byte) []byte {
	return append([]byte{mlUserMsg, serfQueryMsg}, enc(t, serfQuery{Filters: filters, Name: name, Payload: payload})...)
}

// exactReader yields b and then fails: a test that inspection never reads
// past the message, as it must not when the sender waits for an answer.
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
		t.Fatalf("inspect = %v, want it refused for its member count", err)
	}
}

func TestInspectStream(t *testing.T) {
	state := bytes.Repeat([]byte{7}, 300)
	userMsg := func(body []byte) []byte {
		return append(msg(t, mlUserMsg, userMsgHeader{UserMsgLen: len(body)}), body...)
	}
	tests := []struct {
		name      string
		in        []byte
		encrypted bool
		cost      int64
		refused   string // "" if it passes
	}{
		{"a real pool's push/pull", pushPull(t, false, state, node("a", goodVsn), node("b", goodVsn)), false, 2 * nodeSlotCost, ""},
		{"a join", pushPull(t, true, state, node("a", goodVsn)), false, nodeSlotCost, ""},
		{"behind a label", label("dc1", pushPull(t, false, nil, node("a", goodVsn))), false, nodeSlotCost, ""},
		{"a member without versions", pushPull(t, false, nil, node("a", goodVsn), node("b", nil)), false, 0, `member "b" carries 0 protocol versions`},
		{"a member with three versions", pushPull(t, true, nil, node("a", goodVsn[:3])), false, 0, "carries 3 protocol versions"},
		{"the most members accepted, declared", msg(t, mlPushPullMsg, pushPullHeader{Nodes: MaxPushPullNodes}), false, 0, "read past"},
		{"one member more", msg(t, mlPushPullMsg, pushPullHeader{Nodes: MaxPushPullNodes + 1}), false, 0, "32769 members"},
		{"memberlist's own bound", msg(t, mlPushPullMsg, pushPullHeader{Nodes: 1 << 20}), false, 0, "members"},
		{"negative members", msg(t, mlPushPullMsg, pushPullHeader{Nodes: -1}), false, 0, "-1 members"},
		{"too much state", msg(t, mlPushPullMsg, pushPullHeader{UserStateLen: MaxPushPullUserState + 1}), false, 0, "bytes of state"},
		{"negative state", msg(t, mlPushPullMsg, pushPullHeader{UserStateLen: -5}), false, 0, "bytes of state"},
		{"huge behind a label", label("dc1", msg(t, mlPushPullMsg, pushPullHeader{Nodes: 1 << 30})), false, 0, "members"},
		{"a user message", userMsg([]byte{1, 2, 3}), false, 0, ""},
		{"a huge user message", msg(t, mlUserMsg, userMsgHeader{UserMsgLen: 1 << 40}), false, 0, "user message header declares"},
		{"a serf query by stream", userMsg(query(t, "q", nil, []byte{0, 0x90})[1:]), false, 0, ""},
		{"a serf query with an empty filter by stream", userMsg(query(t, "q", nil, []byte{})[1:]), false, 0, "empty filter"},
		{"compressed", []byte{mlCompressMsg, 0x82}, false, 0, "compressed"},
		{"compressed behind a label", label("x", []byte{mlCompressMsg}), false, 0, "compressed"},
		{"a ping over TCP (memberlist reads the rest)", []byte{0}, false, 0, ""},
		{"encrypted, in plaintext mode (memberlist refuses it)", []byte{mlEncryptMsg}, false, 0, ""},
		{"not a msgpack header", []byte{mlPushPullMsg, 0xc1}, false, 0, "push/pull header"},
		{"encrypted, with a key", append([]byte{mlEncryptMsg, 0, 0, 0, 9}, make([]byte, 9)...), true, 9, ""},
		{"encrypted behind a label, with a key", label("l", append([]byte{mlEncryptMsg, 0, 0, 1, 0}, make([]byte, 256)...)), true, 256, ""},
		{"encrypted, not all arrived", []byte{mlEncryptMsg, 0, 0, 1, 0, 1, 2}, true, 0, "read past"},
		{"the largest encrypted stream, declared", []byte{mlEncryptMsg, 0, 0x80, 0, 0}, true, 0, "read past"},
		{"a larger encrypted stream", []byte{mlEncryptMsg, 0, 0x80, 0, 1}, true, 0, "encrypted stream declares 8388609 bytes"},
		{"plaintext push/pull, with a key", pushPull(t, false, nil, node("a", goodVsn)), true, 0, "unencrypted"},
		{"compressed, with a key", []byte{mlCompressMsg}, true, 0, "unencrypted"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := &exactReader{tt.in}
			cost, err := inspectStream(r, tt.encrypted)
			switch {
			case tt.refused == "" && err != nil:
				t.Fatalf("refused: %v", err)
			case tt.refused == "" && cost != tt.cost:
				t.Fatalf("cost = %d, want %d", cost, tt.cost)
			case tt.refused == "" && len(r.b) != 0:
				t.Fatalf("%d bytes of the message left unread", len(r.b))
			case tt.refused != "" && (err == nil || !strings.Contains(err.Error(), tt.refused)):
				t.Fatalf("inspect = %d, %v; want refused with %q", cost, err, tt.refused)
			case tt.refused != "read past" && errors.Is(err, errReadPast):
				t.Fatalf("inspection read past the message: %v", err)
			}
		})
	}
}

func TestInspectStreamTruncated(t *testing.T) {
	full := pushPull(t, true, []byte("state"), node("a", goodVsn))
	for n := 0; n < len(full); n++ {
		if _, err := inspectStream(bytes.NewReader(full[:n]), false); err == nil {
			t.Fatalf("a stream cut after %d of %d bytes passed", n, len(full))
		}
	}
	enc := append([]byte{mlEncryptMsg, 0, 0, 0, 4}, 1, 2, 3, 4)
	for n := 0; n < len(enc); n++ {
		if _, err := inspectStream(bytes.NewReader(enc[:n]), true); err == nil {
			t.Fatalf("an encrypted stream cut after %d bytes passed", n)
		}
	}
	if _, err := inspectStream(bytes.NewReader(nil), false); err != io.EOF {
		t.Fatalf("empty stream: %v, want io.EOF", err)
	}
}

// Only the guard's verdicts are logged as refusals; a stream that could not
// be read is memberlist's ordinary failure.
func TestRefusalsAreTellable(t *testing.T) {
	_, verdict := inspectStream(&exactReader{msg(t, mlPushPullMsg, pushPullHeader{Nodes: 1 << 30})}, false)
	_, cut := inspectStream(bytes.NewReader([]byte{mlPushPullMsg, 0x83}), false)
	if !isRefusal(verdict) || !isRefusal(errCompressed) || !isRefusal(inspectPacket([]byte{mlCompressMsg}, nil)) {
		t.Fatalf("verdicts not told as refusals: %v", verdict)
	}
	if isRefusal(cut) || isRefusal(io.EOF) {
		t.Fatalf("read failures told as refusals: %v", cut)
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
	aliveWith := func(vsn []uint8) []byte {
		return msg(t, mlAliveMsg, alive{Incarnation: 9, Node: "s1", Addr: []byte{127, 0, 0, 1}, Port: 8031, Vsn: vsn})
	}
	keys := testKeyring(t)
	sealed := func(plain []byte) []byte { return seal(t, keys.GetPrimaryKey(), plain, nil) }
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
		{"alive with six versions", aliveWith(goodVsn), false, false},
		{"alive without versions", aliveWith(nil), false, false},
		{"alive with three versions", aliveWith(goodVsn[:3]), false, true},
		{"alive with three versions in a compound", compound(ping, aliveWith(goodVsn[:5])), false, true},
		{"alive that does not decode", []byte{mlAliveMsg, 0xc1}, false, true},
		{"a serf query", query(t, "weft-q", []byte("x"), []byte{0, 0x90}), false, false},
		{"a serf query with an empty filter", query(t, "q", nil, []byte{0, 0x90}, []byte{}), false, true},
		{"a serf internal query with a payload", query(t, "_serf_ping", []byte{7, 0x80}), false, false},
		{"a serf key query with a payload", query(t, "_serf_install-key", []byte{7, 0x80}), false, true},
		{"a serf key query without one", query(t, "_serf_install-key", nil), false, true},
		{"a serf key list in a compound", compound(ping, query(t, "_serf_list-keys", []byte{8, 0x80})), false, true},
		{"a serf key use, sealed", sealed(query(t, "_serf_use-key", []byte{9, 0x80})), true, true},
		{"a serf key removal in a compound, sealed", sealed(crc(compound(ping, query(t, "_serf_remove-key", []byte{10, 0x80})))), true, true},
		{"a serf key install, labelled and sealed", label("dc", seal(t, keys.GetPrimaryKey(), query(t, "_serf_install-key", []byte{7, 0x80}), []byte("dc"))), true, true},
		{"a serf query, sealed", sealed(query(t, "weft-q", []byte("x"))), true, false},
		{"a ping, sealed", sealed(ping), true, false},
		{"compressed, sealed", sealed(comp), true, true},
		{"a serf key install sealed with a key not held", seal(t, newRawKey(t), query(t, "_serf_install-key", []byte{7, 0x80}), nil), true, false},
		{"a serf query that does not decode", []byte{mlUserMsg, serfQueryMsg, 0xc1}, false, true},
		{"another serf message", []byte{mlUserMsg, 3, 0xc1}, false, false},
		{"empty", nil, false, false},
		{"truncated label", []byte{mlHasLabelMsg, 9, 'a'}, false, true},
		{"anything no key opens, with a key", comp, true, false},
		{"truncated label, with a key", []byte{mlHasLabelMsg, 9}, true, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var k *memberlist.Keyring
			if tt.encrypted {
				k = keys
			}
			err := inspectPacket(tt.in, k)
			if (err != nil) != tt.refused {
				t.Fatalf("inspectPacket = %v, want refused %v", err, tt.refused)
			}
		})
	}
}

// testKeyring is a keyring of one fresh key.
func testKeyring(t testing.TB) *memberlist.Keyring {
	t.Helper()
	k, err := memberlist.NewKeyring(nil, newRawKey(t))
	if err != nil {
		t.Fatal(err)
	}
	return k
}

func newRawKey(t testing.TB) []byte {
	t.Helper()
	k, err := GenerateKey()
	if err != nil {
		t.Fatal(err)
	}
	raw, err := ParseKey(k)
	if err != nil {
		t.Fatal(err)
	}
	return raw
}

// seal encrypts plain as memberlist (version 1) does with key, over the
// authenticated data ad.
func seal(t testing.TB, key, plain, ad []byte) []byte {
	t.Helper()
	block, err := aes.NewCipher(key)
	if err != nil {
		t.Fatal(err)
	}
	gcm, err := cipher.NewGCM(block)
	if err != nil {
		t.Fatal(err)
	}
	out := make([]byte, encVersionSize+encNonceSize, encVersionSize+encNonceSize+len(plain)+encTagSize)
	out[0] = 1
	if _, err := rand.Read(out[encVersionSize:]); err != nil {
		t.Fatal(err)
	}
	return gcm.Seal(out, out[encVersionSize:], plain, ad)
}

// sealedStream is an encrypted stream's first message as memberlist
// writes it: the type byte, the ciphertext's length, the ciphertext sealed
// over those five bytes.
func sealedStream(t testing.TB, key, plain []byte) []byte {
	t.Helper()
	n := encVersionSize + encNonceSize + len(plain) + encTagSize
	header := []byte{mlEncryptMsg, byte(n >> 24), byte(n >> 16), byte(n >> 8), byte(n)}
	return append(header, seal(t, key, plain, header)...)
}

// An encrypted stream is opened and what it carries inspected as a
// plaintext stream's would be: a serf key query sent over a stream is
// refused; a push/pull passes, costing its ciphertext and its members.
func TestSealedStreamsAreInspected(t *testing.T) {
	keys := testKeyring(t)
	k := keys.GetPrimaryKey()
	userMsg := func(body []byte) []byte {
		return append(msg(t, mlUserMsg, userMsgHeader{UserMsgLen: len(body)}), body...)
	}
	install := query(t, "_serf_install-key", []byte{7, 0x80})[1:] // the serf message, without memberlist's type byte
	if _, err := inspectSealed(sealedStream(t, k, userMsg(install)), keys); !isRefusal(err) || !strings.Contains(err.Error(), "_serf_install-key") {
		t.Fatalf("a key query over an encrypted stream: %v, want it refused", err)
	}
	pp := pushPull(t, false, []byte("state"), node("a", goodVsn), node("b", goodVsn))
	if cost, err := inspectSealed(sealedStream(t, k, pp), keys); err != nil || cost != 2*nodeSlotCost {
		t.Fatalf("an encrypted push/pull: cost %d, %v; want %d", cost, err, 2*nodeSlotCost)
	}
	if cost, err := inspectSealed(sealedStream(t, newRawKey(t), userMsg(install)), keys); err != nil || cost != 0 {
		t.Fatalf("a stream no key opens: %d, %v; want it left to memberlist", cost, err)
	}
}
