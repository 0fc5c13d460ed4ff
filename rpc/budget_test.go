package rpc

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math/rand"
	"net"
	"net/rpc"
	"reflect"
	"runtime"
	"sort"
	"strings"
	"testing"

	"github.com/hashicorp/go-msgpack/v2/codec"
	"github.com/weft-sched/weft/scheduler"
)

// measureAlloc returns the bytes fn allocates.
func measureAlloc(fn func()) uint64 {
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	fn()
	runtime.ReadMemStats(&after)
	return after.TotalAlloc - before.TotalAlloc
}

// arrayOf encodes {key: [n × elem]} as a msgpack map with an array32.
func arrayOf(key string, n int, elem []byte) []byte {
	b := []byte{0x81, 0xd9, byte(len(key))}
	b = append(b, key...)
	b = append(b, 0xdd, byte(n>>24), byte(n>>16), byte(n>>8), byte(n))
	return append(b, bytes.Repeat(elem, n)...)
}

type costShape struct {
	Items   []EchoItem                     `codec:"items"`
	Ptrs    []*EchoItem                    `codec:"ptrs"`
	Strs    []string                       `codec:"strs"`
	Tags    map[string]string              `codec:"tags"`
	Nested  map[string][]int64             `codec:"nested"`
	Any     []any                          `codec:"any"`
	Reports []ContainerReport              `codec:"reports"`
	Res     map[string]scheduler.Resources `codec:"res"`
}

// The cost checkDecodeCost charges is what decoding allocates, within a
// factor of two, whatever the shape.
func TestDecodeCostBoundsWhatDecodingAllocates(t *testing.T) {
	bigMap := map[string]string{}
	res := map[string]scheduler.Resources{}
	nested := map[string][]int64{}
	for i := 0; i < 20000; i++ {
		bigMap[fmt.Sprint(i)] = "v"
		res[fmt.Sprint(i)] = scheduler.Resources{MemoryMB: 1}
		nested[fmt.Sprint(i)] = []int64{1, 2}
	}
	anys := make([]any, 50000)
	for i := range anys {
		anys[i] = map[string]any{"a": []any{1, "x"}}
	}
	inputs := map[string][]byte{
		"empty items":      arrayOf("items", 200000, []byte{0x80}),
		"empty pointers":   arrayOf("ptrs", 200000, []byte{0x80}),
		"nil pointers":     arrayOf("ptrs", 200000, []byte{0xc0}),
		"empty strings":    arrayOf("strs", 200000, []byte{0xa0}),
		"empty reports":    arrayOf("reports", 20000, []byte{0x80}),
		"map of strings":   encodeValue(t, map[string]any{"tags": bigMap}),
		"map of resources": encodeValue(t, map[string]any{"res": res}),
		"map of slices":    encodeValue(t, map[string]any{"nested": nested}),
		"interfaces":       encodeValue(t, map[string]any{"any": anys}),
		"one of each":      encodeValue(t, map[string]any{"tags": map[string]string{"a": "b"}, "items": []any{map[string]any{}}}),
	}
	for name, raw := range inputs {
		cost, err := checkDecodeCost(raw, reflect.TypeOf(costShape{}), 1<<30)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		var out costShape
		var derr error
		alloc := measureAlloc(func() { derr = decodeBytes(raw, &out) })
		if derr != nil {
			t.Fatalf("%s: decode: %v", name, derr)
		}
		t.Logf("%-17s %8d bytes on the wire, cost %9d, decoding allocated %9d (%.2f× the cost)", name, len(raw), cost, alloc, float64(alloc)/float64(cost))
		if alloc > 2*uint64(cost)+64<<10 {
			t.Errorf("%s: decoding allocated %d bytes, more than twice its cost %d", name, alloc, cost)
		}
	}
}

// The attack: 8 MB of empty entries in a heartbeat grew a leader
// by gigabytes. Now it is refused before anything is decoded, the caller
// is told why, and the connection goes on.
func TestEmptyEntriesAttackIsRefusedBeforeDecoding(t *testing.T) {
	ts := startTestServerWith(t, func(s *Server) {
		Register(s, "Node.Heartbeat", CapAgent, func(ctx context.Context, req *HeartbeatRequest, resp *struct{}) error {
			t.Errorf("a heartbeat of %d containers reached the handler", len(req.Containers))
			return nil
		}, MaxBody(MaxRequestSize))
	})
	conn := dialRPC(t, ts.Addr())
	n := MaxRequestSize - 1024 // fits the byte limit
	body := arrayOf("containers", n, []byte{0x80})
	oldCost := uint64(n) * uint64(reflect.TypeOf(ContainerReport{}).Size())
	var err error
	alloc := measureAlloc(func() { err = rawCall(t, conn, "Node.Heartbeat", body) })
	if !errors.Is(err, ErrTooLarge) || !strings.Contains(err.Error(), "[]rpc.ContainerReport of 8387584 entries") {
		t.Fatalf("call = %.200v, want ErrTooLarge naming the slice", err)
	}
	t.Logf("%d bytes on the wire would have decoded to %d MiB; refusing them allocated %d MiB", len(body), oldCost>>20, alloc>>20)
	// The raw bytes, read into a buffer that doubles: far below what
	// decoding would have taken.
	if alloc > 48<<20 || oldCost < 1<<30 {
		t.Fatalf("refusing allocated %d bytes (decoding would have allocated %d)", alloc, oldCost)
	}
	client := rpc.NewClientWithCodec(NewClientCodec(conn))
	var reply EchoReply
	if err := client.Call("Echo.Echo", &EchoArgs{Text: "still here"}, &reply); err != nil || reply.Text != "still here" {
		t.Fatalf("connection after a refused request: %v %+v", err, reply)
	}
}

