package sim

import (
	"strings"
	"testing"
	"time"

	"github.com/weft-sched/weft/scheduler"
)

var def = scheduler.Resources{MemoryMB: 1024, Vcores: 1}

func TestParseSLSReadsAJobStream(t *testing.T) {
	trace := `{"job.start.ms": 5000, "job.end.ms": 9000, "job.queue.name": "sls_queue_1", "job.id": "job_1", "am.type": "mapreduce",
  "job.tasks": [
    {"container.host": "/default-rack/node1", "container.start.ms": 5100, "container.end.ms": 7100, "container.priority": 20, "container.type": "map"},
    {"container.host": "/default-rack/node2", "container.start.ms": 5200, "container.end.ms": 5700, "container.priority": 10, "container.type": "OPPORTUNISTIC",
     "container.memory": 2048, "container.vcores": 2}]}
{"job.start.ms": 1000, "job.end.ms": 3000, "job.queue.name": "root.b", "job.id": 2,
  "job.tasks": [{"container.host": "n3", "container.start.ms": "1000", "container.end.ms": 3000, "container.priority": 20, "container.type": "reduce"}]}`
	jobs, err := ParseSLS(strings.NewReader(trace), def)
	if err != nil {
		t.Fatal(err)
	}
	if len(jobs) != 2 || jobs[0].ID != "2" || jobs[1].ID != "job_1" {
		t.Fatalf("jobs not in start order: %+v", jobs)
	}
	if jobs[0].At != 0 || jobs[1].At != 4*time.Second {
		t.Errorf("arrivals %s, %s: want 0s and 4s (relative to the earliest)", jobs[0].At, jobs[1].At)
	}
	if jobs[1].Queue != "root.sls_queue_1" || jobs[0].Queue != "root.b" {
		t.Errorf("queues %q, %q", jobs[1].Queue, jobs[0].Queue)
	}
	t0, t1 := jobs[1].Tasks[0], jobs[1].Tasks[1]
	if t0.Duration != 2*time.Second || t0.ExecutionType != scheduler.Guaranteed || t0.Priority != 20 || t0.Resources.String() != def.String() {
		t.Errorf("task 0: %+v", t0)
	}
	if t1.Duration != 500*time.Millisecond || t1.ExecutionType != scheduler.Opportunistic || t1.Resources.MemoryMB != 2048 || t1.Resources.Vcores != 2 {
		t.Errorf("task 1: %+v", t1)
	}
}

func TestParseSLSNamesTheBadField(t *testing.T) {
	task := `{"container.host": "n1", "container.start.ms": 100, "container.end.ms": 200, "container.priority": 20, "container.type": "map"}`
	job := func(fields, tasks string) string {
		return `{"job.id": "j1", "job.queue.name": "q", ` + fields + `"job.tasks": [` + tasks + `]}`
	}
	ok := `"job.start.ms": 0, "job.end.ms": 1000, `
	for _, tc := range []struct {
		name, trace, want string
	}{
		{"start not a number", job(`"job.start.ms": "soon", "job.end.ms": 1000, `, task), "job 1 (j1): job.start.ms: want an integer"},
		{"start missing", job(`"job.end.ms": 1000, `, task), "job 1 (j1): job.start.ms: missing"},
		{"end before start", job(`"job.start.ms": 50, "job.end.ms": 10, `, task), "job.end.ms: 10 is before job.start.ms 50"},
		{"negative start", job(`"job.start.ms": -1, "job.end.ms": 10, `, task), "job.start.ms: -1 is out of range"},
		{"no id", `{"job.start.ms": 0, "job.end.ms": 1, "job.tasks": [` + task + `]}`, "job 1: job.id: missing"},
		{"no tasks", job(ok, ``), "job 1 (j1): job.tasks: want a non-empty list"},
		{"task end before start", job(ok, `{"container.start.ms": 300, "container.end.ms": 200}`), "job.tasks[0].container.end.ms: 200 is not after container.start.ms 300"},
		{"task start missing", job(ok, task+`, {"container.end.ms": 200}`), "job.tasks[1].container.start.ms: missing"},
		{"bad priority", job(ok, `{"container.start.ms": 1, "container.end.ms": 2, "container.priority": 1.5}`), "job.tasks[0].container.priority: want an integer, got 1.5"},
		{"bad memory", job(ok, `{"container.start.ms": 1, "container.end.ms": 2, "container.memory": 0}`), "job.tasks[0].container.memory: 0 is out of range"},
		{"host not a string", job(ok, `{"container.start.ms": 1, "container.end.ms": 2, "container.host": true}`), "job.tasks[0].container.host: want a string"},
		{"task not an object", job(ok, `3`), "job.tasks[0].: not a JSON object"},
		{"duplicate id", job(ok, task) + job(ok, task), `job 2 (j1): job.id: "j1" appears twice`},
		{"not json", `{"job.id": `, "job 1: not JSON"},
		{"empty", ``, "no jobs"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := ParseSLS(strings.NewReader(tc.trace), def)
			if err == nil {
				t.Fatalf("no error; want one containing %q", tc.want)
			}
			if !strings.Contains(err.Error(), tc.want) || strings.Contains(err.Error(), "\n") {
				t.Errorf("error %q: want one line containing %q", err, tc.want)
			}
		})
	}
}
