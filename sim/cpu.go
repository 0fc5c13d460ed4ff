package sim

import (
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"
)

// userHZ is the unit of the CPU times in /proc/PID/stat: USER_HZ, 100 on
// every Linux architecture Go supports.
const userHZ = 100

// procCPU returns the CPU time (user and system) process pid has used.
func procCPU(pid int) (time.Duration, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, err
	}
	return parseProcStatCPU(string(b))
}

// parseProcStatCPU reads utime and stime (fields 14 and 15) from a
// /proc/PID/stat line. The command name (field 2) is in parentheses and
// may hold spaces, so fields are counted after its closing parenthesis.
func parseProcStatCPU(stat string) (time.Duration, error) {
	end := strings.LastIndexByte(stat, ')')
	if end < 0 {
		return 0, fmt.Errorf("proc stat: no command name in %.40q", stat)
	}
	f := strings.Fields(stat[end+1:])
	// f[0] is field 3 (state): utime is field 14, stime field 15.
	if len(f) < 13 {
		return 0, fmt.Errorf("proc stat: %d fields after the command name, want at least 13", len(f))
	}
	var ticks int64
	for _, s := range f[11:13] {
		n, err := strconv.ParseInt(s, 10, 64)
		if err != nil {
			return 0, fmt.Errorf("proc stat: cpu time %q: %v", s, err)
		}
		ticks += n
	}
	return time.Duration(ticks) * time.Second / userHZ, nil
}

// ServerCPU is what one server process the simulator started used over
// the measured run.
type ServerCPU struct {
	ID     string  `json:"id"`
	Cores  float64 `json:"cores"` // CPU time ÷ the measured time
	Leader bool    `json:"leader"`
}

// cpu returns each started server's CPU time so far (nil without servers;
// -1 for one whose /proc entry cannot be read, such as one not running).
func (s *Servers) cpu() []time.Duration {
	if s == nil {
		return nil
	}
	out := make([]time.Duration, len(s.procs))
	for i, p := range s.procs {
		out[i] = -1
		if p != nil && p.cmd.Process != nil {
			if d, err := procCPU(p.cmd.Process.Pid); err == nil {
				out[i] = d
			}
		}
	}
	return out
}

// cpuUsed turns two readings of cpu into each server's cores over d; the
// leader is the server whose ID leader points at. A server restarted in
// between (a new process) is left out.
func cpuUsed(s *Servers, before, after []time.Duration, d time.Duration, leader *string) []ServerCPU {
	if s == nil || d <= 0 {
		return nil
	}
	var out []ServerCPU
	for i := range min(len(before), len(after), len(s.ids)) {
		if before[i] < 0 || after[i] < before[i] {
			continue
		}
		out = append(out, ServerCPU{ID: s.ids[i], Cores: (after[i] - before[i]).Seconds() / d.Seconds(),
			Leader: leader != nil && *leader == s.ids[i]})
	}
	return out
}