func TestDecodedValuesDoNotShareTheReadBuffer(t *testing.T) {
	ts := startTestServerWith(t, func(s *Server) {})
	client := rpc.NewClientWithCodec(NewClientCodec(dialRPC(t, ts.Addr())))
	var reply EchoReply
	// Echo.Echo answers with args.Text after the next request has been
	// read into the same pooled buffer; the answers must not mix.
	for i := 0; i < 50; i++ {
		want := strings.Repeat(string(rune('a'+i%26)), 10+i)
		if err := client.Call("Echo.Echo", &EchoArgs{Text: want, Blob: []byte(want)}, &reply); err != nil || reply.Text != want {
			t.Fatalf("call %d: %v, got %q want %q", i, err, reply.Text, want)
		}
	}
}

func TestRegisterRefusesTypesItCannotBound(t *testing.T) {
	defer func() {
		if r := recover(); r == nil || !strings.Contains(fmt.Sprint(r), "decodes itself") {
			t.Fatalf("Register of a codec.Selfer request: panic %v", r)
		}
	}()
	Register(NewServer(nil), "X.Y", CapPublic, func(ctx context.Context, req *selfDecoding, resp *struct{}) error { return nil })
}

type selfDecoding struct{ n int }

func (s *selfDecoding) CodecEncodeSelf(e *codec.Encoder) {}
func (s *selfDecoding) CodecDecodeSelf(d *codec.Decoder) {}

// Every struct field the codec writes is a field the budget knows, by the
// same name; and the budget assigns a struct sent as an array to the same
// fields, in the same order, as the codec does.
func TestBudgetSeesStructsAsTheCodecDoes(t *testing.T) {
	arrays := &codec.MsgpackHandle{}
	arrays.WriteExt, arrays.RawToString, arrays.StructToArray = true, true, true
	rng := rand.New(rand.NewSource(2))
	for name, typ := range requestTypes {
		seen := map[reflect.Type]bool{}
		var check func(t reflect.Type)
		check = func(st reflect.Type) {
			for st.Kind() == reflect.Pointer || st.Kind() == reflect.Slice || st.Kind() == reflect.Map {
				if st.Kind() == reflect.Map {
					check(st.Key())
				}
				st = st.Elem()
			}
			if st.Kind() != reflect.Struct || seen[st] {
				return
			}
			seen[st] = true
			p, err := planFor(st)
			if err != nil {
				t.Fatalf("%s: %v: %v", name, st, err)
			}
			written := map[string]bool{}
			for i := 0; i < 20; i++ {
				var m map[string]codec.Raw
				if err := Decode(encodeValue(t, randValue(st, rng, 0).Interface()), &m); err != nil {
					t.Fatalf("%v: %v", st, err)
				}
				for k := range m {
					written[k] = true
				}
			}
			var planned, wrote []string
			for k := range p.fields {
				planned = append(planned, k)
			}
			for k := range written {
				wrote = append(wrote, k)
			}
			sort.Strings(planned)
			sort.Strings(wrote)
			if !reflect.DeepEqual(planned, wrote) {
				t.Errorf("%s: %v: the budget knows fields %v, the codec writes %v", name, st, planned, wrote)
			}
			for i := 0; i < st.NumField(); i++ {
				check(st.Field(i).Type)
			}
		}
		check(typ)

		for i := 0; i < 20; i++ {
			v := randValue(typ, rng, 0).Interface()
			asMap := encodeValue(t, v)
			var asArray []byte
			if err := codec.NewEncoderBytes(&asArray, arrays).Encode(v); err != nil {
				t.Fatal(err)
			}
			c1, err1 := checkDecodeCost(asMap, typ, 1<<30)
			c2, err2 := checkDecodeCost(asArray, typ, 1<<30)
			if err1 != nil || err2 != nil || c1 != c2 {
				t.Fatalf("%s: cost as a map %d (%v), as an array %d (%v)", name, c1, err1, c2, err2)
			}
		}
	}
}

func TestBudgetRefusesWhatItCannotWalk(t *testing.T) {
	typ := reflect.TypeOf(EchoArgs{})
	cases := map[string][]byte{
		"truncated":       {0x81, 0xa4, 't', 'e', 'x', 't', 0xa5, 'a'},
		"empty extension": {0x81, 0xa4, 't', 'a', 'g', 's', 0xc7, 0x00, 0x01},
		"invalid byte":    {0x81, 0xa4, 't', 'e', 'x', 't', 0xc1},
		"deeper than 64":  append(append([]byte{0x81, 0xa5, 'i', 't', 'e', 'm', 's', 0x91}, bytes.Repeat([]byte{0x81, 0xa4, 'n', 'e', 'x', 't'}, 70)...), 0xc0),
		"numeric map key": {0x81, 0x01, 0x02},
	}
	for name, raw := range cases {
		if _, err := checkDecodeCost(raw, typ, 1<<20); err == nil {
			t.Errorf("%s: accepted", name)
		} else if errors.As(err, new(*overBudget)) {
			t.Errorf("%s: refused as over budget: %v", name, err)
		}
	}
}

// rawCall sends body, as it is, as the body of a call of method on conn
// and returns the server's answer: nil, or the error it answered with.
func rawCall(t testing.TB, conn net.Conn, method string, body []byte) error {
	t.Helper()
	msg := append(encodeValue(t, map[string]any{"ServiceMethod": method, "Seq": 1}), body...)
	if _, err := conn.Write(msg); err != nil {
		return err
	}
	return readAnswer(conn)
}
