package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/weft-sched/weft/rpc"
)

// defaultAddress is where client commands look for a server.
const defaultAddress = "127.0.0.1:8030"

// clientBudget bounds how long a client command keeps trying the servers
// (waiting out a leader election, say) before it gives up.
const clientBudget = 30 * time.Second

// clientFlags are the global flags of every client command (SPEC §14).
type clientFlags struct {
	address string
	token   string
	json    bool
	stale   bool
	prog    progress // what the client has said while it waits
	// TLS files (cmd_tls.go); TLS is on with caCert.
	caCert, clientCert, clientKey string
}

// newFlagSet returns a flag set that stays quiet on errors (parseArgs
// reports them in one line) and prints its flags only for -h.
func newFlagSet(name string) *flag.FlagSet {
	fs := flag.NewFlagSet("weft "+name, flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	fs.Usage = func() {}
	return fs
}

// commaList is a repeatable flag of names separated by commas (-policy,
// -nodes): each use adds its names, and blank names are dropped.
type commaList []string

func (l *commaList) String() string { return strings.Join(*l, ",") }
func (l *commaList) Set(s string) error {
	for _, name := range strings.Split(s, ",") {
		if name = strings.TrimSpace(name); name != "" {
			*l = append(*l, name)
		}
	}
	return nil
}

// repeated is a repeatable flag whose every use is one value, commas and
// all (-feed).
type repeated []string

func (l *repeated) String() string     { return strings.Join(*l, " ") }
func (l *repeated) Set(s string) error { *l = append(*l, s); return nil }

func (c *clientFlags) register(fs *flag.FlagSet) {
	addr := os.Getenv("WEFT_ADDR")
	if addr == "" {
		addr = defaultAddress
	}
	fs.StringVar(&c.address, "address", addr, "server `HOST:PORT` to talk to; several may be given, comma-separated (env WEFT_ADDR)")
	fs.StringVar(&c.token, "token", os.Getenv("WEFT_TOKEN"), "ACL token `SECRET` sent with every request (env WEFT_TOKEN)")
	fs.BoolVar(&c.json, "json", false, "print JSON")
	fs.BoolVar(&c.stale, "stale", false, "let any server answer from its local state, which may be slightly behind the leader")
	c.registerTLS(fs)
}

func (c *clientFlags) header() rpc.RequestHeader { return rpc.RequestHeader{AllowStale: c.stale} }

// addresses parses -address: comma-separated HOST:PORT, each checked.
func (c *clientFlags) addresses() ([]string, error) {
	var out []string
	for _, a := range strings.Split(c.address, ",") {
		a = strings.TrimSpace(a)
		if a == "" {
			continue
		}
		if err := checkAddress(a); err != nil {
			return nil, usagef("-address %s: %v", a, err)
		}
		out = append(out, a)
	}
	if len(out) == 0 {
		return nil, usagef("no server address given: set -address or WEFT_ADDR to HOST:PORT, e.g. %s", defaultAddress)
	}
	return out, nil
}

// checkAddress accepts HOST:PORT and says what is wrong with anything else.
func checkAddress(a string) error {
	if i := strings.Index(a, "://"); i >= 0 {
		return fmt.Errorf("give HOST:PORT without a scheme, e.g. %s", a[i+3:])
	}
	host, port, err := net.SplitHostPort(a)
	if err != nil {
		if strings.Contains(err.Error(), "missing port") {
			return fmt.Errorf("missing the port; use %s", net.JoinHostPort(strings.Trim(a, "[]"), "8030"))
		}
		return fmt.Errorf("want HOST:PORT (%v)", err)
	}
	if host == "" {
		return fmt.Errorf("missing the host; use 127.0.0.1:%s", port)
	}
	if p, err := strconv.Atoi(port); err != nil || p < 1 || p > 65535 {
		return fmt.Errorf("port %q is not a number between 1 and 65535", port)
	}
	return nil
}

// client returns a client for -address that reports progress on stderr
// while the servers cannot answer (no leader yet, a server down): within a
// second, and then about once a second.
func (c *clientFlags) client() (*rpc.Client, error) {
	addrs, err := c.addresses()
	if err != nil {
		return nil, err
	}
	pool, err := c.pool()
	if err != nil {
		return nil, err
	}
	cl := rpc.NewClient(addrs, pool)
	cl.Token = c.token
	p := &c.prog
	cl.OnRetry = func(elapsed time.Duration, tried []rpc.ServerOutcome) {
		if elapsed < 500*time.Millisecond && !anyNoLeader(tried) {
			return // passing over a dead server is not worth a word
		}
		p.say(fmt.Sprintf("Waiting for the servers (%s): %s", elapsed.Round(time.Second), outcomes(tried)))
	}
	return cl, nil
}

// progress keeps one line of progress on stderr: rewritten in place on a
// terminal, else a new line at first and then every few seconds.
type progress struct {
	last  time.Time
	shown bool
}

func (p *progress) say(line string) {
	tty := isTerminal(stderr)
	switch {
	case tty && time.Since(p.last) >= 200*time.Millisecond:
		fmt.Fprint(stderr, "\r\033[K"+line)
	case !tty && (!p.shown || time.Since(p.last) >= 5*time.Second):
		fmt.Fprintln(stderr, line)
	default:
		return
	}
	p.last, p.shown = time.Now(), true
}

// done ends a line of progress left on a terminal.
func (p *progress) done() {
	if p.shown && isTerminal(stderr) {
		fmt.Fprintln(stderr)
	}
	p.shown = false
}

func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	fi, err := f.Stat()
	return err == nil && fi.Mode()&os.ModeCharDevice != 0
}

