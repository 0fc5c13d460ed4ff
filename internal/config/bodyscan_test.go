package config

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"strings"
	"testing"

	"github.com/hashicorp/hcl/v2"
	"github.com/hashicorp/hcl/v2/hclsyntax"
)

// hclSeeds are inputs for the scan's property: real files, and the
// shapes that cost HCL's parser most.
func hclSeeds(t testing.TB) [][]byte {
	seeds := [][]byte{
		[]byte("a = \"x\ny\"\nb = 1\n"),
		[]byte("a = <<EOT\nhello ${x} and %{ if true }yes%{ endif }\nEOT\nb = <<-X\n  $${lit}\n  X\n"),
		[]byte(`a = "${"${1}"}"` + "\n"),
		[]byte("a-b = -1\nc = 1-2\nd = 1.5e-10\ne = a.b[0].c\n"),
		[]byte("x = [for v in [1, 2, 3] : -v if !false]\ny = a ? b : c ? d : e\n"),
		[]byte("# comment\n// another\n/* block\ncomment */ q = 1\n"),
		[]byte("z = \"€uro\\\"q\" \n é = 1\n€ = 2\n"),
		[]byte(`queue "root" { queue "a" { min_resources = { memory_mb = 1, vcores = 2 } } }`),
		[]byte("x = (\n-\n-\n1)\n"),
		[]byte("s = \"a}b\" \n t = \"$${x}%%{y}\"\n"),
	}
	for _, dir := range []string{"../../examples", "testdata"} {
		files, _ := filepath.Glob(filepath.Join(dir, "*.hcl"))
		for _, f := range files {
			if b, err := os.ReadFile(f); err == nil {
				seeds = append(seeds, b)
			}
		}
	}
	return seeds
}

func lexedTokens(src []byte) int {
	toks, _ := hclsyntax.LexConfig(src, "f", hcl.Pos{Line: 1, Column: 1})
	return len(toks)
}

// The scan counts at least the tokens HCL's lexer makes of any input:
// the bound on a body's tokens is a bound on what parsing it costs.
func FuzzScanCountsAtLeastHCLsTokens(f *testing.F) {
	for _, s := range hclSeeds(f) {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, src []byte) {
		tokens, err := scanHCL("f", src)
		if err != nil {
			return // refused: parsed by nothing
		}
		if lexed := lexedTokens(src); tokens < lexed {
			t.Fatalf("the scan counts %d tokens in %q; HCL's lexer makes %d", tokens, src, lexed)
		}
	})
}

