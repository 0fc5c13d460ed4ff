package rpc

import (
	"errors"
	"fmt"
	"math"
	"reflect"

	"github.com/weft-sched/weft/internal/msgpackscan"
)

// The messages every node sends every second (a heartbeat, its answer, and
// the batches a follower forwards them in) have hand-written msgpack codecs
// (fastcodec_node.go): at 5,000 nodes, encoding and decoding them by reflection
// was a fifth of every server's CPU and of the simulator's. The bytes are
// exactly what the reflection codec writes — a map per struct, keyed by the
// codec tags in the codec's order, integers in their smallest form — so
// either side may use either codec (fastcodec_test.go checks this on random
// values), and a message a peer of another version sends decodes the same.
//
// A type takes part by implementing wireEncoder and wireDecoder; writeMessage
// and the codecs use them when the body does. The decoder charges what it
// allocates against the request's budget as checkDecodeCost would, so a
// hostile message is refused before it allocates more than that.

// wireEncoder appends its msgpack encoding to b.
type wireEncoder interface {
	appendMsgpack(b []byte) []byte
}

// wireDecoder reads its msgpack encoding from r.
type wireDecoder interface {
	decodeMsgpack(r *wireReader) error
}

// msgpack type bytes.
const (
	mpNil    = 0xc0
	mpFalse  = 0xc2
	mpTrue   = 0xc3
	mpUint8  = 0xcc
	mpUint16 = 0xcd
	mpUint32 = 0xce
	mpUint64 = 0xcf
	mpInt8   = 0xd0
	mpInt16  = 0xd1
	mpInt32  = 0xd2
	mpInt64  = 0xd3
	mpStr8   = 0xd9
	mpStr16  = 0xda
	mpStr32  = 0xdb
	mpBin8   = 0xc4
	mpBin16  = 0xc5
	mpBin32  = 0xc6
	mpArr16  = 0xdc
	mpArr32  = 0xdd
	mpMap16  = 0xde
	mpMap32  = 0xdf
)

func appendNil(b []byte) []byte { return append(b, mpNil) }

func appendBool(b []byte, v bool) []byte {
	if v {
		return append(b, mpTrue)
	}
	return append(b, mpFalse)
}

func appendMapHeader(b []byte, n int) []byte {
	switch {
	case n < 16:
		return append(b, 0x80|byte(n))
	case n <= math.MaxUint16:
		return append(b, mpMap16, byte(n>>8), byte(n))
	}
	return append(b, mpMap32, byte(n>>24), byte(n>>16), byte(n>>8), byte(n))
}

func appendArrayHeader(b []byte, n int) []byte {
	switch {
	case n < 16:
		return append(b, 0x90|byte(n))
	case n <= math.MaxUint16:
		return append(b, mpArr16, byte(n>>8), byte(n))
	}
	return append(b, mpArr32, byte(n>>24), byte(n>>16), byte(n>>8), byte(n))
}

// appendInt writes a signed integer as the reflection codec does: a fixint
// from -32 to 127, else the smallest signed type that holds it.
func appendInt(b []byte, v int64) []byte {
	switch {
	case v > math.MaxInt8:
		switch {
		case v <= math.MaxInt16:
			return append(b, mpInt16, byte(v>>8), byte(v))
		case v <= math.MaxInt32:
			return append(b, mpInt32, byte(v>>24), byte(v>>16), byte(v>>8), byte(v))
		}
		return appendBig(append(b, mpInt64), uint64(v))
	case v >= -32:
		return append(b, byte(v))
	case v >= math.MinInt8:
		return append(b, mpInt8, byte(v))
	case v >= math.MinInt16:
		return append(b, mpInt16, byte(v>>8), byte(v))
	case v >= math.MinInt32:
		return append(b, mpInt32, byte(v>>24), byte(v>>16), byte(v>>8), byte(v))
	}
	return appendBig(append(b, mpInt64), uint64(v))
}

// appendUint writes an unsigned integer as the reflection codec does.
func appendUint(b []byte, v uint64) []byte {
	switch {
	case v <= math.MaxInt8:
		return append(b, byte(v))
	case v <= math.MaxUint8:
		return append(b, mpUint8, byte(v))
	case v <= math.MaxUint16:
		return append(b, mpUint16, byte(v>>8), byte(v))
	case v <= math.MaxUint32:
		return append(b, mpUint32, byte(v>>24), byte(v>>16), byte(v>>8), byte(v))
	}
	return appendBig(append(b, mpUint64), v)
}

