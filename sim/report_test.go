package sim

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// The report is built from what make sim-bench leaves in bench/, and only
// the part of the document between the markers changes.
func TestReportRewritesOnlyItsPart(t *testing.T) {
	dir := t.TempDir()
	bench, docs := filepath.Join(dir, "bench"), filepath.Join(dir, "docs")
	for _, d := range []string{filepath.Join(bench, "sim", "heartbeats-10"), docs} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	write := func(path, s string) {
		if err := os.WriteFile(path, []byte(s), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write(filepath.Join(bench, "sim-heartbeats-10.txt"), "# weft sim heartbeats-10 (abc123, 2 cores, 2026-11-27T00:00:00Z)\n# bin/weft sim -start-servers 3 -nodes=10\nweft sim: ...\n")
	write(filepath.Join(bench, "sim", "heartbeats-10", "summary.json"), `{"nodes": 10, "register_seconds": 1.5, "heartbeats": 600,
		"heartbeat_p50_ms": 1.2, "heartbeat_p99_ms": 7.5, "heartbeat_max_ms": 20,
		"servers_cpu": [{"id": "s1", "cores": 0.1}, {"id": "s2", "cores": 0.3, "leader": true}]}`)
	write(filepath.Join(bench, "sim", "heartbeats-10", "heartbeat_p99.svg"), "<svg/>")
	write(filepath.Join(bench, "sim-broken.txt"), "# weft sim broken\nFAILED: exit 1\n")
	doc := filepath.Join(docs, "scale.md")
	write(doc, "# Scale\n\nkept above\n\n"+ReportBegin+"\nold figures\n"+ReportEnd+"\n\nkept below\n")

	var runs []ReportRun
	for _, name := range []string{"heartbeats-10", "broken"} {
		run, err := LoadReportRun(bench, docs, name)
		if err != nil {
			t.Fatal(err)
		}
		runs = append(runs, run)
	}
	if err := ReplaceReport(doc, Report(runs)); err != nil {
		t.Fatal(err)
	}
	got, _ := os.ReadFile(doc)
	s := string(got)
	for _, want := range []string{"kept above", "kept below", "| `heartbeats-10` | 10 | 1.5 s | 600 (0) | 1.2 / **7.5** / 20 ms |",
		"0.30, 0.10 |", "**`broken` failed**: exit 1", "![heartbeats-10 heartbeat_p99](../bench/sim/heartbeats-10/heartbeat_p99.svg)",
		"    bin/weft sim -start-servers 3 -nodes=10"} {
		if !strings.Contains(s, want) {
			t.Errorf("the report lacks %q:\n%s", want, s)
		}
	}
	if strings.Contains(s, "old figures") {
		t.Errorf("the old figures are still there:\n%s", s)
	}
	if err := ReplaceReport(filepath.Join(docs, "none.md"), "x"); err == nil {
		t.Error("a missing document was taken")
	}
	write(filepath.Join(docs, "plain.md"), "no markers\n")
	if err := ReplaceReport(filepath.Join(docs, "plain.md"), "x"); err == nil || !strings.Contains(err.Error(), "no") {
		t.Errorf("a document without markers: %v", err)
	}
}

// The opportunistic matrix's runs make one table a pair: each kind's mean
// and runs, its gain on guaranteed only, and the bound on that gain.
func TestReportOpportunisticMatrix(t *testing.T) {
	var runs []ReportRun
	add := func(name string, tasksPerS, alloc, busy float64, rejected uint64) {
		runs = append(runs, ReportRun{Name: name, Summary: Summary{AppsSubmitted: 1, TasksFinished: 1000, TasksPerS: tasksPerS,
			UtilisationMean: alloc, InUseMean: busy, RetriedBy: map[string]uint64{"rejected": rejected}}})
	}
	add("opp-bound-200.guaranteed-r1", 50, 0.8, 0.75, 0)
	add("opp-bound-200.guaranteed-r2", 60, 0.8, 0.75, 0)
	add("opp-bound-200.opportunistic-r1", 66, 0.95, 0.93, 20)
	add("opp-bound-200.no-windows-r1", 54, 0.9, 0.9, 900)
	out := Report(runs)
	for _, want := range []string{
		"**Opportunistic against guaranteed only: `bound-200`**",
		"| guaranteed only | **55.0** (50.0, 60.0) | — | 80.0% / 75.0% | 0.000 |",
		"| half opportunistic, every mechanism | **66.0** (66.0) | +20.0% | 95.0% / 93.0% | 0.020 |",
		"| … without windows (one shared list) | **54.0** (54.0) | -1.8% |",
		"Queueing can add at most 1/U − 1 = **+25%** to it by allocation (80% of that: +20%)",
		"#### `opp-bound-200.guaranteed-r1`",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("the report lacks %q:\n%s", want, out)
		}
	}
	if strings.Contains(out, "#### `opp-bound-200.guaranteed-r2`") || strings.Contains(out, "**Apps and allocations**") {
		t.Errorf("the matrix's later runs are listed, or its runs taken for other scenarios:\n%s", out)
	}
}
