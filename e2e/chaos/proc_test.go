package chaos

import (
	"bytes"
	"fmt"
	"os"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"
)

// procWatch checks the real processes: every container is a process group
// whose environment carries WEFT_CONTAINER_ID, WEFT_APP_ID, WEFT_NODE_ID and
// WEFT_EXECUTION_TYPE (SPEC §12), and it runs in its agent's network
// namespace. Summing the resources of the live GUARANTEED containers per
// node must never pass the node's capacity. A scan of /proc is not atomic,
// so an over-capacity scan is confirmed by checking that every process
// counted is still the same live process afterwards: then they all ran at
// that instant.
type procWatch struct {
	rn     *run
	nsNode map[uint64]string

	mu          sync.Mutex
	samples     int
	overSamples int
	unconfirmed int
	lookups     map[string]map[string]containerInfo // app → container → info, from `weft container list`
}

func newProcWatch(rn *run) *procWatch {
	return &procWatch{rn: rn, lookups: map[string]map[string]containerInfo{}}
}

// liveProc is one process of a container.
type liveProc struct {
	pid       int
	starttime string
	cmd       string
}

// liveContainer is a container seen running in /proc.
type liveContainer struct {
	id, app, node, execType, envNode string
	am                               bool
	procs                            []liveProc
}

// procStat returns a process's state letter and start time.
func procStat(pid int) (state byte, start string, ok bool) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return 0, "", false
	}
	i := bytes.LastIndexByte(b, ')')
	if i < 0 || i+2 >= len(b) {
		return 0, "", false
	}
	f := strings.Fields(string(b[i+2:]))
	if len(f) < 20 {
		return 0, "", false
	}
	return f[0][0], f[19], true
}

// scan lists the live containers of the run's agents.
func (w *procWatch) scan() map[string]*liveContainer {
	out := map[string]*liveContainer{}
	ents, err := os.ReadDir("/proc")
	if err != nil {
		return out
	}
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		link, err := os.Readlink("/proc/" + e.Name() + "/ns/net")
		if err != nil {
			continue
		}
		ino, err := strconv.ParseUint(strings.TrimSuffix(strings.TrimPrefix(link, "net:["), "]"), 10, 64)
		if err != nil {
			continue
		}
		node, ok := w.nsNode[ino]
		if !ok {
			continue
		}
		env, err := os.ReadFile("/proc/" + e.Name() + "/environ")
		if err != nil {
			continue
		}
		vars := map[string]string{}
		for _, kv := range bytes.Split(env, []byte{0}) {
			if k, v, ok := strings.Cut(string(kv), "="); ok && strings.HasPrefix(k, "WEFT_") {
				vars[k] = v
			}
		}
		id := vars["WEFT_CONTAINER_ID"]
		if id == "" {
			continue
		}
		state, start, ok := procStat(pid)
		if !ok || state == 'Z' || state == 'X' {
			continue
		}
		cmd, _ := os.ReadFile("/proc/" + e.Name() + "/cmdline")
		c := out[id]
		if c == nil {
			c = &liveContainer{id: id, app: vars["WEFT_APP_ID"], node: node, envNode: vars["WEFT_NODE_ID"],
				execType: vars["WEFT_EXECUTION_TYPE"], am: vars["WEFT_AMRM_ADDR"] != ""}
			out[id] = c
		}
		c.procs = append(c.procs, liveProc{pid: pid, starttime: start, cmd: strings.TrimSpace(strings.ReplaceAll(string(cmd), "\x00", " "))})
	}
	return out
}

// resourcesOf returns a container's resources: from the spec the harness
// submitted, or else from `weft container list -app`.
func (w *procWatch) resourcesOf(c *liveContainer) (resources, bool) {
	if spec, ok := w.rn.apps.specOf(c.app); ok {
		if c.am {
			return spec.amResources(), true
		}
		return spec.taskResources(), true
	}
	w.mu.Lock()
	known := w.lookups[c.app]
	w.mu.Unlock()
	if info, ok := known[c.id]; ok {
		return info.Resources, true
	}
	var cs []containerInfo
	if _, err := w.rn.cliJSON(pollTimeout, w.rn.c.serverAddrs(), &cs, "container", "list", "-app", c.app); err != nil {
		return resources{}, false
	}
	m := map[string]containerInfo{}
	for _, ci := range cs {
		m[ci.ID] = ci
	}
	w.mu.Lock()
	w.lookups[c.app] = m
	w.mu.Unlock()
	info, ok := m[c.id]
	return info.Resources, ok
}

