package rpc

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"reflect"
	"strings"
	"testing"
)

// Every field of every struct in this package is part of the wire, so it
// names its msgpack name with a codec tag: a JSON name (the CLI's -json
// shape) can then change without changing the protocol, and the other way
// round. Embedded headers and metas are flattened by the codec.
func TestEveryWireFieldHasACodecTag(t *testing.T) {
	// The package's own machinery, never encoded.
	notWire := map[string]bool{"AMClient": true, "Client": true, "ServerOutcome": true, "CallError": true,
		"ConnInfo": true, "Error": true, "TransportError": true, "Pool": true, "Server": true, "Listener": true, "ServerCodec": true,
		"Limits": true}
	fset := token.NewFileSet()
	pkgs, err := parser.ParseDir(fset, ".", func(fi fs.FileInfo) bool {
		return !strings.HasSuffix(fi.Name(), "_test.go")
	}, 0)
	if err != nil {
		t.Fatal(err)
	}
	checked := 0
	for _, pkg := range pkgs {
		ast.Inspect(pkg, func(n ast.Node) bool {
			ts, ok := n.(*ast.TypeSpec)
			if !ok {
				return true
			}
			st, ok := ts.Type.(*ast.StructType)
			if !ok || !ts.Name.IsExported() || notWire[ts.Name.Name] {
				return true
			}
			for _, f := range st.Fields.List {
				if len(f.Names) == 0 || !f.Names[0].IsExported() {
					continue // embedded, or not encoded
				}
				tag := ""
				if f.Tag != nil {
					tag = reflect.StructTag(strings.Trim(f.Tag.Value, "`")).Get("codec")
				}
				if tag == "" {
					t.Errorf("%s.%s has no codec tag: %s", ts.Name.Name, f.Names[0].Name, fset.Position(f.Pos()))
				}
				checked++
			}
			return true
		})
	}
	if checked < 100 {
		t.Fatalf("checked only %d fields: the parse missed the package", checked)
	}
}
