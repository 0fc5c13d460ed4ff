package rpc

import (
	"bufio"
	"bytes"
	"context"
	"math/rand"
	"os"
	"reflect"
	"runtime"
	"slices"
	"strings"
	"testing"

	"github.com/hashicorp/go-msgpack/v2/codec"
)

// requestTypes is every request type of testdata/request_types.txt, by
// name.
var requestTypes = map[string]reflect.Type{}

func init() {
	for _, v := range []any{
		ACLAuthorizeRequest{}, ACLBootstrapRequest{}, ACLPolicyApplyRequest{}, ACLPolicyRequest{}, ACLTokenCreateRequest{}, ACLTokenRequest{},
		NodeResetSecretRequest{}, JoinTokenCreateRequest{}, KeyringRequest{}, GossipKeyringRequest{}, AMAllocateRequest{}, AMFinishRequest{}, AMRegisterRequest{}, AppListRequest{}, AppRequest{},
		AppSubmitRequest{}, ContainerIDRequest{}, ContainerListRequest{}, ContainerLogsRequest{}, ContainerOutputRequest{},
		ContainerStartRequest{}, ContainerStatusRequest{}, HeartbeatRequest{}, HeartbeatBatchRequest{}, NodeDeregisterRequest{},
		NodeRegisterRequest{}, NodeStatusRequest{}, QueueApplyRequest{}, QueueListRequest{},
		QueueStatusRequest{}, RaftRemovePeerRequest{}, RequestHeader{}, NodeDrainRequest{}, NodeListRequest{},
		FederationHeartbeatRequest{}, FederationPolicyApplyRequest{}, FederationPolicyListRequest{}, FederationSubclusterAdminRequest{},
		FederationSubclustersRequest{}, FederationSplitViewRequest{}, FederationResolveNodesRequest{}, NodeWhichRequest{},
		AMVerifyRequest{}, AppSubmitUnmanagedRequest{}, FederationRegisterSpanRequest{},
	} {
		t := reflect.TypeOf(v)
		requestTypes[t.Name()] = t
	}
}

// listedRequestTypes reads testdata/request_types.txt.
func listedRequestTypes(t testing.TB) []string {
	t.Helper()
	f, err := os.Open("testdata/request_types.txt")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var names []string
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if line := strings.TrimSpace(sc.Text()); line != "" && !strings.HasPrefix(line, "#") {
			names = append(names, line)
		}
	}
	return names
}

func TestRequestTypeListMatchesTheFuzzedTypes(t *testing.T) {
	listed := listedRequestTypes(t)
	var known []string
	for name := range requestTypes {
		known = append(known, name)
	}
	slices.Sort(listed)
	slices.Sort(known)
	if !slices.Equal(listed, known) {
		t.Fatalf("testdata/request_types.txt lists %v, fuzz_test.go requestTypes has %v", listed, known)
	}
}

// fuzzServer registers one method per request type; each answers with the
// request it decoded.
func fuzzServer() (*Server, []string) {
	s := NewServer(nil)
	var methods []string
	for name, t := range requestTypes {
		m := "Fuzz." + name
		methods = append(methods, m)
		registerEcho(s, m, t)
	}
	slices.Sort(methods)
	return s, methods
}

func registerEcho(s *Server, name string, t reflect.Type) {
	s.methods[name] = &method{
		capability: CapPublic,
		maxBody:    MaxRequestSize,
		reqType:    t,
		newArgs:    func() any { return reflect.New(t).Interface() },
		call:       func(ctx context.Context, args any) (any, error) { return args, nil },
	}
}

// quickRequest returns a random request of type t, encoded.
func quickRequest(t testing.TB, typ reflect.Type, rng *rand.Rand) []byte {
	return encodeValue(t, randValue(typ, rng, 0).Addr().Interface())
}

// FuzzRequestBodies feeds arbitrary bytes as the body of every request
// type through a server's codec and budget: nothing panics, decoding never
// allocates far past the budget, and whatever decodes encodes again and
// decodes to the same value.
func FuzzRequestBodies(f *testing.F) {
	srv, methods := fuzzServer()
	rng := rand.New(rand.NewSource(1))
	for i, m := range methods {
		typ := requestTypes[strings.TrimPrefix(m, "Fuzz.")]
		f.Add(uint8(i), quickRequest(f, typ, rng))
		f.Add(uint8(i), encodeValue(f, reflect.New(typ).Interface()))
	}
	f.Add(uint8(0), []byte{0xdd, 0x00, 0x7f, 0xff, 0xff})
	f.Add(uint8(1), append([]byte{0x81, 0xa4, 'a', 's', 'k', 's', 0xdd, 0x00, 0x10, 0x00, 0x00}, bytes.Repeat([]byte{0x80}, 1<<12)...))
	f.Fuzz(func(t *testing.T, which uint8, body []byte) {
		method := methods[int(which)%len(methods)]
		typ := srv.methods[method].reqType
		header := encodeValue(t, map[string]any{"ServiceMethod": method, "Seq": 1})
		var out bytes.Buffer
		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		srv.ServeConn(context.Background(), byteConn{bytes.NewReader(append(header, body...)), &out}, nil)
		runtime.ReadMemStats(&after)
		if grew := after.TotalAlloc - before.TotalAlloc; grew > 4*MaxRequestSize {
			t.Fatalf("a %d-byte body allocated %d bytes", len(body), grew)
		}
		// What decoded was answered as is: it encodes and decodes again.
		dec := codec.NewDecoderBytes(out.Bytes(), MsgpackHandle)
		var resp struct {
			ServiceMethod string
			Seq           uint64
			Error         string
		}
		if err := dec.Decode(&resp); err != nil || resp.Error != "" {
			return // refused or malformed: nothing decoded
		}
		first := reflect.New(typ)
		if err := dec.Decode(first.Interface()); err != nil {
			t.Fatalf("a decoded %v did not encode to what decodes: %v", typ, err)
		}
		again := reflect.New(typ)
		if err := Decode(encodeValue(t, first.Interface()), again.Interface()); err != nil {
			t.Fatalf("re-encoded %v does not decode: %v", typ, err)
		}
		if !reflect.DeepEqual(first.Interface(), again.Interface()) {
			t.Fatalf("%v changed across an encode and decode:\n%#v\n%#v", typ, first.Interface(), again.Interface())
		}
	})
}
