package msgpackscan

import (
	"bytes"
	"errors"
	"math/rand"
	"testing"

	"github.com/hashicorp/go-msgpack/v2/codec"
)

var handle = func() *codec.MsgpackHandle {
	h := &codec.MsgpackHandle{}
	h.WriteExt = true
	h.RawToString = true
	return h
}()

// deepHandle decodes as deep as the input goes, for comparisons.
var deepHandle = func() *codec.MsgpackHandle {
	h := &codec.MsgpackHandle{}
	h.WriteExt = true
	h.RawToString = true
	h.MaxDepth = 1 << 14
	return h
}()

func encode(t testing.TB, v any) []byte {
	t.Helper()
	var out []byte
	if err := codec.NewEncoderBytes(&out, handle).Encode(v); err != nil {
		t.Fatal(err)
	}
	return out
}

// scanAll feeds p to a fresh scanner in pieces of at most step bytes and
// returns where the first value ended.
func scanAll(p []byte, limit, step int) (int, bool, error) {
	var s Scanner
	s.Reset(limit)
	off := 0
	for off < len(p) {
		end := min(off+step, len(p))
		n, done, err := s.Scan(p[off:end])
		off += n
		if err != nil || done {
			if s.Used() != off {
				panic("Used disagrees with the bytes consumed")
			}
			return off, done, err
		}
	}
	return off, false, nil
}

type sample struct {
	Name  string            `codec:"name"`
	Blob  []byte            `codec:"blob"`
	Tags  map[string]string `codec:"tags"`
	Items []any             `codec:"items"`
	F     float64           `codec:"f"`
	F32   float32           `codec:"f32"`
	N     int64             `codec:"n"`
	U     uint64            `codec:"u"`
	Ptr   *sample           `codec:"ptr"`
}

func TestScanFindsTheEndOfEveryKindOfValue(t *testing.T) {
	long := string(bytes.Repeat([]byte("x"), 70000))
	values := []any{
		nil, true, false, 0, 1, -1, -33, 127, 128, 255, 256, 65535, 65536, 1 << 40, -(1 << 40), uint64(1 << 63),
		1.5, float32(2.5), "", "abc", string(bytes.Repeat([]byte("y"), 31)), string(bytes.Repeat([]byte("y"), 32)),
		string(bytes.Repeat([]byte("y"), 300)), long, []byte{}, []byte{1, 2, 3}, make([]byte, 300), make([]byte, 70000),
		[]int{}, []int{1, 2, 3}, make([]int, 20), make([]int, 70000), map[string]int{}, map[string]int{"a": 1},
		func() map[int]int {
			m := map[int]int{}
			for i := 0; i < 70000; i++ {
				m[i] = i
			}
			return m
		}(),
		&sample{Name: "n", Blob: []byte("b"), Tags: map[string]string{"k": "v"}, Items: []any{1, "two", []any{3.0, nil}},
			F: 1.25, F32: 2, N: -5, U: 7, Ptr: &sample{Name: long}},
	}
	rng := rand.New(rand.NewSource(1))
	for i, v := range values {
		enc := encode(t, v)
		trailer := []byte{0x91, 0x01} // the start of the next value
		in := append(append([]byte(nil), enc...), trailer...)
		for _, step := range []int{1, 2, 3, 7, 1 + rng.Intn(64), len(in)} {
			end, done, err := scanAll(in, 1<<20, step)
			if err != nil || !done || end != len(enc) {
				t.Fatalf("value %d (%T) in pieces of %d: end %d done %v err %v, want end %d", i, v, step, end, done, err, len(enc))
			}
		}
	}
}

func TestScanKnowsExtensions(t *testing.T) {
	cases := [][]byte{
		{0xd4, 0x01, 0xaa},
		{0xd5, 0x01, 0xaa, 0xbb},
		{0xd6, 0x01, 1, 2, 3, 4},
		{0xd7, 0x01, 1, 2, 3, 4, 5, 6, 7, 8},
		append([]byte{0xd8, 0x01}, make([]byte, 16)...),
		{0xc7, 0x02, 0x05, 0xaa, 0xbb},
		{0xc8, 0x00, 0x02, 0x05, 0xaa, 0xbb},
		{0xc9, 0x00, 0x00, 0x00, 0x02, 0x05, 0xaa, 0xbb},
	}
	for i, c := range cases {
		in := append(append([]byte(nil), c...), 0xc0)
		if end, done, err := scanAll(in, 100, 1); err != nil || !done || end != len(c) {
			t.Fatalf("ext %d: end %d done %v err %v, want %d", i, end, done, err, len(c))
		}
	}
}

