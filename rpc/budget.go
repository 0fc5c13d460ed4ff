package rpc

import (
	"encoding"
	"errors"
	"fmt"
	"reflect"
	"strings"
	"sync"
	"time"

	"github.com/hashicorp/go-msgpack/v2/codec"
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

// planKind is how a Go type decodes.
type planKind uint8

const (
	kindScalar planKind = iota // bool and numbers: decoded in place
	kindString
	kindBytes // a slice of a uint8 kind
	kindSlice
	kindArray // a fixed-size Go array: decoded in place
	kindMap
	kindStruct
	kindPtr
	kindAny     // an interface: the codec picks the type from the bytes
	kindEncoded // codec.Raw and time.Time: cost what they hold on the wire
)

// plan is how values of one Go type decode, computed once per type.
type plan struct {
	t    reflect.Type
	kind planKind
	size int64 // t.Size()
	elem *plan // slice, array and map elements, pointees
	key  *plan // map keys
	// mapFixed is the cost of an empty map, entry that of one more entry.
	mapFixed, entry int64
	// fields are a struct's fields by wire name; order in the order the
	// codec assigns them from an array; names and order together serve a
	// lookup faster than the map's for a few fields.
	fields map[string]*plan
	order  []*plan
	names  []string
	// embedAlloc is allocated the first time a field inside an embedded
	// pointer to a struct is set.
	embedAlloc int64
}

var (
	plansMu sync.Mutex
	plans   sync.Map // reflect.Type → *plan
)

var (
	rawType      = reflect.TypeOf(codec.Raw(nil))
	timeType     = reflect.TypeOf(time.Time{})
	selferType   = reflect.TypeOf((*codec.Selfer)(nil)).Elem()
	missingType  = reflect.TypeOf((*codec.MissingFielder)(nil)).Elem()
	binMarshal   = reflect.TypeOf((*encoding.BinaryMarshaler)(nil)).Elem()
	binUnmarshal = reflect.TypeOf((*encoding.BinaryUnmarshaler)(nil)).Elem()
)

// planFor returns the plan of t, building it (and those of the types it
// holds) on first use. A type whose decoding runs its own code (codec
// Selfer, binary unmarshalers, MissingFielder) has no plan: what it
// allocates cannot be bounded from outside.
func planFor(t reflect.Type) (*plan, error) {
	if p, ok := plans.Load(t); ok {
		return p.(*plan), nil
	}
	plansMu.Lock()
	defer plansMu.Unlock()
	b := planBuilder{building: map[reflect.Type]*plan{}}
	p, err := b.build(t)
	if err != nil {
		return nil, err
	}
	for t, p := range b.building {
		plans.Store(t, p)
	}
	return p, nil
}

type planBuilder struct {
	building map[reflect.Type]*plan
}

func implements(t, iface reflect.Type) bool {
	return t.Implements(iface) || reflect.PointerTo(t).Implements(iface)
}

func (b *planBuilder) build(t reflect.Type) (*plan, error) {
	if p, ok := plans.Load(t); ok {
		return p.(*plan), nil
	}
	if p, ok := b.building[t]; ok {
		return p, nil // a recursive type: filled in below
	}
	p := &plan{t: t, size: int64(t.Size())}
	b.building[t] = p
	switch {
	case t == rawType || t == timeType:
		p.kind = kindEncoded
		return p, nil
	case implements(t, selferType):
		return nil, fmt.Errorf("rpc: cannot bound the decoding of %v: it decodes itself (codec.Selfer)", t)
	case implements(t, binMarshal) && implements(t, binUnmarshal):
		return nil, fmt.Errorf("rpc: cannot bound the decoding of %v: it is an encoding.BinaryUnmarshaler", t)
	case t.Kind() == reflect.Struct && implements(t, missingType):
		return nil, fmt.Errorf("rpc: cannot bound the decoding of %v: it keeps unknown fields (codec.MissingFielder)", t)
	}
	var err error
	switch t.Kind() {
	case reflect.String:
		p.kind = kindString
	case reflect.Slice, reflect.Chan:
		if t.Elem().Kind() == reflect.Uint8 && t.Kind() == reflect.Slice {
			p.kind = kindBytes
			break
		}
		p.kind = kindSlice
		p.elem, err = b.build(t.Elem())
	case reflect.Array:
		p.kind = kindArray
		p.elem, err = b.build(t.Elem())
	case reflect.Map:
		p.kind = kindMap
		p.mapFixed, p.entry = mapCost(int64(t.Key().Size()), int64(t.Elem().Size()))
		if p.key, err = b.build(t.Key()); err == nil {
			p.elem, err = b.build(t.Elem())
		}
	case reflect.Pointer:
		p.kind = kindPtr
		p.elem, err = b.build(t.Elem())
	case reflect.Interface:
		p.kind = kindAny
	case reflect.Struct:
		p.kind = kindStruct
		err = b.structFields(p)
	default:
		p.kind = kindScalar
	}
	if err != nil {
		return nil, err
	}
	return p, nil
}

// mapCost is what a map with keys and values of these sizes costs empty,
// and per entry.
func mapCost(key, value int64) (fixed, entry int64) {
	slot := key + value + 1
	return mapHeaderCost + mapGroupSlots*slot, 2 * slot
}

// wireField is one struct field as the codec sees it.
type wireField struct {
	name  string
	depth int
	t     reflect.Type
}

// structFields resolves a struct's fields the way the codec does: exported
// fields named by their codec (else json) tag or their name, "-" skipped,
// embedded structs without a tag name inlined, and of two fields with one
// name the shallower kept.
func (b *planBuilder) structFields(p *plan) error {
	var fields []wireField
	var embedAlloc int64
	seen := map[reflect.Type]int{}
	var collect func(t reflect.Type, depth int, viaPtr bool)
	collect = func(t reflect.Type, depth int, viaPtr bool) {
		for i := 0; i < t.NumField(); i++ {
			f := t.Field(i)
			switch f.Type.Kind() {
			case reflect.Func, reflect.Complex64, reflect.Complex128, reflect.UnsafePointer:
				continue
			}
			unexported := !f.IsExported()
			if unexported && !f.Anonymous {
				continue
			}
			tag := f.Tag.Get("codec")
			if tag == "" {
				tag = f.Tag.Get("json")
			}
			if tag == "-" {
				continue
			}
			name, _, _ := strings.Cut(tag, ",")
			if f.Anonymous && f.Type.Kind() != reflect.Interface {
				ft, isPtr := f.Type, false
				for ft.Kind() == reflect.Pointer {
					ft, isPtr = ft.Elem(), true
				}
				isStruct := ft.Kind() == reflect.Struct
				if unexported && (!isStruct || isPtr) {
					continue
				}
				if name == "" && isStruct {
					if seen[ft]++; seen[ft] < 2 {
						if isPtr {
							embedAlloc += int64(ft.Size())
						}
						collect(ft, depth+1, viaPtr || isPtr)
					}
					continue
				}
			}
			if unexported {
				continue
			}
			if name == "" {
				name = f.Name
			}
			fields = append(fields, wireField{name: name, depth: depth, t: f.Type})
		}
	}
	collect(p.t, 0, false)

	// Of fields sharing a name, the shallowest wins.
	best := map[string]int{}
	for i, f := range fields {
		if j, ok := best[f.name]; !ok || f.depth < fields[j].depth {
			best[f.name] = i
		}
	}
	p.fields = make(map[string]*plan, len(best))
	p.embedAlloc = embedAlloc
	for i, f := range fields {
		if best[f.name] != i {
			continue
		}
		fp, err := b.build(f.t)
		if err != nil {
			return fmt.Errorf("%v.%s: %w", p.t, f.name, err)
		}
		p.fields[f.name] = fp
		p.order = append(p.order, fp)
		p.names = append(p.names, f.name)
	}
	return nil
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

// field returns the plan of a struct's field by wire name, or nil.
func (p *plan) field(name []byte) *plan {
	if len(p.names) > 16 {
		return p.fields[string(name)]
	}
	for i, n := range p.names {
		if n == string(name) {
			return p.order[i]
		}
	}
	return nil
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

var (
	anyPlan    = &plan{t: reflect.TypeOf((*any)(nil)).Elem(), kind: kindAny, size: 16}
	scalarPlan = &plan{t: reflect.TypeOf(uint8(0)), kind: kindScalar, size: 1}
)
