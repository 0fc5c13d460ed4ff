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
	Queues          []struct {
		Queue    string  `json:"queue"`
		UsedMean float64 `json:"used_share_mean"`
		FairMean float64 `json:"fair_share_mean"`
	} `json:"queues"`
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
	// Each queue's share against its fair share, every second: the apps
	// all go to root.default, which used part of the cluster and was
	// entitled to all of it while it asked.
	if len(s.Queues) != 1 || s.Queues[0].Queue != "root.default" || s.Queues[0].UsedMean <= 0 || s.Queues[0].FairMean < s.Queues[0].UsedMean {
		t.Errorf("queues: %+v, want root.default alone, some of the cluster used, its fair share at least that", s.Queues)
	}
	for _, f := range []string{"summary.txt", "series.csv", "allocations.svg", "running.svg", "utilisation.svg", "heartbeat_p99.svg", "queues.csv", "queue_shares.svg"} {
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
	args := append([]string{"sim", "-start-servers", "1", "-nodes", "20", "-duration", "10s",
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

// simRestart is the restart part of weft sim's summary.json.
type simRestart struct {
	Before          simState `json:"state_before"`
	After           simState `json:"state_after"`
	LeaderMS        float64  `json:"leader_elected_ms"`
	ReadyMS         float64  `json:"leader_ready_ms"`
	AllNodesMS      float64  `json:"all_nodes_heartbeating_ms"`
	NodesLive       int      `json:"nodes_live"`
	NodesBack       int      `json:"nodes_back"`
	SpuriousDown    int      `json:"spurious_down_nodes"`
	DownCheckError  string   `json:"down_check_error"`
	Reregistrations int      `json:"reregistrations"`
	Error           string   `json:"error"`
	Servers         []struct {
		ID         string  `json:"id"`
		Containers int     `json:"containers_restored"`
		StartedMS  float64 `json:"started_ms"`
		ReadyIndex uint64  `json:"ready_index"`
	} `json:"servers"`
}

type simState struct {
	Nodes        int `json:"nodes"`
	NodesDown    int `json:"nodes_down"`
	Apps         int `json:"apps"`
	AppsFinished int `json:"apps_finished"`
	Containers   int `json:"containers"`
}

// TestSimRestartsTheWholeQuorum has weft sim crash all three servers it
// started (SIGKILL) once its apps are done, and start them again on the
// same data while 20 nodes keep heartbeating: a leader comes back, every
// node heartbeats again, the state holds what it held before, and no
// live node was marked DOWN or told to register again (the leader
// answers not_ready until it has replayed its log).
func TestSimRestartsTheWholeQuorum(t *testing.T) {
	out := filepath.Join(t.TempDir(), "sim")
	stdout, stderr, code := cli(t, "sim", "-start-servers", "3", "-nodes", "20", "-duration", "35s", "-restart-at", "20s",
		"-node-resources", "memory_mb=8192,vcores=8", "-apps", "10", "-apps-per-second", "5", "-tasks-min", "5", "-tasks-max", "20",
		"-task-duration-min", "100ms", "-task-duration-max", "500ms", "-out", out)
	if code != 0 {
		t.Fatalf("weft sim: exit %d\nstdout:\n%s\nstderr:\n%s", code, stdout, stderr)
	}
	b, err := os.ReadFile(filepath.Join(out, "summary.json"))
	if err != nil {
		t.Fatal(err)
	}
	var s struct {
		Restart *simRestart `json:"restart"`
	}
	if err := json.Unmarshal(b, &s); err != nil {
		t.Fatalf("summary.json does not parse: %v\n%s", err, b)
	}
	r := s.Restart
	if r == nil {
		t.Fatalf("no restart in summary.json:\n%s", b)
	}
	if r.Error != "" || r.LeaderMS <= 0 || r.ReadyMS <= 0 || r.NodesLive != 20 || r.NodesBack != 20 || r.AllNodesMS <= 0 {
		t.Errorf("the quorum did not come back with every node: %+v\nstderr:\n%s", r, stderr)
	}
	if r.Before.Nodes != 20 || r.Before.Apps != 10 || r.Before.Containers == 0 {
		t.Errorf("state before the restart: %+v, want 20 nodes, 10 apps and their containers", r.Before)
	}
	if r.After.Nodes != r.Before.Nodes || r.After.Apps != r.Before.Apps || r.After.Containers < r.Before.Containers {
		t.Errorf("state after the restart %+v lost some of the state before %+v", r.After, r.Before)
	}
	if r.Before.AppsFinished == r.Before.Apps && r.After != r.Before {
		t.Errorf("nothing ran at the restart, yet the state after %+v differs from before %+v", r.After, r.Before)
	}
	if r.SpuriousDown != 0 || r.DownCheckError != "" || r.Reregistrations != 0 || r.After.NodesDown != 0 {
		t.Errorf("live nodes marked DOWN (%d, check error %q, %d in the state) or told to re-register (%d)",
			r.SpuriousDown, r.DownCheckError, r.After.NodesDown, r.Reregistrations)
	}
	led := 0
	for _, sr := range r.Servers {
		if sr.StartedMS <= 0 {
			t.Errorf("%s: no start read from its log after the restart: %+v", sr.ID, sr)
		}
		if sr.ReadyIndex > 0 {
			led++
		}
	}
	if len(r.Servers) != 3 || led == 0 {
		t.Errorf("want 3 servers' logs, one of them a ready leader: %+v", r.Servers)
	}
	if !strings.Contains(stdout, "restart:") {
		t.Errorf("no restart in the summary on stdout:\n%s", stdout)
	}
}
