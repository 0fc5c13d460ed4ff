package chaos

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/anishathalye/porcupine"
)

// The checkers checked: each must fire on a history that breaks its
// invariant and stay quiet on one that does not. These tests need no root
// and no cluster, so they run with every `go test ./e2e/...`.

func w(client int, v, call, ret int64, ok bool) queueOp {
	return queueOp{client: client, write: true, value: v, call: call, ret: ret, ok: ok}
}

func r(client int, v, call, ret int64) queueOp {
	return queueOp{client: client, value: v, call: call, ret: ret, ok: true}
}

func TestRegisterHistories(t *testing.T) {
	rn := &run{dir: t.TempDir()}
	cases := []struct {
		name    string
		ops     []queueOp
		want    porcupine.CheckResult
		explain string
	}{
		{"sequential", []queueOp{w(0, 2, 0, 1, true), r(1, 2, 2, 3), w(0, 3, 4, 5, true), r(1, 3, 6, 7)}, porcupine.Ok, ""},
		{"concurrent read may see either", []queueOp{w(0, 2, 0, 1, true), w(0, 3, 2, 10, true), r(1, 2, 3, 4), r(2, 3, 5, 6), r(1, 3, 11, 12)}, porcupine.Ok, ""},
		{"stale read", []queueOp{w(0, 2, 0, 1, true), w(0, 3, 2, 3, true), r(1, 2, 4, 5)}, porcupine.Illegal, "stale read"},
		{"read from the future", []queueOp{w(0, 2, 0, 1, true), r(1, 3, 2, 3), w(0, 3, 4, 5, true)}, porcupine.Illegal, "before its write was made"},
		{"unknown write seen late", []queueOp{w(0, 2, 0, 1, true), w(0, 3, 2, 3, false), r(1, 2, 4, 5), r(1, 3, 10, 11), r(1, 3, 12, 13)}, porcupine.Ok, ""},
		{"unknown write never seen", []queueOp{w(0, 2, 0, 1, true), w(0, 3, 2, 3, false), r(1, 2, 4, 5), r(1, 2, 10, 11)}, porcupine.Ok, ""},
		{"unknown write seen, then undone", []queueOp{w(0, 2, 0, 1, true), w(0, 3, 2, 3, false), r(1, 3, 4, 5), r(1, 2, 6, 7)}, porcupine.Illegal, ""},
		{"a write applied twice", []queueOp{w(3, 1, -2, -1, true), w(0, 2, 0, 20, true), r(1, 2, 1, 2), w(2, 3, 3, 4, true), r(1, 3, 5, 6), r(1, 2, 7, 8)}, porcupine.Illegal, ""},
		{"acknowledged write lost", []queueOp{w(0, 2, 0, 1, true), w(0, 3, 2, 3, true), r(1, 3, 4, 5), r(1, 2, 6, 7)}, porcupine.Illegal, "stale read"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got, evidence := rn.checkLinearizable(c.ops, strings.ReplaceAll(c.name, " ", "-"), 10*time.Second)
			if got != c.want {
				t.Fatalf("got %s, want %s (%s)", got, c.want, evidence)
			}
			if !strings.Contains(evidence, c.explain) {
				t.Fatalf("evidence %q does not say %q", evidence, c.explain)
			}
		})
	}
	pops, _ := toPorcupine([]queueOp{w(0, 2, 0, 1, true), w(0, 3, 2, 3, false), w(0, 4, 2, 3, false), r(1, 4, 5, 6)})
	if len(pops) != 3 {
		t.Fatalf("an unknown write no read saw must be left out: %d ops", len(pops))
	}
}

