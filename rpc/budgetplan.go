package rpc

import (
	"encoding"
	"fmt"
	"reflect"
	"strings"
	"sync"
	"time"

	"github.com/hashicorp/go-msgpack/v2/codec"
)

// Plans: how values of each Go type decode, worked out once per type from
// the type and the codec's rules, for checkDecodeCost (budget.go).

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

var (
	anyPlan    = &plan{t: reflect.TypeOf((*any)(nil)).Elem(), kind: kindAny, size: 16}
	scalarPlan = &plan{t: reflect.TypeOf(uint8(0)), kind: kindScalar, size: 1}
)