func anyNoLeader(tried []rpc.ServerOutcome) bool {
	for _, t := range tried {
		if rpc.IsNoLeader(t.Err) {
			return true
		}
	}
	return false
}

func outcomes(tried []rpc.ServerOutcome) string {
	parts := make([]string, len(tried))
	for i, t := range tried {
		parts[i] = t.Addr + " " + rpc.Describe(t.Err)
	}
	return strings.Join(parts, "; ")
}

// call makes one RPC and turns failures into errors that say what to do.
func (c *clientFlags) call(method string, args, reply any) error {
	cl, err := c.client()
	if err != nil {
		return err
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), clientBudget)
	defer cancel()
	err = cl.Call(ctx, method, args, reply)
	c.prog.done()
	return explain(err)
}

// explain turns a failed call into an error that says what happened on
// each server and what to do.
func explain(err error) error {
	var ce *rpc.CallError
	switch {
	case err == nil:
		return nil
	case errors.Is(err, rpc.ErrNoServers):
		return usagef("no server address given: set -address or WEFT_ADDR")
	case !errors.As(err, &ce):
		return err // a server's answer
	case anyNoLeader(ce.Tried):
		return fmt.Errorf("the servers have no elected leader (%s); check 'weft members -stale' and the server logs", outcomes(ce.Tried))
	}
	return fmt.Errorf("cannot reach a weft server (%s); start one with 'make dev' or point -address / WEFT_ADDR at a server", outcomes(ce.Tried))
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
				printCommandHelp(stdout, strings.TrimPrefix(fs.Name(), "weft "), fs)
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
	if _, err := cf.addresses(); err != nil {
		return nil, nil, err
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

// printStaleNote says on stderr how far behind a -stale answer may be.
func printStaleNote(cf *clientFlags, meta *rpc.ResponseMeta) {
	if cf.stale {
		if note := meta.StaleNote(); note != "" {
			fmt.Fprintln(stderr, "Note: "+note)
		}
	}
}

// noteUnreachable tells stderr which sub-clusters a federation's router
// could not include in a merged answer: what they hold is missing from
// it, not gone.
func noteUnreachable(subclusters []string) {
	for _, u := range subclusters {
		fmt.Fprintln(stderr, "Note: not listed, unreachable: "+u)
	}
}
