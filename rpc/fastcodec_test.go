package rpc

import (
	"bytes"
	"errors"
	"math"
	"math/rand/v2"
	"net/rpc"
	"reflect"
	"strings"
	"testing"
)

// wireTypes are the types with hand-written codecs, each a fresh pointer.
var wireTypes = []func() any{
	func() any { return new(HeartbeatRequest) },
	func() any { return new(HeartbeatResponse) },
	func() any { return new(HeartbeatBatchRequest) },
	func() any { return new(HeartbeatBatchResponse) },
	func() any { return new(ContainerReport) },
	func() any { return new(NodeLoad) },
}

// fill sets every field of v (a pointer) to random values, recursively:
// a field added to a type is filled too, so a codec that misses it fails
// the comparisons below.
func fill(rng *rand.Rand, v reflect.Value, depth int) {
	switch v.Kind() {
	case reflect.Pointer:
		if rng.IntN(3) == 0 {
			v.Set(reflect.Zero(v.Type()))
			return
		}
		v.Set(reflect.New(v.Type().Elem()))
		fill(rng, v.Elem(), depth)
	case reflect.Struct:
		for i := range v.NumField() {
			f := v.Type().Field(i)
			if !f.IsExported() {
				continue
			}
			fill(rng, v.Field(i), depth)
			// An empty slice left out (omitempty) comes back nil.
			if fv := v.Field(i); fv.Kind() == reflect.Slice && fv.Len() == 0 && strings.Contains(f.Tag.Get("codec"), "omitempty") {
				fv.Set(reflect.Zero(fv.Type()))
			}
		}
	case reflect.String:
		v.SetString(randString(rng))
	case reflect.Bool:
		v.SetBool(rng.IntN(2) == 0)
	case reflect.Int, reflect.Int64:
		v.SetInt(randInt(rng, 64))
	case reflect.Int32:
		v.SetInt(randInt(rng, 32))
	case reflect.Uint8:
		v.SetUint(uint64(rng.IntN(256)))
	case reflect.Uint64:
		v.SetUint(randUint(rng, 64))
	case reflect.Uint32:
		v.SetUint(randUint(rng, 32))
	case reflect.Float32, reflect.Float64:
		v.SetFloat(rng.Float64())
	case reflect.Slice:
		if rng.IntN(4) == 0 || depth > 2 {
			v.Set(reflect.Zero(v.Type()))
			return
		}
		n := rng.IntN(4)
		if v.Type().Elem().Kind() == reflect.Uint8 {
			n = rng.IntN(40)
		}
		s := reflect.MakeSlice(v.Type(), n, n)
		for i := range n {
			fill(rng, s.Index(i), depth+1)
		}
		v.Set(s)
	case reflect.Map:
		// An empty map is left out (omitempty) and comes back nil.
		if rng.IntN(2) == 0 {
			v.Set(reflect.Zero(v.Type()))
			return
		}
		m := reflect.MakeMap(v.Type())
		k, e := reflect.New(v.Type().Key()).Elem(), reflect.New(v.Type().Elem()).Elem()
		fill(rng, k, depth+1)
		fill(rng, e, depth+1)
		m.SetMapIndex(k, e)
		v.Set(m)
	default:
		panic("fill: no rule for " + v.Type().String())
	}
}

func randString(rng *rand.Rand) string {
	switch rng.IntN(8) {
	case 0:
		return ""
	case 1:
		return strings.Repeat("x", 32+rng.IntN(224)) // str8
	case 2:
		return strings.Repeat("y", 256+rng.IntN(300)) // str16
	}
	return strings.Repeat("z", 1+rng.IntN(31))
}

// randInt draws integers around every boundary of msgpack's encodings.
func randInt(rng *rand.Rand, bits uint) int64 {
	edges := []int64{0, 1, -1, 31, -32, -33, 127, 128, -128, -129, 255, 256, math.MaxInt16, math.MaxInt16 + 1,
		math.MinInt16, math.MinInt16 - 1, math.MaxUint16, math.MaxInt32, math.MaxInt32 + 1, math.MinInt32,
		math.MinInt32 - 1, math.MaxInt64, math.MinInt64}
	v := edges[rng.IntN(len(edges))]
	if rng.IntN(2) == 0 {
		v = rng.Int64() >> rng.IntN(64)
		if rng.IntN(2) == 0 {
			v = -v
		}
	}
	if bits < 64 {
		v = int64(int32(v))
	}
	return v
}

func randUint(rng *rand.Rand, bits uint) uint64 {
	edges := []uint64{0, 1, 127, 128, 255, 256, math.MaxUint16, math.MaxUint16 + 1, math.MaxUint32, math.MaxUint32 + 1, math.MaxUint64}
	v := edges[rng.IntN(len(edges))]
	if rng.IntN(2) == 0 {
		v = rng.Uint64() >> rng.IntN(64)
	}
	if bits < 64 {
		v = uint64(uint32(v))
	}
	return v
}

