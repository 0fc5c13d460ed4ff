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
)

// version is stamped by the Makefile (-ldflags "-X main.version=...").
var version = "dev"

type command struct {
	synopsis string
	run      func(args []string) error
}

// commands maps each top-level word to its handler. Groups (queue,
// operator) dispatch again on their second word.
var commands map[string]command

func init() {
	commands = map[string]command{
		"server":    {"run a weft server", runServer},
		"dev":       {"run a one-process development cluster on 127.0.0.1", runDev},
		"members":   {"list the members of the gossip pool", runMembers},
		"status":    {"summarise the cluster", runStatus},
		"operator":  {"operator actions (raft list-peers|remove-peer, keygen, gossip keyring, workload-key rotate)", runOperator},
		"queue":     {"apply, list and inspect queues", runQueue},
		"version":   {"print the version", runVersion},
		"agent":     {"run a weft agent (a node that runs containers)", runAgent},
		"app":       {"submit, list, inspect, wait for and kill apps", runApp},
		"container": {"list containers and read their logs", runContainer},
		"node":      {"list and inspect agent nodes", runNode},
		"am":        {"run a built-in application master (used by agents)", runAM},
		"acl":       {"bootstrap ACLs; manage tokens and policies", runACL},
		"tls":       {"make a CA and certificates for mutual TLS (ca create, cert create)", runTLS},
	}
}

var stdout io.Writer = os.Stdout
var stderr io.Writer = os.Stderr

func main() { os.Exit(run(os.Args[1:])) }

// usageError is bad usage: exit code 2.
type usageError struct{ msg string }

func (e *usageError) Error() string { return e.msg }

func usagef(format string, a ...any) error { return &usageError{fmt.Sprintf(format, a...)} }

func run(args []string) int {
	if len(args) == 0 || args[0] == "-h" || args[0] == "-help" || args[0] == "--help" || args[0] == "help" {
		printUsage(stderr)
		if len(args) == 0 {
			return 2
		}
		return 0
	}
	cmd, ok := commands[args[0]]
	if !ok {
		fmt.Fprintf(stderr, "Error: unknown command %q; run 'weft -h' for the list of commands\n", args[0])
		return 2
	}
	err := cmd.run(args[1:])
	if err == nil || errors.Is(err, flag.ErrHelp) {
		return 0
	}
	fmt.Fprintln(stderr, "Error: "+oneLine(err.Error()))
	var ue *usageError
	if errors.As(err, &ue) {
		return 2
	}
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

func printUsage(w io.Writer) {
	fmt.Fprintln(w, "Usage: weft COMMAND [flags] [args]")
	fmt.Fprintln(w, "\nCommands:")
	names := make([]string, 0, len(commands))
	for n := range commands {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		fmt.Fprintf(w, "  %-10s %s\n", n, commands[n].synopsis)
	}
	fmt.Fprintln(w, "\nClient commands take -address HOST:PORT (or WEFT_ADDR), -json and -stale,")
	fmt.Fprintln(w, "and -ca-cert, -client-cert, -client-key (or WEFT_CACERT, WEFT_CLIENT_CERT, WEFT_CLIENT_KEY) for TLS.")
	fmt.Fprintln(w, "Run 'weft COMMAND -h' for a command's flags.")
}

// subcommand dispatches a command group such as "queue apply".
func subcommand(group string, args []string, subs map[string]func([]string) error) error {
	names := make([]string, 0, len(subs))
	for n := range subs {
		names = append(names, n)
	}
	sort.Strings(names)
	if len(args) == 0 {
		return usagef("weft %s needs a subcommand: %s", group, strings.Join(names, ", "))
	}
	f, ok := subs[args[0]]
	if !ok {
		return usagef("weft %s has no subcommand %q; use one of: %s", group, args[0], strings.Join(names, ", "))
	}
	return f(args[1:])
}

func runVersion(args []string) error {
	fmt.Fprintln(stdout, "weft", version)
	return nil
}
