package rpc

import (
	"math/rand"
	"reflect"
)

// randValue returns a random value of type t: every field set, slices and
// maps of up to three entries, pointers now and then nil, and nothing
// nested deeper than a few levels (recursive types stay small).
func randValue(t reflect.Type, rng *rand.Rand, depth int) reflect.Value {
	v := reflect.New(t).Elem()
	if depth > 5 {
		return v
	}
	switch t.Kind() {
	case reflect.Bool:
		v.SetBool(rng.Intn(2) == 1)
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		v.SetInt(int64(rng.Uint64()) >> uint(64-t.Bits()) >> uint(rng.Intn(t.Bits())))
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64, reflect.Uintptr:
		v.SetUint(rng.Uint64() >> uint(64-t.Bits()) >> uint(rng.Intn(t.Bits())))
	case reflect.Float32, reflect.Float64:
		v.SetFloat(float64(float32(rng.NormFloat64() * 1000)))
	case reflect.String:
		b := make([]byte, rng.Intn(12))
		for i := range b {
			b[i] = byte('a' + rng.Intn(26))
		}
		v.SetString(string(b))
	case reflect.Slice:
		n := rng.Intn(4)
		if n == 0 && rng.Intn(2) == 0 {
			return v // nil
		}
		s := reflect.MakeSlice(t, n, n)
		for i := 0; i < n; i++ {
			s.Index(i).Set(randValue(t.Elem(), rng, depth+1))
		}
		v.Set(s)
	case reflect.Array:
		for i := 0; i < t.Len(); i++ {
			v.Index(i).Set(randValue(t.Elem(), rng, depth+1))
		}
	case reflect.Map:
		n := rng.Intn(4)
		if n == 0 && rng.Intn(2) == 0 {
			return v
		}
		m := reflect.MakeMapWithSize(t, n)
		for i := 0; i < n; i++ {
			m.SetMapIndex(randValue(t.Key(), rng, depth+1), randValue(t.Elem(), rng, depth+1))
		}
		v.Set(m)
	case reflect.Pointer:
		if rng.Intn(3) == 0 {
			return v
		}
		p := reflect.New(t.Elem())
		p.Elem().Set(randValue(t.Elem(), rng, depth+1))
		v.Set(p)
	case reflect.Struct:
		for i := 0; i < t.NumField(); i++ {
			if t.Field(i).IsExported() {
				v.Field(i).Set(randValue(t.Field(i).Type, rng, depth+1))
			}
		}
	}
	return v
}
