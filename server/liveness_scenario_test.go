package server

import (
	"bufio"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/weft-sched/weft/scheduler"
)

var rewrite = flag.Bool("rewrite", false, "rewrite the expected output of the data-driven tests")

// TestLivenessScenarios runs the scenarios of testdata/liveness/*.txt
// against the liveness state machine, in the style of etcd-io/raft's
// data-driven tests. Each case is commands, a "----" line, and the output
// they must produce; `go test -run LivenessScenarios -rewrite` writes what
// they produce instead. Commands (times are offsets from the start):
//
//	nodes ID...            the READY nodes at epoch 1 (clears the rest)
//	reset AT               leadership begins at AT
//	beat AT ID...          the nodes heartbeat at AT
//	gossip ID STATUS       serf says alive, failed or left
//	epoch ID N             the node re-registered at epoch N
//	tick AT                print what Tick decides at AT (DOWN nodes are kept DOWN)
func TestLivenessScenarios(t *testing.T) {
	files, err := filepath.Glob("testdata/liveness/*.txt")
	if err != nil || len(files) == 0 {
		t.Fatalf("no scenarios: %v", err)
	}
	for _, f := range files {
		t.Run(filepath.Base(f), func(t *testing.T) { runScenarioFile(t, f) })
	}
}

type scenarioCase struct {
	cmds []string
	want string
}

func runScenarioFile(t *testing.T, path string) {
	cases, header := readScenarios(t, path)
	var out strings.Builder
	out.WriteString(header)
	l := newLiveness(10*time.Second, 3*time.Second)
	var nodes []*scheduler.Node
	for i, c := range cases {
		got := runScenario(t, l, &nodes, c.cmds)
		if !*rewrite && got != c.want {
			t.Errorf("%s, case %d:\n%s\n---- got:\n%s---- want:\n%s", path, i+1, strings.Join(c.cmds, "\n"), got, c.want)
		}
		out.WriteString(strings.Join(c.cmds, "\n") + "\n----\n" + got + "\n")
	}
	if *rewrite {
		if err := os.WriteFile(path, []byte(strings.TrimRight(out.String(), "\n")+"\n"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// readScenarios splits a file into cases; lines before the first command
// that start with '#' are its header, kept on rewrite.
func readScenarios(t *testing.T, path string) ([]scenarioCase, string) {
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var cases []scenarioCase
	var header strings.Builder
	var cur scenarioCase
	inWant := false
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := sc.Text()
		switch {
		case !inWant && len(cases) == 0 && len(cur.cmds) == 0 && (strings.HasPrefix(line, "#") || line == ""):
			header.WriteString(line + "\n")
		case line == "----":
			inWant = true
		case inWant && line == "":
			cases = append(cases, cur)
			cur, inWant = scenarioCase{}, false
		case inWant:
			cur.want += line + "\n"
		case line != "":
			cur.cmds = append(cur.cmds, line)
		}
	}
	if inWant || len(cur.cmds) > 0 {
		cases = append(cases, cur)
	}
	return cases, header.String()
}

func runScenario(t *testing.T, l *liveness, nodes *[]*scheduler.Node, cmds []string) string {
	at := func(s string) time.Time {
		d, err := time.ParseDuration(s)
		if err != nil {
			t.Fatalf("bad time %q: %v", s, err)
		}
		return t0.Add(d)
	}
	node := func(id string) *scheduler.Node {
		for _, n := range *nodes {
			if n.ID == id {
				return n
			}
		}
		t.Fatalf("no node %s", id)
		return nil
	}
	var out strings.Builder
	for _, cmd := range cmds {
		f := strings.Fields(cmd)
		switch f[0] {
		case "nodes":
			*nodes = nil
			for _, id := range f[1:] {
				*nodes = append(*nodes, &scheduler.Node{ID: id, Epoch: 1, Status: scheduler.NodeReady})
			}
		case "reset":
			l.Reset(at(f[1]))
		case "beat":
			for _, id := range f[2:] {
				l.Heartbeat(id, node(id).Epoch, at(f[1]), nil)
			}
		case "gossip":
			g := map[string]gossipStatus{"alive": gossipAlive, "failed": gossipFailed, "left": gossipLeft}[f[2]]
			l.Gossip(f[1], g)
		case "epoch":
			n := node(f[1])
			fmt.Sscan(f[2], &n.Epoch)
			n.Status = scheduler.NodeReady
		case "tick":
			downs := l.Tick(at(f[1]), *nodes)
			sort.Slice(downs, func(i, j int) bool { return downs[i].ID < downs[j].ID })
			for _, d := range downs {
				node(d.ID).Status = scheduler.NodeDown
				fmt.Fprintf(&out, "%s: down %s@%d: %s\n", f[1], d.ID, d.Epoch, d.Reason)
			}
			if len(downs) == 0 {
				fmt.Fprintf(&out, "%s: none down", f[1])
				if l.Isolated() {
					out.WriteString(" (isolated)")
				}
				out.WriteString("\n")
			}
		default:
			t.Fatalf("unknown command %q", cmd)
		}
	}
	return out.String()
}
