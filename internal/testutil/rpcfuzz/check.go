package rpcfuzz

import (
	"bufio"
	"os"
	"path/filepath"
	"reflect"
	"runtime"
	"strings"
	"testing"

	"github.com/weft-sched/weft/rpc"
)

// CheckRequestTypesFuzzed fails the test unless every method registered on
// srv takes a request type of package rpc that rpc's fuzz targets decode:
// one listed in rpc/testdata/request_types.txt. A new method with a new
// request type fails here until the type is added to that list and to
// rpc's fuzz_test.go.
func CheckRequestTypesFuzzed(t testing.TB, srv *rpc.Server) {
	t.Helper()
	_, here, _, _ := runtime.Caller(0)
	path := filepath.Join(filepath.Dir(here), "..", "..", "..", "rpc", "testdata", "request_types.txt")
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	listed := map[string]bool{}
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if line := strings.TrimSpace(sc.Text()); line != "" && !strings.HasPrefix(line, "#") {
			listed[line] = true
		}
	}
	rpcPkg := reflect.TypeOf(rpc.RequestHeader{}).PkgPath()
	methods := srv.Methods()
	if len(methods) == 0 {
		t.Fatal("no methods registered")
	}
	for _, m := range methods {
		typ := srv.RequestType(m)
		if typ.PkgPath() != rpcPkg || !listed[typ.Name()] {
			t.Errorf("method %s takes %v, which rpc's fuzz targets do not decode: add it to rpc/testdata/request_types.txt and rpc/fuzz_test.go", m, typ)
		}
	}
}