// hasBigMap reports whether v holds a map of more than one entry, whose
// order the reflection codec leaves to Go's map iteration.
func hasBigMap(v reflect.Value) bool {
	switch v.Kind() {
	case reflect.Pointer, reflect.Interface:
		return !v.IsNil() && hasBigMap(v.Elem())
	case reflect.Struct:
		for i := range v.NumField() {
			if v.Type().Field(i).IsExported() && hasBigMap(v.Field(i)) {
				return true
			}
		}
	case reflect.Slice:
		for i := range v.Len() {
			if hasBigMap(v.Index(i)) {
				return true
			}
		}
	case reflect.Map:
		return v.Len() > 1
	}
	return false
}

// TestWireMatchesReflection checks the hand-written codecs against the
// reflection codec on random values: the same bytes out, and each side
// decodes what the other wrote to the value it started from.
func TestWireMatchesReflection(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for _, mk := range wireTypes {
		for i := range 400 {
			v := mk()
			fill(rng, reflect.ValueOf(v).Elem(), 0)
			want, err := Encode(v)
			if err != nil {
				t.Fatal(err)
			}
			got := v.(wireEncoder).appendMsgpack(nil)
			if !hasBigMap(reflect.ValueOf(v)) && !bytes.Equal(got, want) {
				t.Fatalf("%T #%d: hand-written encoding differs from the reflection codec's\n got %x\nwant %x", v, i, got, want)
			}
			back := mk()
			if err := decodeWire(want, back.(wireDecoder), math.MaxInt64); err != nil {
				t.Fatalf("%T #%d: decoding the reflection codec's bytes: %v", v, i, err)
			}
			if !reflect.DeepEqual(back, v) {
				t.Fatalf("%T #%d: hand-written decoder read\n%+v\nwant\n%+v", v, i, back, v)
			}
			back = mk()
			if err := Decode(got, back); err != nil {
				t.Fatalf("%T #%d: the reflection codec cannot read the hand-written bytes: %v", v, i, err)
			}
			if !reflect.DeepEqual(back, v) {
				t.Fatalf("%T #%d: reflection decoder read the hand-written bytes as\n%+v\nwant\n%+v", v, i, back, v)
			}
		}
	}
}

func TestWireHeadersMatchReflection(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	for i := range 200 {
		req := rpc.Request{ServiceMethod: randString(rng), Seq: randUint(rng, 64)}
		resp := rpc.Response{ServiceMethod: randString(rng), Seq: randUint(rng, 64), Error: randString(rng)}
		want, _ := Encode(&req)
		if got := appendRequestHeader(nil, &req, ""); !bytes.Equal(got, want) {
			t.Fatalf("request header #%d: got %x want %x", i, got, want)
		}
		var req2 rpc.Request
		var token string
		r := newWireReader(want, math.MaxInt64)
		if err := decodeRequestHeader(&r, &req2, &token); err != nil || req2 != req || token != "" {
			t.Fatalf("request header #%d: decoded %+v %q, %v; want %+v", i, req2, token, err, req)
		}
		// With a credential: the reflection codec's bytes for weft's
		// header, which older peers read as rpc.Request.
		cred := randString(rng)
		want, _ = Encode(&wireRequestHeader{AuthToken: cred, Seq: req.Seq, ServiceMethod: req.ServiceMethod})
		if got := appendRequestHeader(nil, &req, cred); !bytes.Equal(got, want) {
			t.Fatalf("request header with a credential #%d: got %x want %x", i, got, want)
		}
		var old rpc.Request
		if err := Decode(want, &old); err != nil || old != req {
			t.Fatalf("request header with a credential #%d: an older peer reads %+v, %v", i, old, err)
		}
		r = newWireReader(want, math.MaxInt64)
		if err := decodeRequestHeader(&r, &req2, &token); err != nil || req2 != req || token != cred {
			t.Fatalf("request header with a credential #%d: decoded %+v %q, %v", i, req2, token, err)
		}
		want, _ = Encode(&resp)
		if got := appendResponseHeader(nil, &resp); !bytes.Equal(got, want) {
			t.Fatalf("response header #%d: got %x want %x", i, got, want)
		}
		var resp2 rpc.Response
		r = newWireReader(want, math.MaxInt64)
		if err := decodeResponseHeader(&r, &resp2); err != nil || resp2 != resp {
			t.Fatalf("response header #%d: decoded %+v, %v; want %+v", i, resp2, err, resp)
		}
	}
}

