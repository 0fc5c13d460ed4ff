package rpc

import (
	"go/ast"
	"go/parser"
	"go/token"
	"path/filepath"
	"reflect"
	"sort"
	"strconv"
	"strings"
	"testing"

	"github.com/weft-sched/weft/scheduler"
	"github.com/weft-sched/weft/scheduler/federation"
)

// The codec decodes every struct value of a map into one value it reuses
// from entry to entry, and decoding a struct sets only the fields the
// message holds: an entry inherits the fields the one before it left out
// (omitempty), and its maps and slices are decoded into the previous
// entry's, which they then share. Two queues' extended resources came out
// merged. Maps on the wire hold structs by pointer, which the codec
// allocates afresh for each entry.
func TestMapsOfStructsDecodeEachEntryAfresh(t *testing.T) {
	in := FederationHeartbeatRequest{Report: SubclusterReport{ID: "sc1", Queues: map[string]*federation.QueueLoad{
		"root.a": {Used: scheduler.Resources{MemoryMB: 1, Extended: map[string]int64{"gpu": 2}}},
		"root.b": {Used: scheduler.Resources{MemoryMB: 3, Extended: map[string]int64{"fpga": 4}}},
		"root.c": {Used: scheduler.Resources{MemoryMB: 5}},
		"root.d": {Pending: scheduler.Resources{Vcores: 6, Extended: map[string]int64{"gpu": 7}}},
	}}}
	// Go's map order is random, and so is the order the entries are
	// encoded in: try many.
	for range 50 {
		var out FederationHeartbeatRequest
		if err := Decode(encodeValue(t, &in), &out); err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(in, out) {
			for q, load := range out.Report.Queues {
				t.Errorf("%s: %+v, want %+v", q, *load, *in.Report.Queues[q])
			}
			t.FailNow()
		}
	}
}

// wirePackages are the packages whose exported types go over RPC or into
// Raft (the roots), with the packages their fields reach.
var wirePackages = map[string]struct {
	dir  string
	root bool
}{
	"github.com/weft-sched/weft/rpc":                  {".", true},
	"github.com/weft-sched/weft/fsm":                  {"../fsm", true},
	"github.com/weft-sched/weft/router/fedstate":      {"../router/fedstate", true},
	"github.com/weft-sched/weft/scheduler":            {"../scheduler", false},
	"github.com/weft-sched/weft/scheduler/federation": {"../scheduler/federation", false},
	"github.com/weft-sched/weft/internal/identity":    {"../internal/identity", false},
}

// TestNoMapOnTheWireHoldsStructValues keeps the codec's reuse (above) from
// coming back: no exported field reachable from the wire packages' types
// is a map whose values are structs.
func TestNoMapOnTheWireHoldsStructValues(t *testing.T) {
	w := parseWireTypes(t)
	var found []string
	var roots []typeRef
	for ref := range w.types {
		if wirePackages[ref.pkg].root && ast.IsExported(ref.name) {
			roots = append(roots, ref)
		}
	}
	seen := map[typeRef]bool{}
	for _, ref := range roots {
		w.walk(ref, seen, func(where string) { found = append(found, where) })
	}
	sort.Strings(found)
	for _, f := range found {
		t.Errorf("%s: a map of struct values; hold them by pointer", f)
	}
	if len(roots) < 100 {
		t.Fatalf("only %d types found in the wire packages: the parse went wrong", len(roots))
	}
}

// typeRef names a type declared in one of wirePackages.
type typeRef struct{ pkg, name string }

// typeDecl is a declared type and the imports of its file.
type typeDecl struct {
	expr    ast.Expr
	imports map[string]string // name in the file → import path
}

type wireDecls struct {
	types map[typeRef]typeDecl
}