func appendBig(b []byte, v uint64) []byte {
	return append(b, byte(v>>56), byte(v>>48), byte(v>>40), byte(v>>32), byte(v>>24), byte(v>>16), byte(v>>8), byte(v))
}

// appendStr writes a string as the reflection codec does with
// MsgpackHandle (WriteExt: str8 for 32 to 255 bytes).
func appendStr(b []byte, s string) []byte {
	n := len(s)
	switch {
	case n < 32:
		b = append(b, 0xa0|byte(n))
	case n <= math.MaxUint8:
		b = append(b, mpStr8, byte(n))
	case n <= math.MaxUint16:
		b = append(b, mpStr16, byte(n>>8), byte(n))
	default:
		b = append(b, mpStr32, byte(n>>24), byte(n>>16), byte(n>>8), byte(n))
	}
	return append(b, s...)
}

// appendBin writes a byte slice as the reflection codec does (bin; nil
// is msgpack nil).
func appendBin(b []byte, v []byte) []byte {
	n := len(v)
	switch {
	case v == nil:
		return appendNil(b)
	case n <= math.MaxUint8:
		b = append(b, mpBin8, byte(n))
	case n <= math.MaxUint16:
		b = append(b, mpBin16, byte(n>>8), byte(n))
	default:
		b = append(b, mpBin32, byte(n>>24), byte(n>>16), byte(n>>8), byte(n))
	}
	return append(b, v...)
}

// appendStrings writes a string slice; nil is msgpack nil.
func appendStrings(b []byte, ss []string) []byte {
	if ss == nil {
		return appendNil(b)
	}
	b = appendArrayHeader(b, len(ss))
	for _, s := range ss {
		b = appendStr(b, s)
	}
	return b
}

// appendReflected appends v encoded by the reflection codec: for the
// rarely sent parts of a hand-encoded message.
func appendReflected(b []byte, v any) []byte {
	w := writeBufs.Get().(*writeBuf)
	defer w.put()
	w.b = w.b[:0]
	w.enc.ResetBytes(&w.b)
	if err := w.enc.Encode(v); err != nil {
		// Only values that cannot be msgpack fail, and weft's types all
		// can: a failure here is a bug in the type, not in the input.
		panic(fmt.Sprintf("rpc: encoding %T: %v", v, err))
	}
	return append(b, w.b...)
}

// errEmptyKey is a struct's map with an empty key.
var errEmptyKey = errors.New("empty field name")

// errWireType is a value whose msgpack type the field cannot hold.
var errWireType = errors.New("unexpected msgpack type")

// wireReader decodes one whole msgpack value (as msgReader returns it)
// into hand-decoded types. What decoding allocates is charged against the
// budget, with the costs checkDecodeCost uses.
type wireReader struct {
	b      []byte
	pos    int
	left   int64 // budget left
	budget int64
}

func newWireReader(b []byte, budget int64) wireReader {
	return wireReader{b: b, left: budget, budget: budget}
}

// fail returns err; the struct decoders name the field it happened in
// (wireStruct), so nothing is spent on names while decoding succeeds.
func (r *wireReader) fail(err error) error { return err }

// charge spends count×size bytes of the budget, or says what did not fit.
func (r *wireReader) charge(count, size int64, what string) error {
	if size > 0 && count > r.left/size {
		r.left = -1
		if count > 1 {
			what = fmt.Sprintf("%s of %d entries", what, count)
		}
		return &overBudget{budget: r.budget, what: what}
	}
	r.left -= count * size
	return nil
}

func (r *wireReader) byte() (byte, error) {
	if r.pos >= len(r.b) {
		return 0, r.fail(errTruncated)
	}
	c := r.b[r.pos]
	r.pos++
	return c, nil
}

// big reads an n-byte big-endian number.
func (r *wireReader) big(n int) (uint64, error) {
	if n > len(r.b)-r.pos {
		return 0, r.fail(errTruncated)
	}
	var v uint64
	for _, c := range r.b[r.pos : r.pos+n] {
		v = v<<8 | uint64(c)
	}
	r.pos += n
	return v, nil
}

// nil consumes a msgpack nil if one is next.
func (r *wireReader) nil() bool {
	if r.pos < len(r.b) && r.b[r.pos] == mpNil {
		r.pos++
		return true
	}
	return false
}

