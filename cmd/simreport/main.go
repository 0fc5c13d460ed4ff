// Command simreport rewrites the generated part of docs/scale.md from the
// results `make sim-bench` left in bench/ (sim.Report): a tool of the
// build, not part of weft.
//
//	go run ./cmd/simreport -bench bench -doc docs/scale.md heartbeats-1000 throughput-1000 ...
package main

import (
	"flag"
	"fmt"
	"os"
	"path/filepath"

	"github.com/weft-sched/weft/sim"
)

func main() {
	bench := flag.String("bench", "bench", "the directory holding sim-NAME.txt and sim/NAME/")
	doc := flag.String("doc", "docs/scale.md", "the document whose generated part to rewrite")
	flag.Parse()
	if flag.NArg() == 0 {
		fmt.Fprintln(os.Stderr, "simreport: name the scenarios to report, in order")
		os.Exit(2)
	}
	var runs []sim.ReportRun
	for _, name := range flag.Args() {
		run, err := sim.LoadReportRun(*bench, filepath.Dir(*doc), name)
		if err != nil {
			fmt.Fprintf(os.Stderr, "simreport: %s: %v (skipped)\n", name, err)
			continue
		}
		runs = append(runs, run)
	}
	if err := sim.ReplaceReport(*doc, sim.Report(runs)); err != nil {
		fmt.Fprintln(os.Stderr, "simreport:", err)
		os.Exit(1)
	}
	fmt.Printf("simreport: wrote %d scenarios into %s\n", len(runs), *doc)
}