func parseWireTypes(t *testing.T) *wireDecls {
	t.Helper()
	w := &wireDecls{types: map[typeRef]typeDecl{}}
	fset := token.NewFileSet()
	for pkg, p := range wirePackages {
		files, err := filepath.Glob(filepath.Join(p.dir, "*.go"))
		if err != nil || len(files) == 0 {
			t.Fatalf("%s: no Go files in %s (%v)", pkg, p.dir, err)
		}
		for _, name := range files {
			if strings.HasSuffix(name, "_test.go") {
				continue
			}
			f, err := parser.ParseFile(fset, name, nil, parser.SkipObjectResolution)
			if err != nil {
				t.Fatal(err)
			}
			imports := map[string]string{}
			for _, imp := range f.Imports {
				path, _ := strconv.Unquote(imp.Path.Value)
				local := path[strings.LastIndex(path, "/")+1:]
				if imp.Name != nil {
					local = imp.Name.Name
				}
				imports[local] = path
			}
			for _, d := range f.Decls {
				gd, ok := d.(*ast.GenDecl)
				if !ok || gd.Tok != token.TYPE {
					continue
				}
				for _, s := range gd.Specs {
					ts := s.(*ast.TypeSpec)
					w.types[typeRef{pkg, ts.Name.Name}] = typeDecl{ts.Type, imports}
				}
			}
		}
	}
	return w
}

// resolve finds the declaration a type name in pkg refers to, if it is
// one of the wire packages' types.
func (w *wireDecls) resolve(e ast.Expr, pkg string, imports map[string]string) (typeRef, bool) {
	switch e := e.(type) {
	case *ast.Ident:
		ref := typeRef{pkg, e.Name}
		_, ok := w.types[ref]
		return ref, ok
	case *ast.SelectorExpr:
		x, ok := e.X.(*ast.Ident)
		if !ok {
			return typeRef{}, false
		}
		ref := typeRef{imports[x.Name], e.Sel.Name}
		_, ok = w.types[ref]
		return ref, ok
	}
	return typeRef{}, false
}

// isStruct reports whether e, in pkg, is a struct type with fields
// (following named types, not pointers).
func (w *wireDecls) isStruct(e ast.Expr, pkg string, imports map[string]string) bool {
	for range 16 {
		if st, ok := e.(*ast.StructType); ok {
			return len(st.Fields.List) > 0
		}
		ref, ok := w.resolve(e, pkg, imports)
		if !ok {
			return false
		}
		d := w.types[ref]
		e, pkg, imports = d.expr, ref.pkg, d.imports
	}
	return false
}

// walk visits the type ref and every type its encoded fields reach,
// calling report for each map of struct values.
func (w *wireDecls) walk(ref typeRef, seen map[typeRef]bool, report func(string)) {
	if seen[ref] {
		return
	}
	seen[ref] = true
	d := w.types[ref]
	short := ref.pkg[strings.LastIndex(ref.pkg, "/")+1:]
	w.walkExpr(d.expr, ref.pkg, d.imports, short+"."+ref.name, seen, report)
}

func (w *wireDecls) walkExpr(e ast.Expr, pkg string, imports map[string]string, where string, seen map[typeRef]bool, report func(string)) {
	switch e := e.(type) {
	case *ast.Ident, *ast.SelectorExpr:
		if ref, ok := w.resolve(e, pkg, imports); ok {
			w.walk(ref, seen, report)
		}
	case *ast.StarExpr:
		w.walkExpr(e.X, pkg, imports, where, seen, report)
	case *ast.ArrayType:
		w.walkExpr(e.Elt, pkg, imports, where+"[]", seen, report)
	case *ast.MapType:
		if w.isStruct(e.Value, pkg, imports) {
			report(where)
		}
		w.walkExpr(e.Key, pkg, imports, where+"[key]", seen, report)
		w.walkExpr(e.Value, pkg, imports, where+"[]", seen, report)
	case *ast.StructType:
		for _, f := range e.Fields.List {
			if f.Tag != nil {
				tag, _ := strconv.Unquote(f.Tag.Value)
				if c := reflect.StructTag(tag).Get("codec"); c == "-" || strings.HasPrefix(c, "-,") {
					continue
				}
			}
			names := []string{}
			for _, n := range f.Names {
				if ast.IsExported(n.Name) {
					names = append(names, n.Name)
				}
			}
			if len(f.Names) == 0 { // embedded: encoded inline
				names = append(names, "(embedded)")
			}
			for _, n := range names {
				w.walkExpr(f.Type, pkg, imports, where+"."+n, seen, report)
			}
		}
	}
}
