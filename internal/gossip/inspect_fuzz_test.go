package gossip

import (
	"bytes"
	"testing"

	"github.com/hashicorp/memberlist"
)

// FuzzInspectPacket: inspecting any datagram, in either mode, returns
// without panicking, and fails only by refusing it.
func FuzzInspectPacket(f *testing.F) {
	f.Add([]byte{0, 0x81}, false)
	f.Add(compound([]byte{mlCompressMsg}, []byte{0}), false)
	f.Add(label("dc", []byte{mlAliveMsg, 0x81, 0xa3, 'V', 's', 'n', 0x93, 1, 5, 2}), false)
	f.Add([]byte{mlUserMsg, serfQueryMsg, 0x81, 0xa7, 'F', 'i', 'l', 't', 'e', 'r', 's', 0x91, 0xc4, 0}, false)
	f.Add([]byte{mlHasLabelMsg, 3, 'a'}, true)
	keys := testKeyring(f)
	f.Add(seal(f, keys.GetPrimaryKey(), []byte{0, 0x81}, nil), true)
	f.Fuzz(func(t *testing.T, buf []byte, encrypted bool) {
		var k *memberlist.Keyring
		if encrypted {
			k = keys
		}
		err := inspectPacket(buf, k)
		if err != nil && !isRefusal(err) {
			t.Fatalf("a packet's inspection failed other than by refusing it: %v", err)
		}
	})
}

// FuzzInspectStream: inspecting any stream returns without panicking, and
// what it passes costs no more than the bounds allow.
func FuzzInspectStream(f *testing.F) {
	f.Add([]byte{mlPushPullMsg, 0x83, 0xa5, 'N', 'o', 'd', 'e', 's', 0x01}, false)
	f.Add([]byte{mlUserMsg, 0x81, 0xaa, 'U', 's', 'e', 'r', 'M', 's', 'g', 'L', 'e', 'n', 0x02, 4, 0}, false)
	f.Add([]byte{mlEncryptMsg, 0, 0, 0, 2, 1, 2}, true)
	f.Add([]byte{mlHasLabelMsg, 1, 'x', mlCompressMsg}, false)
	f.Fuzz(func(t *testing.T, in []byte, encrypted bool) {
		r := bytes.NewReader(in)
		cost, err := inspectStream(r, encrypted)
		if err == nil && (cost < 0 || cost > int64(MaxPushPullNodes)*nodeSlotCost+MaxEncryptedStream) {
			t.Fatalf("cost %d out of bounds", cost)
		}
	})
}
