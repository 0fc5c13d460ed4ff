package main

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// The job file names every split on its node and rack; -verify takes
// exactly the counts of the corpus, from any number of sorted part files,
// and refuses a wrong count, a missing word and an unsorted file.
func TestGenerateAndVerify(t *testing.T) {
	dir := t.TempDir()
	err := run([]string{"-dir", dir, "-nodes", "n1,n2", "-racks", "/r1,/r2", "-weights", "2,1", "-words", "300", "-reducers", "3"})
	if err != nil {
		t.Fatal(err)
	}
	job, _ := os.ReadFile(filepath.Join(dir, "job.hcl"))
	for _, want := range []string{`nodes = ["n1"]`, `racks = ["/r2"]`, "reducers = 3", `output   = "` + filepath.Join(dir, "output")} {
		if !strings.Contains(string(job), want) {
			t.Errorf("job.hcl lacks %q:\n%s", want, job)
		}
	}
	counts := map[string]int{}
	words := 0
	splits, _ := filepath.Glob(filepath.Join(dir, "input", "*"))
	for _, s := range splits {
		b, _ := os.ReadFile(s)
		for _, w := range strings.Fields(string(b)) {
			counts[w]++
			words++
		}
	}
	if len(splits) != 4 || words != 2*(2*300+300) {
		t.Fatalf("%d splits of %d words; want 4 holding 1,800", len(splits), words)
	}
	write := func(parts [][]string) {
		os.RemoveAll(filepath.Join(dir, "output"))
		os.Mkdir(filepath.Join(dir, "output"), 0o755)
		for i, lines := range parts {
			os.WriteFile(filepath.Join(dir, "output", fmt.Sprintf("part-r-%05d", i)), []byte(strings.Join(lines, "")), 0o644)
		}
	}
	var sorted []string
	for w := range counts {
		sorted = append(sorted, w)
	}
	slices.Sort(sorted)
	var a, b []string
	for i, w := range sorted {
		line := fmt.Sprintf("%s\t%d\n", w, counts[w])
		if i%2 == 0 {
			a = append(a, line)
		} else {
			b = append(b, line)
		}
	}
	write([][]string{a, b})
	if err := check(dir); err != nil {
		t.Fatalf("the corpus's own counts: %v", err)
	}
	wrong := slices.Clone(a)
	wrong[0] = strings.Replace(wrong[0], "\t", "\t1", 1)
	for name, parts := range map[string][][]string{
		"a wrong count":    {wrong, b},
		"a word missing":   {a[1:], b},
		"an unsorted file": {append(slices.Clone(a[1:]), a[0]), b},
	} {
		write(parts)
		if err := check(dir); err == nil {
			t.Errorf("%s passed -verify", name)
		}
	}
}
