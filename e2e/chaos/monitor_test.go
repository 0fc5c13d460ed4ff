package chaos

import (
	"fmt"
	"math/rand/v2"
	"sort"
	"strings"
	"sync"
	"time"
)

// The monitors run from the cluster's start to the end of the run, beside
// the load: the node watch reads the servers' records, the process watch
// (proc_test.go) the machine's real processes, the app watch the apps.

// nodeGrace is how long after a faulted agent is healed it stays exempt
// from the healthy-node checks: past one node TTL (10 s), so a DOWN mark
// that the fault earned but the leader makes only after the heal is not
// blamed on a healthy node.
const nodeGrace = 15 * time.Second

// nodeWatch checks, from `weft node list`, that no node is ever recorded
// with more guaranteed resources allocated than its capacity, and that no
// node the harness did not fault goes DOWN or changes epoch (a new epoch
// means it registered again, which kills its containers).
type nodeWatch struct {
	mu       sync.Mutex
	exempted map[string]int   // agent → faults on it not yet over
	healedAt map[string]int64 // agent → when its last fault was healed
	baseline map[string]uint64
	rebase   map[string]bool // take the baseline epoch at the next sample
	bad      map[string]bool // a violation was reported and the node has not been READY since

	samples      int
	overSamples  int
	downReported int
	last         map[string]nodeInfo
	lastAt       int64
}

func newNodeWatch() *nodeWatch {
	return &nodeWatch{exempted: map[string]int{}, healedAt: map[string]int64{}, baseline: map[string]uint64{},
		rebase: map[string]bool{}, bad: map[string]bool{}, last: map[string]nodeInfo{}}
}

// exempt starts a fault on an agent.
func (w *nodeWatch) exempt(agent string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.exempted[agent]++
	w.healedAt[agent] = 0
}

// healed ends a fault on an agent; the exemption lasts until nodeGrace
// after the heal and the node is READY again.
func (w *nodeWatch) healed(agent string, at int64) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.exempted[agent] > 0 {
		w.exempted[agent]--
	}
	if w.exempted[agent] == 0 {
		w.healedAt[agent] = at
	}
}

// isExempt reports whether an agent is exempt at time now, ending the
// exemption when it is over.
func (w *nodeWatch) isExemptLocked(agent string, now int64, n nodeInfo) bool {
	if w.exempted[agent] > 0 {
		return true
	}
	h, ok := w.healedAt[agent]
	if !ok {
		return false
	}
	if h == 0 || now-h < int64(nodeGrace) || n.Status != "READY" {
		return true
	}
	delete(w.healedAt, agent)
	w.rebase[agent] = true
	return false
}

// exemptNow lists the agents exempt at the moment: under a fault or in
// their grace after it (exempt records every faulted agent in healedAt).
func (w *nodeWatch) exemptNow() []string {
	w.mu.Lock()
	defer w.mu.Unlock()
	var out []string
	for a := range w.healedAt {
		out = append(out, a)
	}
	sort.Strings(out)
	return out
}

// setBaseline records every node's epoch when the cluster first is healthy.
func (w *nodeWatch) setBaseline(nodes []nodeInfo) {
	w.mu.Lock()
	defer w.mu.Unlock()
	for _, n := range nodes {
		w.baseline[n.ID] = n.Epoch
	}
}

// observe checks one sample and returns the violations it shows.
func (w *nodeWatch) observe(nodes []nodeInfo, now int64) (over, down []string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.samples++
	w.lastAt = now
	overNow := false
	for _, n := range nodes {
		w.last[n.ID] = n
		if !n.AllocatedGuaranteed.fits(n.Capacity) {
			overNow = true
			over = append(over, fmt.Sprintf("node %s: allocated_guaranteed %s > capacity %s (%d running guaranteed)",
				n.ID, n.AllocatedGuaranteed, n.Capacity, n.RunningGuaranteed))
		}
		if w.isExemptLocked(n.ID, now, n) {
			continue
		}
		if w.rebase[n.ID] {
			w.baseline[n.ID] = n.Epoch
			delete(w.rebase, n.ID)
			delete(w.bad, n.ID)
			continue
		}
		base, known := w.baseline[n.ID]
		if !known {
			w.baseline[n.ID] = n.Epoch
			continue
		}
		if w.bad[n.ID] {
			if n.Status == "READY" {
				w.baseline[n.ID] = n.Epoch
				delete(w.bad, n.ID)
			}
			continue
		}
		switch {
		case n.Status != "READY":
			down = append(down, fmt.Sprintf("node %s, not faulted by the harness, is %s (%s) at epoch %d", n.ID, n.Status, n.StatusReason, n.Epoch))
		case n.Epoch != base:
			down = append(down, fmt.Sprintf("node %s, not faulted by the harness, registered again: epoch %d → %d (its containers were stopped)", n.ID, base, n.Epoch))
		default:
			continue
		}
		w.bad[n.ID] = true
		w.downReported++
	}
	if overNow {
		w.overSamples++
	}
	return over, down
}

// nodeLoop polls `weft node list` (a consistent read through any server)
// every half second.
func (rn *run) nodeLoop() {
	defer rn.monitors.Done()
	rng := rand.New(rand.NewPCG(rn.cfg.seed, 0xdead))
	tick := time.NewTicker(500 * time.Millisecond)
	defer tick.Stop()
	for {
		select {
		case <-rn.stopMon:
			return
		case <-tick.C:
		}
		var nodes []nodeInfo
		if _, err := rn.cliJSON(pollTimeout, rn.shuffled(rng), &nodes, "node", "list"); err != nil {
			continue // no leader at the moment, or it is cut off: the next sample
		}
		over, down := rn.nodes.observe(nodes, rn.now())
		for _, o := range over {
			rn.fail("recorded-overcommit", "%s", o)
		}
		for _, d := range down {
			rn.fail("healthy-node-down", "%s; the servers' logs say: %s", d, rn.downEvidence(d))
		}
	}
}

// downEvidence finds the servers' log lines about marking the node down.
func (rn *run) downEvidence(what string) string {
	f := strings.Fields(what)
	if len(f) < 2 {
		return ""
	}
	node := strings.TrimSuffix(f[1], ",")
	var lines []string
	for _, s := range serverNames {
		for _, l := range grepFile(rn.c.servers[s].logPath, "marking node down", "node="+node) {
			lines = append(lines, s+": "+l)
		}
	}
	if len(lines) == 0 {
		lines = append(lines, "(no server has logged 'marking node down' for it yet)")
	}
	if len(lines) > 3 {
		lines = lines[len(lines)-3:]
	}
	if p, ok := rn.c.agents[node]; ok {
		var own []string
		for _, needle := range []string{"heartbeat failed", "no longer know this node", "registered"} {
			own = append(own, grepFile(p.logPath, needle)...)
		}
		sort.Strings(own) // the lines start with their time
		if len(own) > 4 {
			own = own[len(own)-4:]
		}
		if len(own) == 0 {
			own = []string{"(no heartbeat failure logged)"}
		}
		for _, l := range own {
			lines = append(lines, node+": "+l)
		}
	}
	return "\n    " + strings.Join(lines, "\n    ")
}

// waitNodesSettled waits until no agent is exempt any more, i.e. every
// faulted agent is READY again a node TTL after its heal.
func (rn *run) waitNodesSettled(timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	for {
		ex := rn.nodes.exemptNow()
		if len(ex) == 0 {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("agents %v not READY again within %s of the heal", ex, timeout)
		}
		time.Sleep(200 * time.Millisecond)
	}
}
