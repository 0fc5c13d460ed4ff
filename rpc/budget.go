package rpc

import (
	"errors"
	"fmt"
	"reflect"
)

// Decoding is bounded by what it allocates, not by the bytes received: a
// msgpack array of a million empty maps is a few megabytes on the wire and
// a million structs in memory. Before a message is decoded into a Go value,
// checkDecodeCost walks its bytes typed by that value's type, the way the
// codec will, and adds up what decoding would allocate: for every slice the
// declared element count times the element's size, for every map its
// entries, for every pointer its pointee, for every string and byte slice
// its length. Map entries the type does not know cost nothing (the codec
// skips them). A message over budget is refused before anything is decoded.
//
// The cost is what the decoded value holds. Once a message is within
// budget it is decoded with every collection allocated whole at its
// declared (and now verified) length, so what decoding allocates is about
// the cost (budget_test.go measures it), never what a message declares.

// Allocation sizes charged where reflect has no size to give.
const (
	// anyCost is what decoding one value into an interface allocates
	// beyond its payload: the boxed value, or a slice or map header.
	anyCost = 32
	// mapHeaderCost is a Go map's header; its first group holds
	// mapGroupSlots entries of key, value and a control byte. A map grows
	// by doubling, so each entry is charged for two slots.
	mapHeaderCost = 48
	mapGroupSlots = 8
)

// errEmptyExt refuses msgpack extensions with no data: the codec would read
// the value after one as part of it, which no weft peer ever sends.
var errEmptyExt = errors.New("msgpack extension with no data")

// errTruncated means the bytes end inside a value.
var errTruncated = errors.New("msgpack value is truncated")

// overBudget says which container took a message over its budget.
type overBudget struct {
	budget int64
	what   string
}

func (e *overBudget) Error() string {
	return fmt.Sprintf("it would decode to more than %d bytes (%s)", e.budget, e.what)
}

// checkDecodeCost returns what decoding raw (one whole msgpack value) into
// a value of type t would allocate, or an *overBudget error once that
// passes budget, or an error if raw is not something weft decodes.
func checkDecodeCost(raw []byte, t reflect.Type, budget int64) (int64, error) {
	p, err := planFor(t)
	if err != nil {
		return 0, err
	}
	w := walker{b: raw, left: budget, budget: budget}
	if err := w.value(p); err != nil {
		return 0, err
	}
	return budget - w.left, nil
}

// walker charges the decoding of one msgpack value against a budget.
type walker struct {
	b      []byte
	pos    int
	left   int64
	budget int64
	depth  int
	name   [64]byte // scratch for struct keys sent as arrays of bytes
}

// msgpack value classes.
const (
	classScalar = iota // nil, bool, numbers: the header is the whole value
	classNil
	classStr // str and bin
	classExt
	classArray
	classMap
)

// head reads a value's header. For strings, binaries and extensions n is
// the payload length (the payload is not skipped); for arrays and maps it
// is the declared count.
func (w *walker) head() (class int, n int, err error) {
	if w.pos >= len(w.b) {
		return 0, 0, errTruncated
	}
	c := w.b[w.pos]
	w.pos++
	switch {
	case c <= 0x7f || c >= 0xe0 || c == 0xc2 || c == 0xc3:
		return classScalar, 0, nil
	case c == 0xc0:
		return classNil, 0, nil
	case c <= 0x8f:
		return classMap, int(c & 0x0f), nil
	case c <= 0x9f:
		return classArray, int(c & 0x0f), nil
	case c <= 0xbf:
		return classStr, int(c & 0x1f), w.need(int(c & 0x1f))
	}
	switch c {
	case 0xca, 0xcb, 0xcc, 0xcd, 0xce, 0xcf, 0xd0, 0xd1, 0xd2, 0xd3:
		return classScalar, 0, w.advance(int(fixedScalar[c-0xca]))
	case 0xd4, 0xd5, 0xd6, 0xd7, 0xd8: // fixext: a type byte, then 1..16 bytes
		n := 1 << (c - 0xd4)
		if err := w.advance(1); err != nil {
			return 0, 0, err
		}
		return classExt, n, w.need(n)
	case 0xc4, 0xd9:
		n, err := w.length(1)
		return classStr, n, both(err, w, n)
	case 0xc5, 0xda:
		n, err := w.length(2)
		return classStr, n, both(err, w, n)
	case 0xc6, 0xdb:
		n, err := w.length(4)
		return classStr, n, both(err, w, n)
	case 0xc7, 0xc8, 0xc9:
		n, err := w.length(1 << (c - 0xc7))
		if err == nil {
			err = w.advance(1) // the extension's type
		}
		if err == nil && n == 0 {
			err = errEmptyExt
		}
		return classExt, n, both(err, w, n)
	case 0xdc:
		n, err := w.length(2)
		return classArray, n, err
	case 0xdd:
		n, err := w.length(4)
		return classArray, n, err
	case 0xde:
		n, err := w.length(2)
		return classMap, n, err
	case 0xdf:
		n, err := w.length(4)
		return classMap, n, err
	}
	return 0, 0, fmt.Errorf("invalid msgpack type byte 0x%02x", c)
}