func TestTermWatch(t *testing.T) {
	dir := t.TempDir()
	c := &cluster{servers: map[string]*process{}}
	for _, s := range serverNames {
		c.servers[s] = &process{name: s, logPath: filepath.Join(dir, s+".log")}
	}
	write := func(s, text string) {
		f, _ := os.OpenFile(c.servers[s].logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
		f.WriteString(text)
		f.Close()
	}
	tw := newTermWatch()
	write("s1", "2026-11-23T00:57:57.877Z [INFO]  weft.raft: election won: term=2 tally=2\n")
	write("s2", "2026-11-23T00:58:57.877Z [INFO]  weft.raft: election won: term=3 tally=2\n")
	if v := tw.scan(c); len(v) != 0 {
		t.Fatalf("distinct terms reported: %v", v)
	}
	write("s3", "2026-11-23T00:59:57.877Z [INFO]  weft.raft: election won: term=3 tally=2\n2026-11-23T00:59:58")
	v := tw.scan(c)
	if len(v) != 1 || !strings.Contains(v[0], "term 3 was won by 2 servers") {
		t.Fatalf("two winners of term 3: %v", v)
	}
	write("s3", ".000Z [INFO]  weft.raft: entering leader state\n")
	if v := tw.scan(c); len(v) != 0 {
		t.Fatalf("reported twice: %v", v)
	}
	if terms, most := tw.figures(); terms != 2 || most != 2 {
		t.Fatalf("figures %d %d", terms, most)
	}
}

func node(id, status string, epoch uint64, mem int64) nodeInfo {
	return nodeInfo{ID: id, Status: status, Epoch: epoch, Capacity: resources{MemoryMB: 1024, Vcores: 3},
		AllocatedGuaranteed: resources{MemoryMB: mem, Vcores: 1}}
}

func TestNodeWatch(t *testing.T) {
	nw := newNodeWatch()
	s := int64(time.Second)
	nw.setBaseline([]nodeInfo{node("a1", "READY", 1, 0), node("a2", "READY", 1, 0)})
	if over, down := nw.observe([]nodeInfo{node("a1", "READY", 1, 2048), node("a2", "READY", 1, 0)}, 1*s); len(over) != 1 || len(down) != 0 {
		t.Fatalf("recorded overcommit: over %v down %v", over, down)
	}
	nw.exempt("a2")
	if _, down := nw.observe([]nodeInfo{node("a1", "READY", 1, 0), node("a2", "DOWN", 1, 0)}, 2*s); len(down) != 0 {
		t.Fatalf("a faulted agent reported: %v", down)
	}
	nw.healed("a2", 3*s)
	if _, down := nw.observe([]nodeInfo{node("a1", "READY", 1, 0), node("a2", "READY", 2, 0)}, 10*s); len(down) != 0 {
		t.Fatalf("an agent within its grace reported: %v", down)
	}
	if ex := nw.exemptNow(); len(ex) != 1 {
		t.Fatalf("a2 still in its grace: %v", ex)
	}
	if _, down := nw.observe([]nodeInfo{node("a1", "READY", 1, 0), node("a2", "READY", 2, 0)}, 3*s+int64(nodeGrace)+1); len(down) != 0 {
		t.Fatalf("the grace's end reported: %v", down)
	}
	if ex := nw.exemptNow(); len(ex) != 0 {
		t.Fatalf("a2 should be healthy again: %v", ex)
	}
	_, down := nw.observe([]nodeInfo{node("a1", "DOWN", 1, 0), node("a2", "READY", 3, 0)}, 30*s)
	if len(down) != 2 || !strings.Contains(strings.Join(down, "\n"), "epoch 2 → 3") {
		t.Fatalf("a healthy node DOWN and one registered again: %v", down)
	}
	if _, down := nw.observe([]nodeInfo{node("a1", "DOWN", 1, 0), node("a2", "READY", 3, 0)}, 31*s); len(down) != 0 {
		t.Fatalf("the same episode reported twice: %v", down)
	}
}

func TestPlans(t *testing.T) {
	seen := map[faultKind]bool{}
	for i := 1; i <= len(allKinds); i++ {
		p := planRound(42, i, allKinds)
		if q := planRound(42, i, allKinds); fmt.Sprint(p) != fmt.Sprint(q) {
			t.Fatalf("round %d differs between two plans of one seed: %v %v", i, p, q)
		}
		seen[p.faults[0].kind] = true
		if len(p.faults) == 2 && p.faults[0].kind.onAgent() == p.faults[1].kind.onAgent() {
			t.Fatalf("two faults of one class: %v", p.faults)
		}
	}
	if len(seen) != len(allKinds) {
		t.Fatalf("the first %d rounds cover %v", len(allKinds), seen)
	}
	if _, err := parseKinds("leader-kill,bogus"); err == nil {
		t.Fatal("an unknown kind accepted")
	}
}

func TestDiffServers(t *testing.T) {
	mk := func(state string) *serverState {
		return &serverState{apps: map[string]appInfo{"app-1": {ID: "app-1", Name: "x", State: state}},
			nodes: map[string]nodeInfo{"a1": node("a1", "READY", 1, 0)}}
	}
	if d := diffServers(map[string]*serverState{"s1": mk("FINISHED"), "s2": mk("FINISHED"), "s3": mk("FINISHED")}); len(d) != 0 {
		t.Fatalf("equal states differ: %v", d)
	}
	d := diffServers(map[string]*serverState{"s1": mk("FINISHED"), "s2": mk("RUNNING"), "s3": mk("FINISHED")})
	if len(d) != 1 || !strings.Contains(d[0], "x/RUNNING on s2") {
		t.Fatalf("a divergence: %v", d)
	}
}

// TestProcWatch runs three fake guaranteed containers (sleep processes with
// a container's environment) in this test's own network namespace, which
// it passes off as agent a1's: together they are over a1's capacity.
func TestProcWatch(t *testing.T) {
	link, err := os.Readlink("/proc/self/ns/net")
	if err != nil {
		t.Skipf("no /proc/self/ns/net: %v", err)
	}
	var ino uint64
	fmt.Sscanf(link, "net:[%d]", &ino)
	rn := &run{apps: newAppBook(), nodes: newNodeWatch(), start: time.Now()}
	pw := newProcWatch(rn)
	pw.nsNode = map[uint64]string{ino: "a1"}
	app := fmt.Sprintf("app-selftest-%d", os.Getpid())
	rn.apps.record(&submission{name: app, appID: app, spec: appSpec{memoryMB: 512}})
	rn.apps.pending = 0
	var procs []*exec.Cmd
	for i := 0; i < 3; i++ {
		cmd := exec.Command("sleep", "30")
		cmd.Env = append(os.Environ(), "WEFT_CONTAINER_ID="+fmt.Sprintf("%s-c%d", app, i), "WEFT_APP_ID="+app,
			"WEFT_NODE_ID=a1", "WEFT_EXECUTION_TYPE=GUARANTEED")
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		procs = append(procs, cmd)
	}
	defer func() {
		for _, p := range procs {
			p.Process.Kill()
			p.Wait()
		}
	}()
	mine := func() map[string]*liveContainer {
		out := map[string]*liveContainer{}
		for id, c := range pw.scan() {
			if c.app == app {
				out[id] = c
			}
		}
		return out
	}
	live := mine()
	if len(live) != 3 {
		t.Fatalf("found %d of 3 containers", len(live))
	}
	problems, over, _ := pw.evaluate(live)
	if !over || len(problems) != 1 || !strings.Contains(problems[0], "memory_mb=1536,vcores=3 > capacity memory_mb=1024,vcores=3") {
		t.Fatalf("three 512 MB containers on a 1024 MB node: over=%v %v", over, problems)
	}
	// A process that ended after the scan makes the sum unconfirmed.
	procs[0].Process.Signal(syscall.SIGKILL)
	procs[0].Wait()
	if problems, over, unconfirmed := pw.evaluate(live); over || len(problems) != 0 || unconfirmed != 1 {
		t.Fatalf("a stale scan confirmed: over=%v unconfirmed=%d %v", over, unconfirmed, problems)
	}
	if problems, over, _ := pw.evaluate(mine()); over || len(problems) != 0 {
		t.Fatalf("two 512 MB containers fit: %v", problems)
	}
}
