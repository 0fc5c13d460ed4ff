// Command wordcount makes a MapReduce job for weft (SPEC §19) and checks
// its output: a generated corpus split across the cluster's nodes, the
// job's spec, and the counts the job must produce.
//
//	go run ./examples/wordcount -dir /var/tmp/wc -nodes dev-agent-1,dev-agent-2,dev-agent-3
//	bin/weft app submit -type mapreduce -spec /var/tmp/wc/job.hcl -wait
//	go run ./examples/wordcount -dir /var/tmp/wc -verify
//
// Each node gets -splits-per-node splits of about -words words, times its
// -weights entry (heavier nodes hold more of the data, which is where a
// center-of-gravity reduce placement pays). -job sort makes a sort instead:
// `key<TAB>payload` records with Zipf-skewed keys, map and reduce `cat`.
package main

import (
	"bufio"
	"bytes"
	"crypto/sha256"
	"flag"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
)

func main() {
	if err := run(os.Args[1:]); err != nil {
		fmt.Fprintln(os.Stderr, "wordcount:", err)
		os.Exit(1)
	}
}

type options struct {
	dir, job, placement, queue string
	nodes, racks               []string
	weights                    []int
	splitsPerNode, words       int
	reducers                   int
	seed                       uint64
}

func run(args []string) error {
	var o options
	var nodes, racks, weights string
	var verify bool
	fs := flag.NewFlagSet("wordcount", flag.ContinueOnError)
	fs.StringVar(&o.dir, "dir", "", "`DIR` for the corpus, job.hcl and the job's output")
	fs.StringVar(&nodes, "nodes", "", "the cluster's node IDs, comma-separated: each holds some splits")
	fs.StringVar(&racks, "racks", "", "each node's rack, comma-separated, in -nodes order (named in the splits; optional)")
	fs.StringVar(&weights, "weights", "", "each node's share of the data, comma-separated (default: equal)")
	fs.IntVar(&o.splitsPerNode, "splits-per-node", 2, "splits each node holds")
	fs.IntVar(&o.words, "words", 20000, "words (or records) in a split of weight 1")
	fs.IntVar(&o.reducers, "reducers", 4, "reduce tasks")
	fs.StringVar(&o.job, "job", "wordcount", "wordcount or sort")
	fs.StringVar(&o.placement, "reduce-placement", "center_of_gravity", "center_of_gravity or any")
	fs.StringVar(&o.queue, "queue", "", "the queue to submit to")
	fs.Uint64Var(&o.seed, "seed", 1, "the corpus's random seed")
	fs.BoolVar(&verify, "verify", false, "check DIR/output against what the job must produce, instead of making a job")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if o.dir == "" {
		return fmt.Errorf("-dir: give the directory")
	}
	abs, err := filepath.Abs(o.dir)
	if err != nil {
		return err
	}
	o.dir = abs
	if verify {
		return check(o.dir)
	}
	if o.nodes = split(nodes); len(o.nodes) == 0 {
		return fmt.Errorf("-nodes: give the node IDs (weft node list)")
	}
	if o.racks = split(racks); len(o.racks) > 0 && len(o.racks) != len(o.nodes) {
		return fmt.Errorf("-racks: %d racks for %d nodes", len(o.racks), len(o.nodes))
	}
	for _, w := range split(weights) {
		n, err := strconv.Atoi(w)
		if err != nil || n < 1 {
			return fmt.Errorf("-weights: %q is not a positive number", w)
		}
		o.weights = append(o.weights, n)
	}
	if len(o.weights) == 0 {
		for range o.nodes {
			o.weights = append(o.weights, 1)
		}
	}
	switch {
	case len(o.weights) != len(o.nodes):
		return fmt.Errorf("-weights: %d weights for %d nodes", len(o.weights), len(o.nodes))
	case o.job != "wordcount" && o.job != "sort":
		return fmt.Errorf("-job: %q is not wordcount or sort", o.job)
	case o.splitsPerNode < 1 || o.words < 1 || o.reducers < 1:
		return fmt.Errorf("-splits-per-node, -words and -reducers must be positive")
	}
	return generate(o)
}

func split(s string) []string {
	var out []string
	for _, p := range strings.Split(s, ",") {
		if p = strings.TrimSpace(p); p != "" {
			out = append(out, p)
		}
	}
	return out
}