// fixedScalar is the payload size of the types 0xca..0xd3.
var fixedScalar = [10]uint8{4, 8, 1, 2, 4, 8, 1, 2, 4, 8}

// both returns err, or else whether n payload bytes follow.
func both(err error, w *walker, n int) error {
	if err != nil {
		return err
	}
	return w.need(n)
}

func (w *walker) advance(n int) error {
	if n > len(w.b)-w.pos {
		return errTruncated
	}
	w.pos += n
	return nil
}

// need checks that n payload bytes follow.
func (w *walker) need(n int) error {
	if n > len(w.b)-w.pos {
		return errTruncated
	}
	return nil
}

func (w *walker) length(size int) (int, error) {
	if size > len(w.b)-w.pos {
		return 0, errTruncated
	}
	var n uint64
	for _, c := range w.b[w.pos : w.pos+size] {
		n = n<<8 | uint64(c)
	}
	w.pos += size
	return int(n), nil
}

// charge spends count×size bytes of the budget on what p's type allocates.
func (w *walker) charge(p *plan, count, size int64) error {
	if size > 0 && count > w.left/size {
		w.left = -1
		what := fmt.Sprintf("%v", p.t)
		if count > 1 {
			what = fmt.Sprintf("%v of %d entries", p.t, count)
		}
		return &overBudget{budget: w.budget, what: what}
	}
	w.left -= count * size
	return nil
}

// value walks one value decoded into a value of p's type.
func (w *walker) value(p *plan) error {
	for p.kind == kindPtr {
		if w.pos < len(w.b) && w.b[w.pos] == 0xc0 {
			w.pos++ // nil leaves the pointer nil
			return nil
		}
		if err := w.charge(p, 1, p.elem.size); err != nil {
			return err
		}
		p = p.elem
	}
	if p.kind == kindEncoded {
		start := w.pos
		if err := w.skip(); err != nil {
			return err
		}
		return w.charge(p, 1, int64(w.pos-start))
	}
	class, n, err := w.head()
	if err != nil {
		return err
	}
	switch class {
	case classNil:
		return nil
	case classScalar:
		if p.kind == kindAny {
			return w.charge(p, 1, anyCost)
		}
		return nil
	case classStr, classExt:
		w.pos += n
		cost := int64(n)
		if p.kind == kindAny {
			cost += anyCost
		}
		return w.charge(p, 1, cost)
	}
	if w.depth++; w.depth > int(MsgpackHandle.MaxDepth) {
		return fmt.Errorf("msgpack nesting deeper than %d", MsgpackHandle.MaxDepth)
	}
	defer func() { w.depth-- }()
	if n > len(w.b)-w.pos {
		return errTruncated // every value takes at least a byte
	}
	if class == classArray {
		return w.array(p, n)
	}
	return w.mapValue(p, n)
}

