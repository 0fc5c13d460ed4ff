// Command weft is the single binary of the weft scheduler: servers, agents,
// the built-in application masters and the client command line.
package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"sort"
	"strings"

	"github.com/weft-sched/weft/fsm"
	"github.com/weft-sched/weft/internal/containerinit"
)

// version is stamped by the Makefile (-ldflags "-X main.version=...").
var version = "dev"

// commands maps each top-level word to its handler; their help is in
// help_text.go. Groups (queue, operator, ...) dispatch again on their
// second word with subcommand.
var commands map[string]func(args []string) error

func init() {
	commands = map[string]func(args []string) error{
		"server":     runServer,
		"router":     runRouter,
		"federation": runFederation,
		"dev":        runDev,
		"members":    runMembers,
		"status":     runStatus,
		"operator":   runOperator,
		"queue":      runQueue,
		"version":    runVersion,
		"agent":      runAgent,
		"app":        runApp,
		"container":  runContainer,
		"node":       runNode,
		"am":         runAM,
		"acl":        runACL,
		"tls":        runTLS,
		"sim":        runSim,
		"help":       runHelp,
	}
}

var stdout io.Writer = os.Stdout
var stderr io.Writer = os.Stderr

func main() {
	// Not a user's command (and so not in commands or the help): an agent
	// runs it as each container's first process (internal/containerinit).
	if len(os.Args) > 1 && os.Args[1] == containerinit.Command {
		os.Exit(containerinit.Main())
	}
	os.Exit(run(os.Args[1:]))
}

// usageError is bad usage: exit code 2.
type usageError struct{ msg string }

func (e *usageError) Error() string { return e.msg }

func usagef(format string, a ...any) error { return &usageError{fmt.Sprintf(format, a...)} }

func run(args []string) int {
	cmdPath = ""
	switch {
	case len(args) == 0:
		printTopHelp(stdout)
		fmt.Fprintln(stderr, "Error: weft needs a command; run 'weft -h' for help")
		return 2
	case isHelpArg(args[0]):
		printTopHelp(stdout)
		return 0
	case args[0] == "-version" || args[0] == "--version":
		args = append([]string{"version"}, args[1:]...)
	}
	cmd, ok := commands[args[0]]
	if !ok {
		fmt.Fprintf(stderr, "Error: unknown command %q; run 'weft -h' for the list of commands\n", args[0])
		return 2
	}
	cmdPath = args[0]
	err := cmd(args[1:])
	if err == nil || isHelp(err) {
		return 0
	}
	var ue *usageError
	if errors.As(err, &ue) {
		if ue != errUsageShown {
			fmt.Fprintln(stderr, "Error: "+usageHint(oneLine(err.Error())))
		}
		return 2
	}
	fmt.Fprintln(stderr, "Error: "+oneLine(err.Error()))
	var halt *fsm.HaltError
	if errors.As(err, &halt) {
		return exitHalted
	}
	return 1
}

// exitHalted is the exit code of a server that stopped on a committed Raft
// entry it cannot apply: restarting it as it is stops it again at the same
// entry, so supervisors should not (systemd: RestartPreventExitStatus=3).
// The recovery is in docs/operations.md, "Unknown Raft entries".
const exitHalted = 3

func oneLine(s string) string {
	return strings.Join(strings.Fields(strings.ReplaceAll(s, "\n", " ")), " ")
}

// subcommand dispatches a command group such as "queue apply". The group
// alone lists its subcommands and is bad usage (exit 2, one line on
// stderr); -h lists them and is not.
func subcommand(group string, args []string, subs map[string]func([]string) error) error {
	names := make([]string, 0, len(subs))
	for n := range subs {
		names = append(names, n)
	}
	sort.Strings(names)
	switch {
	case len(args) == 0:
		printGroupHelp(stdout, group, names)
		return usagef("weft %s needs a subcommand: %s", group, strings.Join(names, ", "))
	case isHelpArg(args[0]):
		printGroupHelp(stdout, group, names)
		return flag.ErrHelp
	}
	f, ok := subs[args[0]]
	if !ok {
		return usagef("weft %s has no subcommand %q; use one of: %s", group, args[0], strings.Join(names, ", "))
	}
	cmdPath = group + " " + args[0]
	return f(args[1:])
}