// generate writes the corpus, the job's spec and what the job must
// produce (expected.tsv: word counts, or the sort's record digest).
func generate(o options) error {
	in, out := filepath.Join(o.dir, "input"), filepath.Join(o.dir, "output")
	for _, d := range []string{in, out} {
		if err := os.RemoveAll(d); err != nil {
			return err
		}
		if err := os.MkdirAll(d, 0o755); err != nil {
			return err
		}
	}
	rng := rand.New(rand.NewPCG(o.seed, 0x5eed))
	vocab := vocabulary(rng, 2000)
	zipf := rand.NewZipf(rng, 1.1, 4, uint64(len(vocab)-1))
	counts := map[string]int{}
	var job strings.Builder
	fmt.Fprintf(&job, "# %s over %d splits on %d nodes (made by examples/wordcount)\nname = %q\n", o.job, o.splitsPerNode*len(o.nodes), len(o.nodes), o.job)
	if o.queue != "" {
		fmt.Fprintf(&job, "queue = %q\n", o.queue)
	}
	job.WriteString("\nmapreduce {\n")
	if o.job == "wordcount" {
		job.WriteString("  map      = [\"awk\", \"{ for (i = 1; i <= NF; i++) print $i \\\"\\\\t1\\\" }\"]\n")
		job.WriteString("  # the input is sorted by word: add up each run of one word\n")
		job.WriteString("  reduce   = [\"awk\", \"-F\", \"\\t\", \"$1 != w { if (NR > 1) print w \\\"\\\\t\\\" n; w = $1; n = 0 } { n += $2 } END { if (NR > 0) print w \\\"\\\\t\\\" n }\"]\n")
	} else {
		job.WriteString("  map      = [\"cat\"]\n  reduce   = [\"cat\"]\n")
	}
	fmt.Fprintf(&job, "  reducers = %d\n  output   = %q\n  reduce_placement = %q\n", o.reducers, out, o.placement)
	digest := sha256.New()
	var records []string
	for n, node := range o.nodes {
		for s := 0; s < o.splitsPerNode; s++ {
			path := filepath.Join(in, fmt.Sprintf("split-%s-%d.txt", safe(node), s))
			var b bytes.Buffer
			for w := 0; w < o.words*o.weights[n]; w++ {
				word := vocab[zipf.Uint64()]
				if o.job == "sort" {
					rec := fmt.Sprintf("%s\t%08x", word, rng.Uint32())
					records = append(records, rec)
					b.WriteString(rec + "\n")
					continue
				}
				counts[word]++
				b.WriteString(word)
				if w%12 == 11 {
					b.WriteByte('\n')
				} else {
					b.WriteByte(' ')
				}
			}
			if data := b.Bytes(); len(data) > 0 && data[len(data)-1] == ' ' {
				data[len(data)-1] = '\n' // every line ends, and no line is empty
			}
			if err := os.WriteFile(path, b.Bytes(), 0o644); err != nil {
				return err
			}
			fmt.Fprintf(&job, "\n  split {\n    path  = %q\n    nodes = [%q]\n", path, node)
			if len(o.racks) > 0 {
				fmt.Fprintf(&job, "    racks = [%q]\n", o.racks[n])
			}
			job.WriteString("  }\n")
		}
	}
	job.WriteString("}\n")
	var expected strings.Builder
	if o.job == "wordcount" {
		words := make([]string, 0, len(counts))
		for w := range counts {
			words = append(words, w)
		}
		slices.Sort(words)
		expected.WriteString("wordcount\n")
		for _, w := range words {
			fmt.Fprintf(&expected, "%s\t%d\n", w, counts[w])
		}
	} else {
		slices.Sort(records)
		for _, r := range records {
			digest.Write([]byte(r + "\n"))
		}
		fmt.Fprintf(&expected, "sort\n%d\t%x\n", len(records), digest.Sum(nil))
	}
	if err := os.WriteFile(filepath.Join(o.dir, "expected.tsv"), []byte(expected.String()), 0o644); err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(o.dir, "job.hcl"), []byte(job.String()), 0o644); err != nil {
		return err
	}
	fmt.Printf("wrote %s: %d splits; submit it with\n  weft app submit -type mapreduce -spec %s -wait\nthen check the output with\n  go run ./examples/wordcount -dir %s -verify\n",
		filepath.Join(o.dir, "job.hcl"), o.splitsPerNode*len(o.nodes), filepath.Join(o.dir, "job.hcl"), o.dir)
	return nil
}

func safe(s string) string {
	return strings.Map(func(r rune) rune {
		if r == '/' || r == ' ' {
			return '_'
		}
		return r
	}, s)
}

// vocabulary is n distinct lowercase words.
func vocabulary(rng *rand.Rand, n int) []string {
	seen := map[string]bool{}
	var out []string
	for len(out) < n {
		b := make([]byte, 3+rng.IntN(6))
		for i := range b {
			b[i] = byte('a' + rng.IntN(26))
		}
		if w := string(b); !seen[w] {
			seen[w] = true
			out = append(out, w)
		}
	}
	return out
}

// check compares DIR/output with DIR/expected.tsv: every part file sorted
// by key and, together, exactly the expected counts (or records).
func check(dir string) error {
	exp, err := os.ReadFile(filepath.Join(dir, "expected.tsv"))
	if err != nil {
		return err
	}
	kind, want, _ := strings.Cut(string(exp), "\n")
	parts, err := filepath.Glob(filepath.Join(dir, "output", "part-r-*"))
	if err != nil || len(parts) == 0 {
		return fmt.Errorf("no part-r-* files in %s/output", dir)
	}
	var lines []string
	for _, p := range parts {
		f, err := os.Open(p)
		if err != nil {
			return err
		}
		sc := bufio.NewScanner(f)
		prev := ""
		for sc.Scan() {
			key, _, _ := strings.Cut(sc.Text(), "\t")
			if key < prev {
				f.Close()
				return fmt.Errorf("%s: %q after %q: not sorted by key", p, key, prev)
			}
			prev = key
			lines = append(lines, sc.Text())
		}
		f.Close()
	}
	slices.Sort(lines)
	var got string
	if kind == "wordcount" {
		got = strings.Join(lines, "\n") + "\n"
	} else {
		d := sha256.New()
		for _, l := range lines {
			d.Write([]byte(l + "\n"))
		}
		got = fmt.Sprintf("%d\t%x\n", len(lines), d.Sum(nil))
	}
	if got != want {
		return fmt.Errorf("the output in %s/output (%d lines in %d files) is not what the job must produce", dir, len(lines), len(parts))
	}
	fmt.Printf("ok: %d lines in %d files, exactly as expected\n", len(lines), len(parts))
	return nil
}