// length reads a map or array header (of the kind fix, with its 16 and
// 32-bit type bytes); nil is length -1. Every entry takes at least one
// byte, so a length the bytes left cannot hold is refused at once.
func (r *wireReader) length(fix byte, t16, t32 byte, perEntry int) (int, error) {
	c, err := r.byte()
	if err != nil {
		return 0, err
	}
	var n uint64
	switch {
	case c == mpNil:
		return -1, nil
	case c&0xf0 == fix:
		n = uint64(c & 0x0f)
	case c == t16:
		n, err = r.big(2)
	case c == t32:
		n, err = r.big(4)
	default:
		return 0, r.fail(fmt.Errorf("%w 0x%02x", errWireType, c))
	}
	if err != nil {
		return 0, err
	}
	if n > uint64(len(r.b)-r.pos)/uint64(perEntry) {
		return 0, r.fail(errTruncated)
	}
	return int(n), nil
}

// mapLen reads a map header: its entry count, or -1 for nil.
func (r *wireReader) mapLen() (int, error) { return r.length(0x80, mpMap16, mpMap32, 2) }

// arrayLen reads an array header: its element count, or -1 for nil.
func (r *wireReader) arrayLen() (int, error) { return r.length(0x90, mpArr16, mpArr32, 1) }

// strBytes reads a str or bin value's bytes (nil: none), without copying.
func (r *wireReader) strBytes() ([]byte, error) {
	c, err := r.byte()
	if err != nil {
		return nil, err
	}
	var n uint64
	switch {
	case c == mpNil:
		return nil, nil
	case c&0xe0 == 0xa0:
		n = uint64(c & 0x1f)
	case c == mpStr8 || c == mpBin8:
		n, err = r.big(1)
	case c == mpStr16 || c == mpBin16:
		n, err = r.big(2)
	case c == mpStr32 || c == mpBin32:
		n, err = r.big(4)
	default:
		return nil, r.fail(fmt.Errorf("%w 0x%02x for a string", errWireType, c))
	}
	if err != nil {
		return nil, err
	}
	if n > uint64(len(r.b)-r.pos) {
		return nil, r.fail(errTruncated)
	}
	s := r.b[r.pos : r.pos+int(n)]
	r.pos += int(n)
	return s, nil
}

// key reads a map key, without copying.
func (r *wireReader) key() ([]byte, error) { return r.strBytes() }

// str reads a string (nil: empty), charging its length.
func (r *wireReader) str() (string, error) {
	s, err := r.strBytes()
	if err != nil || len(s) == 0 {
		return "", err
	}
	if err := r.charge(1, int64(len(s)), "string"); err != nil {
		return "", err
	}
	return string(s), nil
}

// bin reads a byte slice (a copy; nil stays nil), charging its length.
func (r *wireReader) bin() ([]byte, error) {
	if r.nil() {
		return nil, nil
	}
	v, err := r.strBytes()
	if err != nil {
		return nil, err
	}
	if err := r.charge(1, int64(len(v)), "[]byte"); err != nil {
		return nil, err
	}
	return append([]byte{}, v...), nil
}

