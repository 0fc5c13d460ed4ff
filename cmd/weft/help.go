package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"sort"
	"strings"
)

// helpEntry is the help of one command or command group, printed by
// `weft CMD -h` and `weft help CMD` on stdout. Every command and group has
// one (help_test.go walks them all): the usage lines, a one-line summary
// for its group's listing, a paragraph saying what it does, and examples.
// A leaf command's flags come from its own flag set when it parses -h.
type helpEntry struct {
	usage    []string // synopsis lines, each starting "weft ..."
	summary  string
	desc     string
	examples []string // lines; those starting "#" are comments
}

// errUsageShown is bad usage whose explanation is already on stderr (weft
// help CMD passed on CMD -h's failure): exit 2, nothing more to say.
var errUsageShown = &usageError{}

// cmdPath is the command the arguments have reached so far ("app submit"),
// for the "run 'weft app submit -h'" hint of a usage error.
var cmdPath string

// isHelpArg reports whether a is one of the spellings of "help".
func isHelpArg(a string) bool { return a == "-h" || a == "-help" || a == "--help" }

// helpFor returns the help of a command path ("app submit"); ok is false
// for a command without one.
func helpFor(path string) (helpEntry, bool) {
	h, ok := helps[path]
	return h, ok
}

// printCommandHelp prints a leaf command's help, with the flags of fs.
func printCommandHelp(w io.Writer, path string, fs *flag.FlagSet) {
	h, ok := helpFor(path)
	if !ok {
		h = helpEntry{usage: []string{"weft " + path + " [flags]"}}
	}
	printUsageLines(w, h.usage)
	if h.desc != "" {
		fmt.Fprintf(w, "\n%s\n", wrap(h.desc, 78))
	}
	client := clientFlagNames()
	var own, global []*flag.Flag
	fs.VisitAll(func(f *flag.Flag) {
		if client[f.Name] {
			global = append(global, f)
		} else {
			own = append(own, f)
		}
	})
	if len(own) > 0 {
		fmt.Fprintln(w, "\nFlags:")
		printFlags(w, own)
	}
	if len(global) > 0 {
		fmt.Fprintln(w, "\nClient flags (every client command):")
		printFlags(w, global)
	}
	printExamples(w, h.examples)
}

// printGroupHelp prints a command group's help: its subcommands with their
// summaries.
func printGroupHelp(w io.Writer, group string, subs []string) {
	h, _ := helpFor(group)
	usage := h.usage
	if len(usage) == 0 {
		usage = []string{"weft " + group + " SUBCOMMAND [flags] [args]"}
	}
	printUsageLines(w, usage)
	if h.desc != "" {
		fmt.Fprintf(w, "\n%s\n", wrap(h.desc, 78))
	}
	fmt.Fprintln(w, "\nSubcommands:")
	printSummaries(w, group+" ", subs)
	printExamples(w, h.examples)
	fmt.Fprintf(w, "\nRun 'weft %s SUBCOMMAND -h' for a subcommand's flags and examples.\n", group)
}

// printTopHelp prints `weft -h`: every command with its summary.
func printTopHelp(w io.Writer) {
	h := helps[""]
	printUsageLines(w, h.usage)
	fmt.Fprintf(w, "\n%s\n", wrap(h.desc, 78))
	names := make([]string, 0, len(commands))
	for n := range commands {
		names = append(names, n)
	}
	sort.Strings(names)
	fmt.Fprintln(w, "\nCommands:")
	printSummaries(w, "", names)
	fmt.Fprintln(w, "\nClient commands take -address HOST:PORT (or WEFT_ADDR), -token (or WEFT_TOKEN), -json and -stale,")
	fmt.Fprintln(w, "and -ca-cert, -client-cert, -client-key (or WEFT_CACERT, WEFT_CLIENT_CERT, WEFT_CLIENT_KEY) for TLS.")
	printExamples(w, h.examples)
	fmt.Fprintln(w, "\nRun 'weft COMMAND -h' (or 'weft help COMMAND') for a command's flags and examples.")
}

func printUsageLines(w io.Writer, lines []string) {
	for i, l := range lines {
		if i == 0 {
			fmt.Fprintf(w, "Usage: %s\n", l)
		} else {
			fmt.Fprintf(w, "       %s\n", l)
		}
	}
}

func printSummaries(w io.Writer, prefix string, names []string) {
	width := 0
	for _, n := range names {
		width = max(width, len(n))
	}
	for _, n := range names {
		summary := "(no help yet)"
		if h, ok := helpFor(prefix + n); ok {
			summary = h.summary
		}
		fmt.Fprintf(w, "  %-*s  %s\n", width, n, summary)
	}
}

func printExamples(w io.Writer, examples []string) {
	if len(examples) == 0 {
		return
	}
	fmt.Fprintln(w, "\nExamples:")
	for _, e := range examples {
		fmt.Fprintf(w, "  %s\n", e)
	}
}

// printFlags prints flags as flag.PrintDefaults does: name, the value's
// name from the usage's back-quoted word, the usage and a non-zero default
// (never -token's: it would show WEFT_TOKEN's secret).
func printFlags(w io.Writer, flags []*flag.Flag) {
	for _, f := range flags {
		name, usage := flag.UnquoteUsage(f)
		line := "  -" + f.Name
		if name != "" {
			line += " " + name
		}
		fmt.Fprintf(w, "%s\n        %s", line, usage)
		if d := f.DefValue; d != "" && d != "false" && d != "0" && d != "0s" && d != "[]" && f.Name != "token" {
			fmt.Fprintf(w, " (default %s)", d)
		}
		fmt.Fprintln(w)
	}
}

// clientFlagNames is the set of the global client flags' names.
func clientFlagNames() map[string]bool {
	fs := flag.NewFlagSet("", flag.ContinueOnError)
	(&clientFlags{}).register(fs)
	names := map[string]bool{}
	fs.VisitAll(func(f *flag.Flag) { names[f.Name] = true })
	return names
}

// wrap breaks a paragraph into lines of at most width characters.
func wrap(s string, width int) string {
	var b strings.Builder
	n := 0
	for _, word := range strings.Fields(s) {
		switch {
		case n == 0:
		case n+1+len(word) > width:
			b.WriteByte('\n')
			n = 0
		default:
			b.WriteByte(' ')
			n++
		}
		b.WriteString(word)
		n += len(word)
	}
	return b.String()
}

// runHelp is `weft help [CMD ...]`: the help of a command, as CMD -h.
func runHelp(args []string) error {
	switch {
	case len(args) == 0:
		printTopHelp(stdout)
		return nil
	case isHelpArg(args[0]):
		printCommandHelp(stdout, "help", newFlagSet("help"))
		return flag.ErrHelp
	}
	if code := run(append(append([]string{}, args...), "-h")); code != 0 {
		return errUsageShown
	}
	return nil
}

// usageHint adds "run 'weft CMD -h'" to a usage error's message unless it
// already says how to get help.
func usageHint(msg string) string {
	if strings.Contains(msg, " -h'") {
		return msg
	}
	path := strings.TrimSpace("weft " + cmdPath)
	return msg + "; run '" + path + " -h' for help"
}

// isHelp reports whether err is a request for help (already printed).
func isHelp(err error) bool { return errors.Is(err, flag.ErrHelp) }
