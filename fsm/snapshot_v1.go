package fsm

import (
	"bufio"
	"errors"
	"fmt"

	"github.com/hashicorp/go-msgpack/v2/codec"
)

// readSnapshotV1 reads the rest of a format 1 snapshot (written by weft
// before format 2), so that a server upgraded in place restores the
// snapshot it last took: a msgpack header, then records that are each a
// type byte and a msgpack body with no length before it, then the end
// record. Format 1 decodes every record by reflection, containers too.
func readSnapshotV1(br *bufio.Reader) (*State, error) {
	dec := codec.NewDecoder(br, msgpackHandle)
	var hdr snapshotHeader
	if err := dec.Decode(&hdr); err != nil {
		return nil, fmt.Errorf("read header: %w", err)
	}
	rs := newRestorer(&hdr)
	for {
		b, err := br.ReadByte()
		if err != nil {
			return nil, fmt.Errorf("snapshot ends without an end record: %w", err)
		}
		t := recordType(b)
		if t == recordEnd {
			return rs.finish(), nil
		}
		err = rs.record(t, dec.Decode)
		if errors.Is(err, errUnknownRecord) && t&0x80 != 0 {
			var skip codec.Raw
			if err := dec.Decode(&skip); err != nil {
				return nil, fmt.Errorf("skip record type %d: %w", t, err)
			}
		} else if err != nil {
			return nil, err
		}
	}
}
