package rpcfuzz

import (
	"os"
	"path/filepath"
	"regexp"
	"runtime"
	"strings"
	"testing"
)

// Every fuzz target of the repository is in the Makefile's FUZZ_TARGETS,
// so that make fuzz (and CI) runs it.
func TestMakeFuzzRunsEveryFuzzTarget(t *testing.T) {
	_, here, _, _ := runtime.Caller(0)
	root := filepath.Join(filepath.Dir(here), "..", "..", "..")
	makefile, err := os.ReadFile(filepath.Join(root, "Makefile"))
	if err != nil {
		t.Fatal(err)
	}
	fuzzFunc := regexp.MustCompile(`(?m)^func (Fuzz\w+)\(`)
	found := 0
	err = filepath.WalkDir(root, func(path string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && (strings.HasPrefix(d.Name(), ".") || d.Name() == "testdata") && path != root {
			return filepath.SkipDir
		}
		if d.IsDir() || !strings.HasSuffix(path, "_test.go") {
			return nil
		}
		src, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, filepath.Dir(path))
		for _, m := range fuzzFunc.FindAllSubmatch(src, -1) {
			found++
			target := "./" + filepath.ToSlash(rel) + ":" + string(m[1])
			if !strings.Contains(string(makefile), target+" ") && !strings.Contains(string(makefile), target+"\n") {
				t.Errorf("%s is not in the Makefile's FUZZ_TARGETS", target)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if found < 5 {
		t.Fatalf("found only %d fuzz targets: the walk missed the repository", found)
	}
}
