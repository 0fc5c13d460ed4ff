package msgpackscan

import (
	"errors"
	"fmt"
)

// ErrTooLarge is returned by Scan when the value cannot fit in the
// scanner's limit: it is already longer, or it declares more values or
// payload bytes than the bytes left could hold.
var ErrTooLarge = errors.New("msgpack value exceeds the size limit")

// ErrInvalid is returned by Scan for the one byte msgpack never uses as a
// type (0xc1).
var ErrInvalid = errors.New("msgpack: invalid type byte 0xc1")

// Scanner finds the end of one msgpack value fed to it in pieces. The zero
// Scanner is not ready: call Reset before each value.
type Scanner struct {
	limit   uint64 // most bytes the value may take
	used    uint64 // bytes of the value consumed so far
	pending uint64 // values (array elements, map keys and values) not yet started
	skip    uint64 // payload bytes of the current value still to skip
	// A length field split across pieces: the type byte, how many length
	// bytes it has, how many are in, and the length so far.
	code    byte
	lenNeed uint8
	lenHave uint8
	length  uint64
}

// Reset prepares s for a new value of at most limit bytes.
func (s *Scanner) Reset(limit int) {
	*s = Scanner{limit: uint64(max(limit, 0)), pending: 1}
}

// Used returns how many bytes of the current value Scan has consumed.
func (s *Scanner) Used() int { return int(s.used) }

// AtLeast returns the fewest bytes the current value can take, from what
// Scan has seen of it: those consumed, and those its headers declare
// still to come.
func (s *Scanner) AtLeast() uint64 { return s.used + s.pending + s.skip }

// Scan consumes bytes of p up to the end of the current value. It returns
// how many bytes it consumed and whether the value is now complete; bytes
// of p after a complete value belong to whatever follows it. Once Scan has
// returned an error the scanner must be Reset.
func (s *Scanner) Scan(p []byte) (n int, done bool, err error) {
	defer func() { s.used += uint64(n) }()
	for n < len(p) {
		switch {
		case s.skip > 0:
			k := min(s.skip, uint64(len(p)-n))
			s.skip -= k
			n += int(k)
		case s.lenNeed > 0:
			s.length = s.length<<8 | uint64(p[n])
			n++
			s.lenHave++
			if s.lenHave == s.lenNeed {
				s.lenNeed = 0
				s.lengthDone()
			}
		default:
			b := p[n]
			n++
			s.pending--
			if err := s.start(b); err != nil {
				return n, false, err
			}
		}
		if s.pending == 0 && s.skip == 0 && s.lenNeed == 0 {
			return n, true, nil
		}
		// Every value still to read takes at least one byte, and every
		// payload byte one byte: refuse as soon as they cannot fit.
		if used := s.used + uint64(n); used > s.limit || s.pending+s.skip > s.limit-used {
			return n, false, fmt.Errorf("%w of %d bytes", ErrTooLarge, s.limit)
		}
	}
	return n, false, nil
}

// start reads one type byte.
func (s *Scanner) start(b byte) error {
	switch {
	case b <= 0x7f || b >= 0xe0 || b == 0xc0 || b == 0xc2 || b == 0xc3:
		// fixint, negative fixint, nil, false, true: no payload
	case b <= 0x8f:
		s.pending += 2 * uint64(b&0x0f)
	case b <= 0x9f:
		s.pending += uint64(b & 0x0f)
	case b <= 0xbf:
		s.skip = uint64(b & 0x1f)
	case b == 0xc1:
		return ErrInvalid
	default:
		if fixed := fixedPayload[b]; fixed > 0 {
			s.skip = uint64(fixed)
			return nil
		}
		s.code, s.lenNeed, s.lenHave, s.length = b, lengthBytes[b], 0, 0
	}
	return nil
}

// lengthDone acts on a complete length field.
func (s *Scanner) lengthDone() {
	switch s.code {
	case 0xc4, 0xc5, 0xc6, 0xd9, 0xda, 0xdb: // bin, str
		s.skip = s.length
	case 0xc7, 0xc8, 0xc9: // ext: the type byte, then the payload
		s.skip = s.length + 1
	case 0xdc, 0xdd: // array
		s.pending += s.length
	case 0xde, 0xdf: // map
		s.pending += 2 * s.length
	}
}

// fixedPayload is the payload size of the types whose size the type byte
// fixes (an ext's type byte included); 0 for the others.
var fixedPayload = [256]uint8{
	0xca: 4, 0xcb: 8, // float32, float64
	0xcc: 1, 0xcd: 2, 0xce: 4, 0xcf: 8, // uint8..64
	0xd0: 1, 0xd1: 2, 0xd2: 4, 0xd3: 8, // int8..64
	0xd4: 2, 0xd5: 3, 0xd6: 5, 0xd7: 9, 0xd8: 17, // fixext 1..16
}

// lengthBytes is the size of the length field of the remaining types
// 0xc4..0xdf.
var lengthBytes = [256]uint8{
	0xc4: 1, 0xc5: 2, 0xc6: 4, // bin8..32
	0xc7: 1, 0xc8: 2, 0xc9: 4, // ext8..32
	0xd9: 1, 0xda: 2, 0xdb: 4, // str8..32
	0xdc: 2, 0xdd: 4, // array16, array32
	0xde: 2, 0xdf: 4, // map16, map32
}
