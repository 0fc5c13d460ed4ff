package e2e

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// simSummary is the part of weft sim's summary.json the test reads.
type simSummary struct {
	Nodes           int    `json:"nodes"`
	AppsSubmitted   uint64 `json:"apps_submitted"`
	AppsFinished    uint64 `json:"apps_finished"`
	TasksOfFinished uint64 `json:"tasks_of_finished_apps"`
	TasksDoneOfFin  uint64 `json:"tasks_done_of_finished_apps"`
	Allocations     uint64 `json:"allocations"`
	HeartbeatCount  uint64 `json:"heartbeats"`
	SpuriousDown    int    `json:"spurious_down_nodes"`
	DownCheckError  string `json:"down_check_error"`
}

// TestSimRunsASyntheticWorkload runs weft sim against a server process it
// starts itself, with 50 simulated nodes and a synthetic workload, and
// checks that apps went through the real protocols to their end: every
// finished app had all its tasks done, and the outputs are written.
func TestSimRunsASyntheticWorkload(t *testing.T) {
	out := filepath.Join(t.TempDir(), "sim")
	stdout, stderr, code := cli(t, "sim", "-start-servers", "1", "-nodes", "50", "-duration", "20s",
		"-node-resources", "memory_mb=8192,vcores=8", "-apps-per-second", "1", "-tasks-min", "2", "-tasks-max", "20",
		"-task-duration-min", "500ms", "-task-duration-max", "3s", "-out", out)
	if code != 0 {
		t.Fatalf("weft sim: exit %d\nstdout:\n%s\nstderr:\n%s", code, stdout, stderr)
	}
	if !strings.Contains(stdout, "ask→alloc:") || !strings.Contains(stderr, "sim ") {
		t.Errorf("no summary on stdout or no progress on stderr:\nstdout:\n%s\nstderr:\n%s", stdout, stderr)
	}
	b, err := os.ReadFile(filepath.Join(out, "summary.json"))
	if err != nil {
		t.Fatal(err)
	}
	var s simSummary
	if err := json.Unmarshal(b, &s); err != nil {
		t.Fatalf("summary.json does not parse: %v\n%s", err, b)
	}
	if s.Nodes != 50 || s.AppsSubmitted == 0 || s.AppsFinished == 0 {
		t.Errorf("want 50 nodes and apps submitted and finished: %+v", s)
	}
	if s.TasksOfFinished == 0 || s.TasksDoneOfFin != s.TasksOfFinished {
		t.Errorf("finished apps had %d tasks but %d were done", s.TasksOfFinished, s.TasksDoneOfFin)
	}
	if s.Allocations < s.TasksOfFinished || s.HeartbeatCount == 0 {
		t.Errorf("allocations %d (want ≥ %d), heartbeats %d", s.Allocations, s.TasksOfFinished, s.HeartbeatCount)
	}
	if s.SpuriousDown != 0 || s.DownCheckError != "" {
		t.Errorf("%d nodes DOWN at the end (check error %q)", s.SpuriousDown, s.DownCheckError)
	}
	for _, f := range []string{"summary.txt", "series.csv", "allocations.svg", "running.svg", "utilisation.svg", "heartbeat_p99.svg"} {
		b, err := os.ReadFile(filepath.Join(out, f))
		if err != nil || len(b) == 0 {
			t.Errorf("%s: %v (%d bytes)", f, err, len(b))
		}
		if strings.HasSuffix(f, ".svg") && !strings.Contains(string(b), "<polyline") {
			t.Errorf("%s draws no line", f)
		}
	}
}

// oppSummary is the part of weft sim's summary.json about opportunistic
// containers.
type oppSummary struct {
	simSummary
	TasksFinished uint64  `json:"tasks_finished"`
	Opportunistic uint64  `json:"opportunistic_allocations"`
	AtProxy       uint64  `json:"opportunistic_allocations_at_proxy"`
	AtLeader      uint64  `json:"opportunistic_allocations_at_leader"`
	ProxyP99MS    float64 `json:"opportunistic_proxy_ask_to_allocation_p99_ms"`
}

func runOppSim(t *testing.T, extra ...string) oppSummary {
	t.Helper()
	out := filepath.Join(t.TempDir(), "sim")
	args := append([]string{"sim", "-start-servers", "1", "-nodes", "20", "-duration", "20s",
		"-node-resources", "memory_mb=4096,vcores=4", "-apps-per-second", "1", "-tasks-min", "5", "-tasks-max", "20",
		"-task-duration-min", "500ms", "-task-duration-max", "2s", "-opportunistic", "1", "-out", out}, extra...)
	stdout, stderr, code := cli(t, args...)
	if code != 0 {
		t.Fatalf("weft sim: exit %d\nstdout:\n%s\nstderr:\n%s", code, stdout, stderr)
	}
	b, err := os.ReadFile(filepath.Join(out, "summary.json"))
	if err != nil {
		t.Fatal(err)
	}
	var s oppSummary
	if err := json.Unmarshal(b, &s); err != nil {
		t.Fatalf("summary.json does not parse: %v\n%s", err, b)
	}
	if s.AppsFinished == 0 || s.TasksOfFinished == 0 || s.TasksDoneOfFin != s.TasksOfFinished {
		t.Errorf("apps finished %d; their %d tasks, %d done: want apps finished with every task done\n%s", s.AppsFinished, s.TasksOfFinished, s.TasksDoneOfFin, stdout)
	}
	return s
}

// With an AMRMProxy on every simulated node (the default), opportunistic
// asks are allocated at the proxies, from the leader's least-loaded list,
// and none by the leader; the containers reach their nodes, run and
// complete. With -amrmproxy=false the leader allocates them all.
func TestSimAllocatesOpportunisticAtTheProxies(t *testing.T) {
	s := runOppSim(t)
	if s.AtProxy == 0 || s.AtLeader != 0 || s.Opportunistic != s.AtProxy {
		t.Errorf("opportunistic allocations %d: %d at the proxies, %d at the leader; want all at the proxies", s.Opportunistic, s.AtProxy, s.AtLeader)
	}
	if s.TasksFinished < s.TasksOfFinished || s.AtProxy < s.TasksOfFinished {
		t.Errorf("%d tasks finished, %d allocations at the proxies: want at least the %d tasks of finished apps", s.TasksFinished, s.AtProxy, s.TasksOfFinished)
	}
	c := runOppSim(t, "-amrmproxy=false")
	if c.AtProxy != 0 || c.AtLeader == 0 {
		t.Errorf("without proxies: %d at the proxies, %d at the leader; want all at the leader", c.AtProxy, c.AtLeader)
	}
}