// What nests the parser one call deeper — blocks, brackets, templates,
// unary and conditional operators, across newlines inside brackets — is
// refused past MaxBodyNesting, and a real queue tree is far from it.
func TestScanRefusesDeepNesting(t *testing.T) {
	deep := MaxBodyNesting + 1
	for name, src := range map[string]string{
		"brackets":          "x = " + strings.Repeat("[", deep),
		"blocks":            strings.Repeat("queue \"q\" {\n", deep),
		"unary minus":       "x = " + strings.Repeat("-", deep) + "1\n",
		"not, over lines":   "x = (\n" + strings.Repeat("!\n", deep) + "true)\n",
		"conditionals":      "x = " + strings.Repeat("a ? b : ", deep) + "c\n",
		"templates":         "x = " + strings.Repeat(`"${`, deep),
		"heredoc templates": "x = <<EOT\n" + strings.Repeat("${[", deep) + "\nEOT\n",
	} {
		if _, err := scanHCL("body", []byte(src)); err == nil || !strings.Contains(err.Error(), "nested more than 48 deep") || !strings.HasPrefix(err.Error(), "body:1,") && !strings.HasPrefix(err.Error(), "body:") {
			t.Errorf("%s: %v", name, err)
		}
	}
	// Operators end with their expression: many on many lines are fine.
	if _, err := scanHCL("body", bytes.Repeat([]byte("queue \"q\" { max_am_share = -1 }\n"), 10*MaxBodyNesting)); err != nil {
		t.Errorf("many attributes of -1: %v", err)
	}
	if _, err := scanHCL("body", []byte("x = ["+strings.Repeat("-1, ", 10*MaxBodyNesting)+"]\n")); err != nil {
		t.Errorf("a list of -1: %v", err)
	}
	q := thousandQueues()
	if err := CheckHCLBody("q", q, MaxQueueConfigTokens); err != nil {
		t.Errorf("1,000 queues: %v", err)
	}
	// JSON: the same nesting; strings are templates to HCL.
	if err := CheckJSONBody("body", []byte(`{"a":`+strings.Repeat("[", deep)), 1000); err == nil || !strings.Contains(err.Error(), "nested more than") {
		t.Errorf("JSON brackets: %v", err)
	}
	if err := CheckJSONBody("body", []byte(`{"a": "${`+strings.Repeat("-", deep)+`1}"}`), 1000); err == nil || !strings.Contains(err.Error(), "template") {
		t.Errorf("a JSON string's template: %v", err)
	}
	if err := CheckJSONBody("body", []byte(`{"a": "part-0001-of-0002-x-y-z-`+strings.Repeat("-", deep)+`"}`), 1000); err != nil {
		t.Errorf("a JSON string with dashes and no template: %v", err)
	}
	if err := CheckJSONBody("body", []byte(`[`+strings.Repeat(`1,`, 2000)+`1]`), 1000); err == nil || !strings.Contains(err.Error(), "2002 JSON values; at most 1000") {
		t.Errorf("too many JSON values: %v", err)
	}
}

// allocated is what f allocates, garbage included (an upper bound of its
// peak), with the collector off so that nothing of it is missed.
func allocated(f func()) int64 {
	defer debug.SetGCPercent(debug.SetGCPercent(-1))
	runtime.GC()
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	f()
	runtime.ReadMemStats(&after)
	return int64(after.TotalAlloc - before.TotalAlloc)
}

// upTo repeats unit after prefix as often as the body stays within limit
// by measure (which grows by the same for each unit), and ends it with
// suffix.
func upTo(prefix, unit, suffix string, limit int, measure func([]byte) int) []byte {
	body := func(k int) []byte { return []byte(prefix + strings.Repeat(unit, k) + suffix) }
	base, each := measure(body(0)), measure(body(2))-measure(body(1))
	k := (limit - base) / each
	for k > 0 && measure(body(k)) > limit {
		k--
	}
	return body(k)
}

// thousandQueues is a queue file of 1,000 queues, as an organisation
// might write one: ten departments of nine teams of projects, each with
// weights, shares and limits.
func thousandQueues() []byte {
	var b bytes.Buffer
	b.WriteString("queue \"root\" {\n  policy = \"drf\"\n")
	n := 0
	for d := 0; d < 10; d++ {
		fmt.Fprintf(&b, "  queue \"department-%02d\" {\n    weight = %d\n    min_resources = { memory_mb = 409600, vcores = 400 }\n"+
			"    max_resources = { memory_mb = 2048000, vcores = 2000 }\n    fair_share_preemption_threshold = 0.8\n"+
			"    fair_share_preemption_timeout   = \"30s\"\n", d, d+1)
		n++
		for t := 0; t < 9; t++ {
			fmt.Fprintf(&b, "    queue \"team-%02d-%02d\" {\n      weight = 2\n      policy = \"fair\"\n"+
				"      min_resources = { memory_mb = 40960, vcores = 40 }\n", d, t)
			n++
			for p := 0; p < 10 && n < 1000; p++ {
				fmt.Fprintf(&b, "      queue \"project-%02d-%02d-%02d\" {\n        weight           = 1\n        max_running_apps = 50\n"+
					"        min_resources    = { memory_mb = 4096, vcores = 4 }\n        max_resources    = { memory_mb = 204800, vcores = 200 }\n"+
					"        preemptable      = true\n        max_am_share     = 0.5\n      }\n", d, t, p)
				n++
			}
			b.WriteString("    }\n")
		}
		b.WriteString("  }\n")
	}
	b.WriteString("}\n")
	return b.Bytes()
}

