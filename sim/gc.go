package sim

import (
	"bufio"
	"fmt"
	"os"
	"runtime/debug"
	"strconv"
	"strings"
)

// The simulator is the instrument, and its garbage collector was the
// largest disturbance it put on what it measured: at 10,000 nodes its live
// heap is ~220 MB (each node's connection, streams and goroutines), and
// every ~7 s a mark phase of ~300 ms on the machine's shared cores delayed
// every simulated node's heartbeat — a heartbeat p99 of 290 ms with the
// servers' own collectors switched off, 20 ms with the simulator's off
// too (docs/scale.md). So by default the simulator collects only as its
// heap nears a memory limit sized to its nodes: a collection every minute
// or two at 10,000 nodes instead of every 7 s. (No limit at all costs as much as it
// saves: a heap that only grows is fresh memory, page faults, all run.)

// GCLimit returns the memory limit a simulation of nodes collects at: spec
// "auto" is 512 MiB and 256 KiB a node, at least 1 GiB and at most a
// quarter of physical memory; "off" is 0 (Go's default collector, GOGC);
// otherwise a size in MiB.
func GCLimit(spec string, nodes int) (int64, error) {
	switch spec {
	case "off":
		return 0, nil
	case "auto", "":
		total, err := physicalMemory()
		if err != nil {
			return 0, err
		}
		return min(max(512<<20+int64(nodes)*256<<10, 1<<30), max(total/4, 256<<20)), nil
	}
	mib, err := strconv.ParseInt(spec, 10, 64)
	if err != nil || mib < 64 {
		return 0, fmt.Errorf("give auto, off, or a memory limit in MiB of at least 64, not %q", spec)
	}
	return mib << 20, nil
}

// SetGCLimit makes this process collect garbage only as its heap nears
// limit (0: leave the collector as GOGC and GOMEMLIMIT set it).
func SetGCLimit(limit int64) {
	if limit <= 0 {
		return
	}
	debug.SetMemoryLimit(limit)
	debug.SetGCPercent(-1)
}

// physicalMemory reads MemTotal from /proc/meminfo.
func physicalMemory() (int64, error) {
	f, err := os.Open("/proc/meminfo")
	if err != nil {
		return 0, fmt.Errorf("physical memory: %w", err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if rest, ok := strings.CutPrefix(sc.Text(), "MemTotal:"); ok {
			kb, err := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(rest), " kB"), 10, 64)
			if err != nil {
				return 0, fmt.Errorf("physical memory: MemTotal %q: %w", rest, err)
			}
			return kb << 10, nil
		}
	}
	return 0, fmt.Errorf("physical memory: no MemTotal in /proc/meminfo")
}