// array walks the n values of an array decoded into p's type.
func (w *walker) array(p *plan, n int) error {
	elem := anyPlan
	switch p.kind {
	case kindSlice:
		if err := w.charge(p, int64(n), p.elem.size); err != nil {
			return err
		}
		elem = p.elem
	case kindArray:
		elem = p.elem
	case kindBytes:
		// The codec reads an array of numbers into a byte slice.
		if err := w.charge(p, int64(n), 1); err != nil {
			return err
		}
		elem = scalarPlan
	case kindString:
		// ... and into a string, through a scratch byte slice.
		if err := w.charge(p, int64(n), 2); err != nil {
			return err
		}
		elem = scalarPlan
	case kindStruct:
		if n > 0 {
			if err := w.charge(p, 1, p.embedAlloc); err != nil {
				return err
			}
		}
		for i := 0; i < n; i++ {
			var err error
			if i < len(p.order) {
				err = w.value(p.order[i])
			} else {
				err = w.skip() // the codec skips values past the last field
			}
			if err != nil {
				return err
			}
		}
		return nil
	case kindAny:
		if err := w.charge(p, int64(n)+1, anyCost); err != nil {
			return err
		}
	default:
		// A scalar or a map cannot be decoded from an array: the codec
		// fails before allocating.
		return w.skipN(n)
	}
	for i := 0; i < n; i++ {
		if err := w.value(elem); err != nil {
			return err
		}
	}
	return nil
}

// mapValue walks the n entries of a map decoded into p's type.
func (w *walker) mapValue(p *plan, n int) error {
	switch p.kind {
	case kindMap:
		if err := w.charge(p, 1, p.mapFixed); err != nil {
			return err
		}
		if err := w.charge(p, int64(n), p.entry); err != nil {
			return err
		}
		for i := 0; i < n; i++ {
			if err := w.value(p.key); err != nil {
				return err
			}
			if err := w.value(p.elem); err != nil {
				return err
			}
		}
		return nil
	case kindStruct:
		if n > 0 {
			if err := w.charge(p, 1, p.embedAlloc); err != nil {
				return err
			}
		}
		for i := 0; i < n; i++ {
			f, err := w.structKey(p)
			if err != nil {
				return err
			}
			if f == nil {
				err = w.skip() // an unknown field costs nothing
			} else {
				err = w.value(f)
			}
			if err != nil {
				return err
			}
		}
		return nil
	case kindSlice, kindBytes:
		// The codec reads a map into a slice as keys and values in turn.
		return w.array(p, 2*n)
	case kindAny: // a map[any]any
		fixed, entry := mapCost(16, 16)
		if err := w.charge(p, 1, fixed+anyCost); err != nil {
			return err
		}
		if err := w.charge(p, int64(n), entry); err != nil {
			return err
		}
		return w.valuesAs(anyPlan, 2*n)
	}
	return w.skipN(2 * n) // nothing else decodes from a map
}

// structKey reads a struct field name and returns the plan of that field,
// or nil if the struct has no such field.
func (w *walker) structKey(p *plan) (*plan, error) {
	start := w.pos
	class, n, err := w.head()
	if err != nil {
		return nil, err
	}
	switch class {
	case classStr:
		name := w.b[w.pos : w.pos+n]
		w.pos += n
		return p.field(name), nil
	case classArray:
		// The codec accepts a name sent as an array of byte values.
		if err := w.charge(p, int64(n), 1); err != nil {
			return nil, err
		}
		if n > len(w.name) {
			return nil, w.skipN(n)
		}
		for i := 0; i < n; i++ {
			class, _, err := w.head()
			if err != nil {
				return nil, err
			}
			if class != classScalar {
				return nil, fmt.Errorf("struct field name is not a string")
			}
			w.name[i] = w.b[w.pos-1] // the low byte; a larger number fails to decode

		}
		return p.field(w.name[:n]), nil
	case classNil:
		return nil, nil
	}
	w.pos = start
	return nil, fmt.Errorf("struct field name is not a string")
}

func (w *walker) valuesAs(p *plan, n int) error {
	for i := 0; i < n; i++ {
		if err := w.value(p); err != nil {
			return err
		}
	}
	return nil
}

// skip passes over one value without charging anything.
func (w *walker) skip() error { return w.skipN(1) }

func (w *walker) skipN(pending int) error {
	for pending > 0 {
		if pending > len(w.b)-w.pos {
			return errTruncated
		}
		class, n, err := w.head()
		if err != nil {
			return err
		}
		pending--
		switch class {
		case classStr, classExt:
			w.pos += n
		case classArray:
			pending += n
		case classMap:
			pending += 2 * n
		}
	}
	return nil
}