// check scans once and returns the problems it confirms.
func (w *procWatch) check() []string {
	problems, over, unconfirmed := w.evaluate(w.scan())
	w.mu.Lock()
	w.samples++
	if over {
		w.overSamples++
	}
	w.unconfirmed += unconfirmed
	w.mu.Unlock()
	return problems
}

// evaluate sums the live GUARANTEED containers per node against the
// node's capacity. It returns the problems, whether a node was confirmed
// over capacity, and how many over-capacity sums could not be confirmed
// (a process counted had ended by the time the scan was over).
func (w *procWatch) evaluate(live map[string]*liveContainer) (problems []string, over bool, unconfirmed int) {
	byNode := map[string][]*liveContainer{}
	for _, c := range live {
		if c.envNode != c.node {
			problems = append(problems, fmt.Sprintf("container %s runs in %s's namespace but its WEFT_NODE_ID is %q", c.id, c.node, c.envNode))
		}
		if c.execType == "GUARANTEED" {
			byNode[c.node] = append(byNode[c.node], c)
		}
	}
	capacity := resources{MemoryMB: agentMemoryMB, Vcores: agentVcores}
	var nodes []string
	for node := range byNode {
		nodes = append(nodes, node)
	}
	sort.Strings(nodes)
	for _, node := range nodes {
		cs := byNode[node]
		sort.Slice(cs, func(i, j int) bool { return cs[i].id < cs[j].id })
		var sum resources
		var parts []string
		unresolved := 0
		for _, c := range cs {
			r, ok := w.resourcesOf(c)
			if !ok {
				unresolved++
				continue
			}
			sum = sum.plus(r)
			parts = append(parts, fmt.Sprintf("%s (app %s, am=%v, %s, pids %s)", c.id, c.app, c.am, r, pidList(c.procs)))
		}
		if sum.fits(capacity) {
			continue
		}
		if !stillLive(cs) {
			unconfirmed++
			continue
		}
		over = true
		problems = append(problems, fmt.Sprintf("node %s runs GUARANTEED containers using %s > capacity %s (all still live after the scan; %d unresolved): %s; the servers' last record of %s: %s",
			node, sum, capacity, unresolved, strings.Join(parts, "; "), node, w.rn.lastRecord(node)))
	}
	return problems, over, unconfirmed
}

func pidList(ps []liveProc) string {
	var s []string
	for _, p := range ps {
		s = append(s, fmt.Sprintf("%d:%q", p.pid, p.cmd))
	}
	return strings.Join(s, ",")
}

// stillLive reports whether every process counted is still the same live
// process (same start time, not a zombie).
func stillLive(cs []*liveContainer) bool {
	for _, c := range cs {
		for _, p := range c.procs {
			state, start, ok := procStat(p.pid)
			if !ok || start != p.starttime || state == 'Z' || state == 'X' {
				return false
			}
		}
	}
	return true
}

// lastRecord describes a node as the last node list showed it.
func (rn *run) lastRecord(node string) string {
	rn.nodes.mu.Lock()
	defer rn.nodes.mu.Unlock()
	n, ok := rn.nodes.last[node]
	if !ok {
		return "(none)"
	}
	return fmt.Sprintf("%s epoch %d allocated_guaranteed %s, %d running guaranteed, %.1fs before",
		n.Status, n.Epoch, n.AllocatedGuaranteed, n.RunningGuaranteed, float64(rn.now()-rn.nodes.lastAt)/1e9)
}

// procLoop samples /proc every 300 ms.
func (rn *run) procLoop() {
	defer rn.monitors.Done()
	tick := time.NewTicker(300 * time.Millisecond)
	defer tick.Stop()
	reported := map[string]bool{}
	for {
		select {
		case <-rn.stopMon:
			return
		case <-tick.C:
		}
		for _, p := range rn.procs.check() {
			key := p
			if i := strings.Index(p, " runs GUARANTEED"); i > 0 {
				key = p[:i] // one report per node per round
			}
			key = fmt.Sprintf("%d %s", rn.currentRound(), key)
			if reported[key] {
				continue
			}
			reported[key] = true
			rn.fail("real-overcommit", "%s", p)
		}
	}
}