// What reading a body costs is bounded by what the API accounts for it,
// for the bodies that cost parsing most per byte or per token, at the
// limits: the bound is on what is allocated, not on what the body says.
func TestBodyCostBoundsWhatParsingAllocates(t *testing.T) {
	if testing.Short() {
		t.Skip("parses bodies of 64,000 tokens")
	}
	hclTokens := func(b []byte) int { n, _ := scanHCL("b", b); return n }
	jsonValues := func(b []byte) int {
		if err := CheckJSONBody("b", b, 0); err != nil {
			var n int
			fmt.Sscanf(err.Error(), "b: %d JSON values", &n)
			return n
		}
		return 0
	}
	queues := map[string][]byte{
		"1,000 queues":       thousandQueues(),
		"duplicate settings": upTo("", "a=1\n", "", MaxQueueConfigTokens, hclTokens),
		"a long list":        upTo("x=[", "0,", "0]\n", MaxQueueConfigTokens, hclTokens),
		"empty blocks":       upTo("", "queue \"r\" {}\n", "", MaxQueueConfigTokens, hclTokens),
		"templates":          upTo("x=[", "\"${a}\",", "0]\n", MaxQueueConfigTokens, hclTokens),
		"negative numbers":   upTo("", "a=-1\n", "", MaxQueueConfigTokens, hclTokens),
		"JSON list":          upTo(`{"x":[`, "0,", "0]}", MaxQueueConfigJSONValues, jsonValues),
		"JSON objects":       upTo(`{"queue":{"root":{"queue":{`, `"a":{},`, `"b":{}}}}}`, MaxQueueConfigJSONValues, jsonValues),
	}
	for name, body := range queues {
		var err error
		got := allocated(func() { _, err = ParseQueueConfigBody("body", body) })
		if bound := QueueConfigBodyCost(int64(len(body))); got > bound {
			t.Errorf("queues, %s (%d bytes): parsing allocated %d bytes, more than the %d accounted", name, len(body), got, bound)
		}
		if err != nil && (len(err.Error()) > 4<<10 || strings.Contains(err.Error(), "nothing was parsed")) {
			t.Errorf("queues, %s: refused by the scan, or an error of %d bytes: %.200s", name, len(err.Error()), err)
		}
	}
	const appCap = 4 << 20
	apps := map[string][]byte{
		"empty strings":   upTo(`{"dshell":{"command":[`, `"",`, `""]}}`, MaxAppSpecValues(appCap), jsonValues),
		"short strings":   upTo(`{"dshell":{"command":[`, `"a",`, `"a"]}}`, appCap, func(b []byte) int { return len(b) }),
		"empty splits":    upTo(`{"mapreduce":{"split":[`, `{},`, `{}]}}`, MaxAppSpecValues(appCap), jsonValues),
		"many env names":  upTo(`{"dshell":{"env":{`, `"a":"",`, `"b":""}}}`, appCap, func(b []byte) int { return len(b) }),
		"splits of nodes": upTo(`{"mapreduce":{"split":[`, `{"path":"/p","nodes":["a","b","c"]},`, `{}]}}`, appCap, func(b []byte) int { return len(b) }),
		"long strings":    upTo(`{"dshell":{"command":[`, `"`+strings.Repeat("x", 4000)+`",`, `""]}}`, appCap, func(b []byte) int { return len(b) }),
	}
	for name, body := range apps {
		var err error
		got := allocated(func() { _, err = ParseAppSpecBody("body", body) })
		if bound := AppSpecBodyCost(int64(len(body))); got > bound {
			t.Errorf("apps, %s (%d bytes): parsing allocated %d bytes, more than the %d accounted", name, len(body), got, bound)
		}
		if err != nil && len(err.Error()) > 4<<10 {
			t.Errorf("apps, %s: an error of %d bytes", name, len(err.Error()))
		}
	}
}
