package main

import (
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/weft-sched/weft/rpc"
)

// defaultAddress is where client commands look for a server.
const defaultAddress = "127.0.0.1:8030"

// clientFlags are the global flags of every client command (SPEC §14).
type clientFlags struct {
	address string
	json    bool
	stale   bool
}

// newFlagSet returns a flag set that stays quiet on errors (parseArgs
// reports them in one line) and prints its flags only for -h.
func newFlagSet(name string) *flag.FlagSet {
	fs := flag.NewFlagSet("weft "+name, flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	fs.Usage = func() {}
	return fs
}

func (c *clientFlags) register(fs *flag.FlagSet) {
	addr := os.Getenv("WEFT_ADDR")
	if addr == "" {
		addr = defaultAddress
	}
	fs.StringVar(&c.address, "address", addr, "server `HOST:PORT` to talk to; several may be given, comma-separated (env WEFT_ADDR)")
	fs.BoolVar(&c.json, "json", false, "print JSON")
	fs.BoolVar(&c.stale, "stale", false, "let any server answer from its local state, which may be slightly behind the leader")
}

func (c *clientFlags) header() rpc.RequestHeader { return rpc.RequestHeader{AllowStale: c.stale} }

func (c *clientFlags) client() *rpc.Client {
	var addrs []string
	for _, a := range strings.Split(c.address, ",") {
		if a = strings.TrimSpace(a); a != "" {
			addrs = append(addrs, a)
		}
	}
	return rpc.NewClient(addrs, nil)
}

// call makes one RPC and turns failures into errors that say what to do.
func (c *clientFlags) call(method string, args, reply any) error {
	cl := c.client()
	defer cl.Close()
	err := cl.Call(method, args, reply)
	switch {
	case err == nil:
		return nil
	case errors.Is(err, rpc.ErrNoServers):
		return usagef("no server address given: set -address or WEFT_ADDR")
	case rpc.IsNoLeader(err):
		return fmt.Errorf("%v: the servers have no elected leader yet; check 'weft members -stale' and the server logs", err)
	case !rpc.IsServerError(err):
		return fmt.Errorf("cannot reach a weft server at %s (%v); start one with 'make dev' or point -address / WEFT_ADDR at a server", c.address, err)
	}
	return err
}

// parseArgs parses flags that may come before, between or after positional
// arguments, and returns the positionals. Everything after "--" is
// positional, verbatim. Bad flags are usage errors.
func parseArgs(fs *flag.FlagSet, args []string) ([]string, error) {
	var rest []string
	for i, a := range args {
		if a == "--" {
			args, rest = args[:i], args[i+1:]
			break
		}
	}
	var pos []string
	for {
		if err := fs.Parse(args); err != nil {
			if errors.Is(err, flag.ErrHelp) {
				fmt.Fprintf(stderr, "Usage of %s:\n", fs.Name())
				fs.SetOutput(stderr)
				fs.PrintDefaults()
				return nil, err
			}
			return nil, usagef("%v; run '%s -h' for its flags", err, fs.Name())
		}
		args = fs.Args()
		if len(args) == 0 {
			return append(pos, rest...), nil
		}
		pos = append(pos, args[0])
		args = args[1:]
	}
}

// clientCommand parses a client command's arguments: the global client
// flags plus any that extra registers, and exactly nargs positionals.
func clientCommand(name string, args []string, nargs int, usage string, extra func(*flag.FlagSet)) (*clientFlags, []string, error) {
	cf := &clientFlags{}
	fs := newFlagSet(name)
	cf.register(fs)
	if extra != nil {
		extra(fs)
	}
	pos, err := parseArgs(fs, args)
	if err != nil {
		return nil, nil, err
	}
	if len(pos) != nargs {
		return nil, nil, usagef("usage: %s", usage)
	}
	return cf, pos, nil
}

// orEmpty makes a nil list print as [] rather than null in JSON.
func orEmpty[T any](s []T) []T {
	if s == nil {
		return []T{}
	}
	return s
}

func printJSON(v any) error {
	enc := json.NewEncoder(stdout)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}
