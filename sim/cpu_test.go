package sim

import (
	"os"
	"testing"
	"time"
)

func TestParseProcStatCPU(t *testing.T) {
	// A command name with spaces and a parenthesis; utime 250, stime 50.
	line := "4242 (weft (s 1)) S 1 4242 4242 0 -1 4194560 1000 0 0 0 250 50 0 0 20 0 12 0 100 0 0"
	got, err := parseProcStatCPU(line)
	if err != nil || got != 3*time.Second {
		t.Fatalf("parse: %v, %v; want 3s", got, err)
	}
	for _, bad := range []string{"4242 weft S 1", "4242 (weft) S 1 2 3", "4242 (weft) S 1 4242 4242 0 -1 4194560 1000 0 0 0 x 50 0"} {
		if _, err := parseProcStatCPU(bad); err == nil {
			t.Fatalf("parse %q: no error", bad)
		}
	}
	// This process has used some CPU, and /proc says so.
	if d, err := procCPU(os.Getpid()); err != nil || d < 0 {
		t.Fatalf("procCPU(self): %v, %v", d, err)
	}
}

// cpuUsed gives each server's cores over the run, marks the leader, and
// leaves out a server whose reading is missing or went backwards (it was
// restarted: a new process).
func TestCPUUsed(t *testing.T) {
	s := &Servers{ids: []string{"s1", "s2", "s3"}}
	leader := "s2"
	got := cpuUsed(s, []time.Duration{time.Second, 0, 5 * time.Second}, []time.Duration{3 * time.Second, 10 * time.Second, time.Second},
		10*time.Second, &leader)
	if len(got) != 2 || got[0] != (ServerCPU{ID: "s1", Cores: 0.2}) || got[1] != (ServerCPU{ID: "s2", Cores: 1, Leader: true}) {
		t.Fatalf("cpuUsed: %+v", got)
	}
	if got := cpuUsed(nil, nil, nil, time.Second, nil); got != nil {
		t.Fatalf("without servers: %+v", got)
	}
}
