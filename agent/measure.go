package agent

import (
	"bytes"
	"os"
	"path/filepath"
	"strconv"
	"syscall"
	"time"

	"github.com/weft-sched/weft/scheduler"
)

// What a container really uses, from /proc (docs/opportunistic.md,
// overcommit): the CPU time and resident memory of its process and every
// process below it. A container's processes are its started process's
// descendants, whichever process group or session they made: a container
// that runs under the container init has its command in a group of its
// own, and a shell may put jobs in others.

// procEntry is one process as /proc/PID/stat gives it.
type procEntry struct {
	ppid  int
	ticks uint64 // utime + stime + cutime + cstime: reaped children count in their parent
	rss   int64  // pages
}

// clockTicks is the kernel's USER_HZ, in which /proc gives CPU times; it is
// 100 on every Linux ABI Go supports.
const clockTicks = 100

// readProcs reads every process's stat line under procRoot.
func readProcs(procRoot string) map[int]procEntry {
	dirs, err := os.ReadDir(procRoot)
	if err != nil {
		return nil
	}
	out := make(map[int]procEntry, len(dirs))
	for _, d := range dirs {
		pid, err := strconv.Atoi(d.Name())
		if err != nil {
			continue
		}
		b, err := os.ReadFile(filepath.Join(procRoot, d.Name(), "stat"))
		if err != nil {
			continue // gone meanwhile
		}
		if e, ok := parseStat(b); ok {
			out[pid] = e
		}
	}
	return out
}

// parseStat reads the fields of a /proc/PID/stat line that measuring
// needs. The command name, in parentheses, may hold spaces and
// parentheses itself: the fields start after the last ')'.
func parseStat(b []byte) (procEntry, bool) {
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return procEntry{}, false
	}
	f := bytes.Fields(b[i+1:])
	// f[0] is field 3 (state): field N is f[N-3].
	if len(f) < 22 {
		return procEntry{}, false
	}
	num := func(n int) uint64 {
		v, _ := strconv.ParseUint(string(f[n-3]), 10, 64)
		return v
	}
	ppid, _ := strconv.Atoi(string(f[1]))
	return procEntry{ppid: ppid, ticks: num(14) + num(15) + num(16) + num(17), rss: int64(num(24))}, true
}

// procTree returns root and its descendants in procs.
func procTree(procs map[int]procEntry, children map[int][]int, root int) []int {
	if _, ok := procs[root]; !ok {
		return nil
	}
	out := []int{root}
	for i := 0; i < len(out); i++ {
		out = append(out, children[out[i]]...)
	}
	return out
}

// childrenOf indexes procs by parent.
func childrenOf(procs map[int]procEntry) map[int][]int {
	out := make(map[int][]int, len(procs))
	for pid, e := range procs {
		out[e.ppid] = append(out[e.ppid], pid)
	}
	return out
}

// usageSample is what one container was measured at.
type usageSample struct {
	at    time.Time
	ticks uint64
}

// minMeasureGap is the shortest time between two measurements: a CPU rate
// over less is mostly noise (heartbeats come early when containers change).
const minMeasureGap = 500 * time.Millisecond

// measure measures what the node's running containers use and gives it to
// the local scheduler, which may pause, kill or start opportunistic work
// on it (overcommit); it also ends pauses past max_pause. A container
// measured for the first time counts at its allocated vcores until a
// second measurement gives its rate.
func (m *manager) measure(now time.Time) {
	m.mu.Lock()
	if m.closed || !m.lastMeasure.IsZero() && now.Sub(m.lastMeasure) < minMeasureGap {
		m.mu.Unlock()
		return
	}
	running := false
	for _, c := range m.byID {
		running = running || c.state == scheduler.ContainerRunning || c.state == scheduler.ContainerPaused
	}
	m.mu.Unlock()
	var procs map[int]procEntry
	if running { // an idle node reads nothing
		procs = readProcs(m.procRoot)
	}
	children := childrenOf(procs)
	pageMB := float64(os.Getpagesize()) / (1 << 20)

	m.mu.Lock()
	defer m.mu.Unlock()
	var total scheduler.Resources
	seen := make(map[string]bool, len(m.byID))
	for id, c := range m.byID {
		if c.proc == nil || (c.state != scheduler.ContainerRunning && c.state != scheduler.ContainerPaused) {
			continue
		}
		seen[id] = true
		var ticks uint64
		var rss int64
		for _, pid := range procTree(procs, children, c.proc.pgid) {
			ticks += procs[pid].ticks
			rss += procs[pid].rss
		}
		use := scheduler.Resources{MemoryMB: int64(float64(rss) * pageMB)}
		if last, ok := m.samples[id]; ok && now.After(last.at) && ticks >= last.ticks {
			rate := float64(ticks-last.ticks) / clockTicks / now.Sub(last.at).Seconds()
			use.Vcores = int64(rate + 0.5)
		} else if c.state == scheduler.ContainerRunning {
			use.Vcores = c.info.Resources.Vcores
		}
		m.samples[id] = usageSample{at: now, ticks: ticks}
		total = total.Add(use)
	}
	for id := range m.samples {
		if !seen[id] {
			delete(m.samples, id)
		}
	}
	m.measured, m.lastMeasure = total, now
	m.ls.SetTime(now)
	// Only what changes something: carrying out asks for an early
	// heartbeat, and measuring is part of every heartbeat.
	for _, act := range []scheduler.Actions{m.ls.SetUsage(total), m.ls.ExpirePauses()} {
		if len(act.Start)+len(act.Kill)+len(act.Drop)+len(act.Pause)+len(act.Resume) > 0 {
			m.carryOut(act)
		}
	}
}

// signalTree sends sig to a container's process and every process below
// it, as many times over as new ones appear (at most three passes): a
// process that was not stopped yet may have forked meanwhile.
func signalTree(procRoot string, root int, sig syscall.Signal) {
	done := map[int]bool{}
	for pass := 0; pass < 3; pass++ {
		procs := readProcs(procRoot)
		fresh := 0
		for _, pid := range procTree(procs, childrenOf(procs), root) {
			if !done[pid] {
				syscall.Kill(pid, sig)
				done[pid] = true
				fresh++
			}
		}
		if fresh == 0 || sig != syscall.SIGSTOP {
			return
		}
	}
}
