package main

import (
	"bytes"
	"regexp"
	"sort"
	"strings"
	"testing"
)

// runCaptured runs weft with args and returns its exit code, stdout and stderr.
func runCaptured(t *testing.T, args ...string) (int, string, string) {
	t.Helper()
	var out, errOut bytes.Buffer
	oldOut, oldErr := stdout, stderr
	stdout, stderr = &out, &errOut
	defer func() { stdout, stderr = oldOut, oldErr }()
	code := run(args)
	return code, out.String(), errOut.String()
}

// subcommandLine matches a line of a group's "Subcommands:" listing.
var subcommandLine = regexp.MustCompile(`^  (\S+)  `)

// listedSubcommands returns the names a group's help lists, or nil for a
// leaf command's help.
func listedSubcommands(help string) []string {
	_, list, ok := strings.Cut(help, "\nSubcommands:\n")
	if !ok {
		return nil
	}
	var names []string
	for _, line := range strings.Split(list, "\n") {
		m := subcommandLine.FindStringSubmatch(line)
		if m == nil {
			break
		}
		names = append(names, m[1])
	}
	return names
}

// TestHelpEveryCommand walks every command and subcommand the way a user
// finds them (weft -h, then each group's -h) and checks that each has a
// help on stdout with a usage line, a description and an example, for
// -h, -help, --help and `weft help`: a command added without help fails.
func TestHelpEveryCommand(t *testing.T) {
	var top []string
	for name := range commands {
		top = append(top, name)
	}
	sort.Strings(top)
	queue := make([][]string, 0, len(top))
	for _, n := range top {
		queue = append(queue, []string{n})
	}
	seen := 0
	for len(queue) > 0 {
		path := queue[0]
		queue = queue[1:]
		name := strings.Join(path, " ")
		h, ok := helps[name]
		if !ok || h.summary == "" || h.desc == "" || len(h.examples) == 0 || len(h.usage) == 0 {
			t.Errorf("weft %s has no help entry with a summary, a description, usage and an example in help_text.go", name)
		}
		var first string
		for _, flag := range []string{"-h", "-help", "--help"} {
			code, out, errOut := runCaptured(t, append(append([]string{}, path...), flag)...)
			if code != 0 || errOut != "" {
				t.Errorf("weft %s %s: exit %d, stderr %q; want exit 0 and help on stdout", name, flag, code, errOut)
			}
			for _, want := range []string{"Usage: weft " + name, "Example"} {
				if !strings.Contains(out, want) {
					t.Errorf("weft %s %s does not print %q:\n%s", name, flag, want, out)
				}
			}
			if first == "" {
				first = out
			} else if out != first {
				t.Errorf("weft %s %s prints something else than -h", name, flag)
			}
		}
		code, out, _ := runCaptured(t, append([]string{"help"}, path...)...)
		if code != 0 || out != first {
			t.Errorf("weft help %s: exit %d, and its output differs from weft %s -h", name, code, name)
		}
		for _, sub := range listedSubcommands(first) {
			queue = append(queue, append(append([]string{}, path...), sub))
		}
		seen++
	}
	// The groups nest: the walk must have reached the leaves.
	for _, leaf := range []string{"app submit", "acl token create", "tls cert create", "operator raft list-peers", "am dshell"} {
		if _, ok := helps[leaf]; !ok {
			t.Errorf("no help for %s", leaf)
		}
	}
	if seen < 40 {
		t.Errorf("walked %d commands; the walk does not reach the subcommands", seen)
	}
}

func TestTopLevelHelpAndBareGroups(t *testing.T) {
	code, out, errOut := runCaptured(t, "-h")
	if code != 0 || errOut != "" || !strings.Contains(out, "Commands:") || !strings.Contains(out, "app ") {
		t.Errorf("weft -h: exit %d, stdout %q, stderr %q", code, out, errOut)
	}
	// Nothing at all, or a group word alone, lists what may follow and is
	// bad usage: exit 2 with one line on stderr.
	for _, args := range [][]string{{}, {"app"}, {"acl", "token"}} {
		code, out, errOut := runCaptured(t, args...)
		if code != 2 || !strings.Contains(out, "Usage: weft") || strings.Count(errOut, "\n") != 1 || !strings.Contains(errOut, " -h'") {
			t.Errorf("weft %v: exit %d, stdout %q, stderr %q; want exit 2, the listing and one line on stderr", args, code, out, errOut)
		}
	}
	code, _, errOut = runCaptured(t, "acl", "token", "create")
	if code != 2 || strings.Count(errOut, "\n") != 1 || !strings.Contains(errOut, "run 'weft acl token create -h'") {
		t.Errorf("bad usage: exit %d, stderr %q; want exit 2 and one line naming the command's -h", code, errOut)
	}
	code, _, errOut = runCaptured(t, "app", "frobnicate")
	if code != 2 || !strings.Contains(errOut, "run 'weft app -h'") {
		t.Errorf("unknown subcommand: exit %d, stderr %q", code, errOut)
	}
}

func TestVersion(t *testing.T) {
	for _, args := range [][]string{{"version"}, {"-version"}, {"--version"}} {
		code, out, _ := runCaptured(t, args...)
		if code != 0 || !strings.HasPrefix(out, "weft "+version+" (go") || !strings.Contains(out, "linux/") && !strings.Contains(out, "/") {
			t.Errorf("weft %v: exit %d, %q", args, code, out)
		}
	}
	code, out, _ := runCaptured(t, "version", "-json")
	for _, want := range []string{`"version": "` + version + `"`, `"go_version": "go`, `"os": `, `"arch": `, `"modified": `} {
		if code != 0 || !strings.Contains(out, want) {
			t.Errorf("weft version -json: exit %d, %q lacks %s", code, out, want)
		}
	}
}