// TestWireDecoderSkipsUnknownFieldsAndTakesAnyIntegerForm: a peer of
// another version may send fields this one lacks, and integers in any of
// msgpack's forms.
func TestWireDecoderSkipsUnknownFieldsAndTakesAnyIntegerForm(t *testing.T) {
	b := appendMapHeader(nil, 4)
	b = appendStr(b, "node_id")
	b = appendStr(b, "n1")
	b = appendStr(b, "from_the_future")
	b = appendMapHeader(b, 1)
	b = appendStr(b, "x")
	b = appendArrayHeader(b, 2)
	b = appendInt(b, 1)
	b = appendStr(b, "two")
	b = appendStr(b, "epoch")
	b = append(b, mpUint64, 0, 0, 0, 0, 0, 0, 0, 9) // 9 as a uint64
	b = appendStr(b, "least_loaded_at")
	b = append(b, mpInt32, 0, 0, 0, 5)
	var h HeartbeatRequest
	if err := decodeWire(b, &h, math.MaxInt64); err != nil {
		t.Fatal(err)
	}
	if h.NodeID != "n1" || h.Epoch != 9 || h.LeastLoadedAt != 5 {
		t.Fatalf("decoded %+v", h)
	}
}

// TestWireDecoderNamesTheFieldAndRefusesWrongTypes: a bad value is an
// error naming where it was, never a panic or a silent zero.
func TestWireDecoderNamesTheFieldAndRefusesWrongTypes(t *testing.T) {
	req := HeartbeatRequest{NodeID: "n1", Containers: []ContainerReport{{ID: "c1"}}}
	good := req.appendMsgpack(nil)
	// epoch set to a string
	bad := bytes.Replace(good, append(appendStr(nil, "epoch"), 0x00), append(appendStr(nil, "epoch"), appendStr(nil, "x")...), 1)
	var h HeartbeatRequest
	err := decodeWire(bad, &h, math.MaxInt64)
	if err == nil || !strings.Contains(err.Error(), "epoch") || !errors.Is(err, errWireType) {
		t.Fatalf("a string for epoch: got %v", err)
	}
	// a container's state set to an integer
	bad = bytes.Replace(good, append(appendStr(nil, "state"), 0xa0), append(appendStr(nil, "state"), 0x05), 1)
	h = HeartbeatRequest{}
	err = decodeWire(bad, &h, math.MaxInt64)
	if err == nil || !strings.Contains(err.Error(), "containers") && !strings.Contains(err.Error(), "state") {
		t.Fatalf("an integer for a state: got %v", err)
	}
	// every truncation of a good message is an error, never a panic
	for i := range len(good) {
		h = HeartbeatRequest{}
		if err := decodeWire(good[:i], &h, math.MaxInt64); err == nil {
			t.Fatalf("a message cut to %d of %d bytes decoded", i, len(good))
		}
	}
}

// TestWireDecoderChargesTheBudget: many tiny elements cost what they
// allocate, not what they take on the wire, as checkDecodeCost charges.
func TestWireDecoderChargesTheBudget(t *testing.T) {
	b := appendMapHeader(nil, 1)
	b = appendStr(b, "containers")
	b = appendArrayHeader(b, 10_000)
	for range 10_000 {
		b = appendMapHeader(b, 0) // one byte each, a ContainerReport each
	}
	var h HeartbeatRequest
	var over *overBudget
	budget := int64(len(b) * 10)
	if err := decodeWire(b, &h, budget); !errors.As(err, &over) {
		t.Fatalf("10,000 empty reports in %d bytes within a budget of %d: got %v, want over budget", len(b), budget, err)
	}
	reflectCost, err := checkDecodeCost(b, reflect.TypeOf(h), math.MaxInt64)
	if err != nil {
		t.Fatal(err)
	}
	r := newWireReader(b, math.MaxInt64)
	if err := h.decodeMsgpack(&r); err != nil {
		t.Fatal(err)
	}
	if got := math.MaxInt64 - r.left; got < reflectCost {
		t.Fatalf("hand decoder charged %d, less than checkDecodeCost's %d", got, reflectCost)
	}
}

// FuzzFastCodec decodes arbitrary bytes with each hand-written decoder
// and with the reflection codec: the hand-written one never panics, and
// what it accepts the reflection codec accepts too, as the same value —
// so it is never the more permissive door into a server.
func FuzzFastCodec(f *testing.F) {
	rng := rand.New(rand.NewPCG(5, 6))
	for i, mk := range wireTypes {
		v := mk()
		fill(rng, reflect.ValueOf(v).Elem(), 0)
		f.Add(uint8(i), v.(wireEncoder).appendMsgpack(nil))
		f.Add(uint8(i), mk().(wireEncoder).appendMsgpack(nil))
	}
	f.Fuzz(func(t *testing.T, which uint8, data []byte) {
		mk := wireTypes[int(which)%len(wireTypes)]
		hand := mk()
		if err := decodeWire(data, hand.(wireDecoder), MaxRequestSize); err != nil {
			return
		}
		refl := mk()
		if _, err := checkDecodeCost(data, typeOfPointee(refl), MaxRequestSize); err != nil {
			t.Fatalf("%T: the hand-written decoder took what checkDecodeCost refuses: %v", hand, err)
		}
		if err := decodeBytes(data, refl); err != nil {
			t.Fatalf("%T: the hand-written decoder took what the reflection codec refuses: %v", hand, err)
		}
		if !reflect.DeepEqual(hand, refl) {
			t.Fatalf("%T decoded differently:\nhand %+v\nrefl %+v", hand, hand, refl)
		}
	})
}