func TestScanRefusesWhatCannotFit(t *testing.T) {
	cases := map[string][]byte{
		"longer than the limit":        encode(t, make([]byte, 200)),
		"array declaring 4 G values":   {0xdd, 0xff, 0xff, 0xff, 0xf0, 0x00},
		"map declaring 4 G entries":    {0xdf, 0xff, 0xff, 0xff, 0xf0, 0x00},
		"string declaring 4 GiB":       {0xdb, 0xff, 0xff, 0xff, 0xf0, 'a'},
		"nested arrays past the limit": bytes.Repeat([]byte{0x91}, 101),
	}
	for name, in := range cases {
		end, done, err := scanAll(in, 100, 1)
		if !errors.Is(err, ErrTooLarge) || done {
			t.Errorf("%s: end %d done %v err %v, want ErrTooLarge", name, end, done, err)
		}
		// Refused early: never later than the limit.
		if end > 101 {
			t.Errorf("%s: consumed %d bytes before refusing", name, end)
		}
	}
	if _, _, err := scanAll([]byte{0x92, 0x01, 0xc1}, 100, 1); !errors.Is(err, ErrInvalid) {
		t.Fatalf("0xc1: err %v", err)
	}
	// Exactly at the limit is fine.
	enc := encode(t, make([]byte, 97)) // 2-byte header + 97
	if end, done, err := scanAll(enc, len(enc), 5); err != nil || !done || end != len(enc) {
		t.Fatalf("value of exactly the limit: end %d done %v err %v", end, done, err)
	}
	if _, _, err := scanAll(enc, len(enc)-1, 5); !errors.Is(err, ErrTooLarge) {
		t.Fatalf("value one byte over the limit: err %v", err)
	}
}

// AtLeast knows, from the headers seen, the fewest bytes a value can
// take: a reader refuses a value that declares more than it may keep
// before the rest arrives.
func TestAtLeastCountsWhatHeadersDeclare(t *testing.T) {
	var s Scanner
	s.Reset(1 << 30)
	// A map of one entry, {"blob": <bin32 of 1000 bytes>}, up to the
	// blob's first byte.
	in := []byte{0x81, 0xa4, 'b', 'l', 'o', 'b', 0xc6, 0, 0, 0x03, 0xe8}
	if n, done, err := s.Scan(in); err != nil || done || n != len(in) {
		t.Fatalf("scan: %d %v %v", n, done, err)
	}
	if got, want := s.AtLeast(), uint64(len(in)+1000); got != want {
		t.Fatalf("AtLeast = %d, want %d", got, want)
	}
	s.Reset(1 << 30)
	// An array of 3 values, the first one in: 2 more, of a byte each.
	if _, _, err := s.Scan([]byte{0x93, 0x01}); err != nil {
		t.Fatal(err)
	}
	if got := s.AtLeast(); got != 4 {
		t.Fatalf("AtLeast of a 3-array with one value in = %d, want 4", got)
	}
}

func TestScanAllocatesNothing(t *testing.T) {
	enc := encode(t, &sample{Name: "n", Tags: map[string]string{"a": "b"}, Items: []any{1, "x"}})
	var s Scanner
	allocs := testing.AllocsPerRun(100, func() {
		s.Reset(1 << 20)
		s.Scan(enc)
	})
	if allocs != 0 {
		t.Fatalf("Scan allocated %v times per value", allocs)
	}
}

// FuzzScan checks the scanner against the codec: where the codec reads a
// whole value, the scanner ends at the same byte, however the input is cut.
func FuzzScan(f *testing.F) {
	f.Add(encode(f, &sample{Name: "n", Items: []any{1, "x", []byte{1}}, Tags: map[string]string{"a": "b"}}))
	f.Add([]byte{0xdd, 0xff, 0xff, 0xff, 0xff})
	f.Add([]byte{0xc7, 0x01, 0x05, 0xaa})
	f.Add(bytes.Repeat([]byte{0x91}, 70))
	f.Fuzz(func(t *testing.T, data []byte) {
		whole, wholeDone, wholeErr := scanAll(data, 1<<16, len(data)+1)
		bytewise, byteDone, byteErr := scanAll(data, 1<<16, 1)
		if whole != bytewise || wholeDone != byteDone || (wholeErr == nil) != (byteErr == nil) {
			t.Fatalf("whole: %d %v %v; byte by byte: %d %v %v", whole, wholeDone, wholeErr, bytewise, byteDone, byteErr)
		}
		if len(data) > 1<<16 {
			return
		}
		var raw codec.Raw
		dec := codec.NewDecoderBytes(data, deepHandle)
		// The codec reads the value after an empty extension as that
		// extension's value, which the msgpack spec does not; weft refuses
		// empty extensions before decoding (rpc/budget.go).
		if err := dec.Decode(&raw); err == nil && !hasEmptyExt(data) {
			if n := dec.NumBytesRead(); !wholeDone || whole != n {
				t.Fatalf("codec read a %d-byte value; scanner: end %d done %v err %v", n, whole, wholeDone, wholeErr)
			}
		}
	})
}

// hasEmptyExt reports whether p holds an extension with no data.
func hasEmptyExt(p []byte) bool {
	for i := 0; i+2 < len(p); i++ {
		if p[i] == 0xc7 && p[i+1] == 0 || p[i] == 0xc8 && p[i+1] == 0 && p[i+2] == 0 ||
			p[i] == 0xc9 && i+4 < len(p) && p[i+1] == 0 && p[i+2] == 0 && p[i+3] == 0 && p[i+4] == 0 {
			return true
		}
	}
	return false
}