// strings reads a string slice (nil stays nil).
func (r *wireReader) strings() ([]string, error) {
	n, err := r.arrayLen()
	if err != nil || n < 0 {
		return nil, err
	}
	if err := r.charge(int64(n), 16, "[]string"); err != nil {
		return nil, err
	}
	out := make([]string, n)
	for i := range out {
		if out[i], err = r.str(); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// int reads any msgpack integer that fits an int64 (nil: 0).
func (r *wireReader) int() (int64, error) {
	c, err := r.byte()
	if err != nil {
		return 0, err
	}
	switch {
	case c <= 0x7f:
		return int64(c), nil
	case c >= 0xe0:
		return int64(int8(c)), nil
	case c == mpNil:
		return 0, nil
	}
	var v uint64
	switch c {
	case mpUint8, mpInt8:
		v, err = r.big(1)
	case mpUint16, mpInt16:
		v, err = r.big(2)
	case mpUint32, mpInt32:
		v, err = r.big(4)
	case mpUint64, mpInt64:
		v, err = r.big(8)
	default:
		return 0, r.fail(fmt.Errorf("%w 0x%02x for an integer", errWireType, c))
	}
	if err != nil {
		return 0, err
	}
	switch c {
	case mpInt8:
		return int64(int8(v)), nil
	case mpInt16:
		return int64(int16(v)), nil
	case mpInt32:
		return int64(int32(v)), nil
	case mpInt64:
		return int64(v), nil
	case mpUint64:
		if v > math.MaxInt64 {
			return 0, r.fail(fmt.Errorf("integer %d overflows int64", v))
		}
	}
	return int64(v), nil
}

// uint reads a non-negative msgpack integer (nil: 0).
func (r *wireReader) uint() (uint64, error) {
	if r.pos < len(r.b) && r.b[r.pos] == mpUint64 {
		r.pos++
		return r.big(8)
	}
	v, err := r.int()
	if err == nil && v < 0 {
		return 0, r.fail(fmt.Errorf("negative integer %d for an unsigned field", v))
	}
	return uint64(v), err
}

// intOf reads an integer that must fit the bits of a narrower type.
func (r *wireReader) intOf(bits uint) (int64, error) {
	v, err := r.int()
	if err == nil && bits < 64 && (v < -1<<(bits-1) || v > 1<<(bits-1)-1) {
		return 0, r.fail(fmt.Errorf("integer %d overflows int%d", v, bits))
	}
	return v, err
}

func (r *wireReader) uintOf(bits uint) (uint64, error) {
	v, err := r.uint()
	if err == nil && bits < 64 && v > 1<<bits-1 {
		return 0, r.fail(fmt.Errorf("integer %d overflows uint%d", v, bits))
	}
	return v, err
}

// bool reads a msgpack bool (nil: false).
func (r *wireReader) bool() (bool, error) {
	c, err := r.byte()
	switch {
	case err != nil:
		return false, err
	case c == mpTrue:
		return true, nil
	case c == mpFalse, c == mpNil:
		return false, nil
	}
	return false, r.fail(fmt.Errorf("%w 0x%02x for a bool", errWireType, c))
}

// skip passes over one value of any type: a field this side does not know.
func (r *wireReader) skip() error {
	var s msgpackscan.Scanner
	s.Reset(len(r.b) - r.pos)
	n, done, err := s.Scan(r.b[r.pos:])
	if err != nil {
		return r.fail(err)
	}
	if !done {
		return r.fail(errTruncated)
	}
	r.pos += n
	return nil
}

// reflected decodes the next value into out with the reflection codec,
// charged as checkDecodeCost charges it: for the rarely sent parts of a
// hand-decoded message.
func (r *wireReader) reflected(out any, what string) error {
	start := r.pos
	if err := r.skip(); err != nil {
		return err
	}
	raw := r.b[start:r.pos]
	cost, err := checkDecodeCost(raw, typeOfPointee(out), r.left)
	if err != nil {
		var over *overBudget
		if errors.As(err, &over) {
			return &overBudget{budget: r.budget, what: what}
		}
		return r.fail(err)
	}
	r.left -= cost
	if err := decodeBytes(raw, out); err != nil {
		return r.fail(err)
	}
	return nil
}

// decodeWire decodes raw, one whole msgpack value, into v within budget.
// It must use every byte.
func decodeWire(raw []byte, v wireDecoder, budget int64) error {
	r := newWireReader(raw, budget)
	if err := v.decodeMsgpack(&r); err != nil {
		return err
	}
	if r.pos != len(raw) {
		return fmt.Errorf("%d bytes after the value", len(raw)-r.pos)
	}
	return nil
}

// wireStruct decodes a map into a struct: each key is handed to field,
// which decodes a known key's value and reports whether it knew it;
// unknown keys' values are skipped. A nil map leaves the struct as it is.
// An error is prefixed with the key it happened under.
func (r *wireReader) wireStruct(field func(key []byte) (bool, error)) error {
	n, err := r.mapLen()
	if err != nil || n < 0 {
		return err
	}
	for range n {
		k, err := r.key()
		if err != nil {
			return err
		}
		if len(k) == 0 {
			return errEmptyKey // no weft type has one; the reflection codec refuses it too
		}
		known, err := field(k)
		if err == nil && !known {
			err = r.skip()
		}
		if err != nil {
			var over *overBudget
			if errors.As(err, &over) {
				return err // says what took the budget; the field adds nothing
			}
			return fmt.Errorf("%s: %w", k, err)
		}
	}
	return nil
}

// typeOfPointee is the type out points to.
func typeOfPointee(out any) reflect.Type {
	t := reflect.TypeOf(out)
	if t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	return t
}
