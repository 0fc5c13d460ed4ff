package config

import (
	"strings"
	"testing"
	"time"

	"github.com/weft-sched/weft/scheduler"
)

func TestAppSpecNumContainers(t *testing.T) {
	spec, err := ParseAppSpec("a.hcl", []byte("dshell {\n  command = [\"true\"]\n}\n"))
	if err != nil || spec.DShell.NumContainers != 1 {
		t.Fatalf("num_containers left out: %v, %d; want the default 1", err, spec.DShell.NumContainers)
	}
	_, err = ParseAppSpec("a.hcl", []byte("dshell {\n  num_containers = 0\n  command = [\"true\"]\n}\n"))
	if err == nil || !strings.Contains(err.Error(), "num_containers: must be between 1 and") {
		t.Fatalf("num_containers = 0: %v", err)
	}
	spec, err = ParseAppSpec("a.json", []byte(`{"queue": "prod", "dshell": {"num_containers": 5, "command": ["sleep", "1"], "resources": {"memory_mb": 512, "vcores": 2}}}`))
	if err != nil || spec.Queue != "prod" || spec.DShell.NumContainers != 5 || spec.DShell.Resources.String() != "memory_mb=512,vcores=2" {
		t.Fatalf("JSON spec: %v %+v", err, spec)
	}
}

func TestAppSpecLocality(t *testing.T) {
	spec, err := ParseAppSpec("a.hcl", []byte("dshell {\n  command = [\"true\"]\n  nodes = [\"sc1-n1\", \"sc2-n3\"]\n  racks = [\"/r1\"]\n  relax_locality = false\n}\n"))
	if err != nil {
		t.Fatal(err)
	}
	if loc := spec.DShell.Locality(); strings.Join(loc.Nodes, ",") != "sc1-n1,sc2-n3" || strings.Join(loc.Racks, ",") != "/r1" || loc.Relax {
		t.Fatalf("HCL locality %+v, want strict sc1-n1,sc2-n3 and /r1", loc)
	}
	spec, err = ParseAppSpec("a.json", []byte(`{"dshell": {"command": ["true"], "nodes": ["n1"]}}`))
	if err != nil || spec.DShell.RelaxLocality != nil || !spec.DShell.Locality().Relax || spec.DShell.Nodes[0] != "n1" {
		t.Fatalf("JSON spec without relax_locality: %v %+v; want n1, relaxed", err, spec.DShell)
	}
	_, err = ParseAppSpec("a.hcl", []byte("dshell {\n  command = [\"true\"]\n  nodes = [\"n1\", \"../n2\"]\n}\n"))
	if err == nil || !strings.HasPrefix(err.Error(), "a.hcl: dshell.nodes[1]: ") {
		t.Fatalf("bad node: %v", err)
	}
}

// A mapreduce block makes a mapreduce app: its splits in order, relative
// paths taken from the spec file's directory, and errors naming the field.
func TestAppSpecMapReduce(t *testing.T) {
	src := `
name = "wc"
mapreduce {
  map      = ["awk", "{ print $1 \"\\t1\" }"]
  reduce   = ["cat"]
  reducers = 2
  output   = "out"
  reduce_placement = "any"
  map_resources = { memory_mb = 128, vcores = 1 }
  split {
    path  = "in/0"
    nodes = ["n1"]
    racks = ["/r1"]
  }
  split {
    path = "/abs/1"
  }
}
`
	spec, err := ParseAppSpec("/jobs/wc/job.hcl", []byte(src))
	if err != nil {
		t.Fatal(err)
	}
	j := spec.MapReduce
	switch {
	case spec.AMType != scheduler.AMTypeMapReduce || j == nil:
		t.Fatalf("spec %+v", spec)
	case j.Output != "/jobs/wc/out" || len(j.Splits) != 2 || j.Splits[0].Path != "/jobs/wc/in/0" || j.Splits[1].Path != "/abs/1":
		t.Errorf("paths: output %q, splits %+v", j.Output, j.Splits)
	case j.Splits[0].Nodes[0] != "n1" || j.Splits[0].Racks[0] != "/r1" || j.ReducePlacement != scheduler.PlacementAny:
		t.Errorf("job %+v", j)
	case j.Map[1] != "{ print $1 \"\\t1\" }" || j.MapResources.MemoryMB != 128 || j.ReduceResources.MemoryMB != 256:
		t.Errorf("map %q, resources %s / %s", j.Map, j.MapResources, j.ReduceResources)
	}
	for _, tc := range []struct{ src, want string }{
		{`mapreduce {
  map = ["cat"]
  reduce = ["cat"]
  reducers = 0
  output = "/o"
  split { path = "/i" }
}`, "job.hcl: mapreduce.reducers: must be between 1 and 256, not 0"},
		{`dshell { command = ["true"] }
mapreduce {
  map = ["cat"]
  reduce = ["cat"]
  reducers = 1
  output = "/o"
}`, "give a dshell block or a mapreduce block, not both"},
		{`mapreduce {
  map = ["cat"]
  reduce = ["cat"]
  reducers = 1
  output = "/o"
}`, "mapreduce.splits: give 1 to 10000 splits, not 0"},
	} {
		if _, err := ParseAppSpec("/jobs/job.hcl", []byte(tc.src)); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%v, want %q", err, tc.want)
		}
	}
}

// Over the network a job's relative paths are refused, never taken from
// the server's directory.
func TestAppSpecBodyRefusesRelativeJobPaths(t *testing.T) {
	src := `{"mapreduce": {"map": ["cat"], "reduce": ["cat"], "reducers": 1, "output": "/o", "split": [{"path": "in/0"}]}}`
	_, err := ParseAppSpecBody("request body", []byte(src))
	if err == nil || !strings.Contains(err.Error(), `mapreduce.splits[0].path: "in/0" must be an absolute path`) {
		t.Fatalf("a relative split path over the network: %v", err)
	}
	spec, err := ParseAppSpecBody("request body", []byte(strings.Replace(src, "in/0", "/in/0", 1)))
	if err != nil || spec.MapReduce.Splits[0].Path != "/in/0" {
		t.Fatalf("an absolute one: %v, %+v", err, spec.MapReduce)
	}
}

// max_failures_per_node: left out is the default 3, 0 never blacklists,
// out of range names the field.
func TestAppSpecMaxFailuresPerNode(t *testing.T) {
	for _, tc := range []struct {
		src  string
		want int
	}{
		{"dshell {\n  command = [\"true\"]\n}\n", 3},
		{"max_failures_per_node = 0\ndshell {\n  command = [\"true\"]\n}\n", 0},
		{"max_failures_per_node = 5\ndshell {\n  command = [\"true\"]\n}\n", 5},
	} {
		spec, err := ParseAppSpec("a.hcl", []byte(tc.src))
		if err != nil || spec.FailuresPerNode() != tc.want {
			t.Errorf("%q: %v, max_failures_per_node %d; want %d", tc.src, err, spec.FailuresPerNode(), tc.want)
		}
	}
	_, err := ParseAppSpec("a.json", []byte(`{"max_failures_per_node": -1, "dshell": {"command": ["true"]}}`))
	if err == nil || !strings.Contains(err.Error(), "max_failures_per_node: must be between 0") {
		t.Fatalf("max_failures_per_node = -1: %v", err)
	}
}

// A JSON spec is read by one decoder, from a file or a request body: its
// errors name the line, column and field, unknown fields are refused, and
// one split may be an object, as HCL's JSON syntax allows. Over the
// network only JSON is read, and a body packed with values is refused
// before it is decoded.
func TestAppSpecJSON(t *testing.T) {
	for _, tc := range []struct{ src, want string }{
		{`{"dshell": {"command": ["true"], "num_containers": "five"}}`, `a.json:1,58: dshell.num_containers: string is not a whole number`},
		{"{\"dshell\": {\n  \"command\": [\"true\"],\n  \"colour\": 1}}", `a.json: unknown field "colour"`},
		{`{"dshell": {"command": ["true"]}`, `a.json:1,33: the JSON ends before its object does`},
		{`{"dshell": {"command": ["true"]}} {}`, `more than one JSON value`},
	} {
		if _, err := ParseAppSpec("a.json", []byte(tc.src)); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: got %v, want %q", tc.src, err, tc.want)
		}
	}
	one := `{"mapreduce": {"map": ["cat"], "reduce": ["cat"], "reducers": 1, "output": "/o", "split": {"path": "/in/0", "nodes": ["n1"]}}}`
	spec, err := ParseAppSpecBody("request body", []byte(one))
	if err != nil || len(spec.MapReduce.Splits) != 1 || spec.MapReduce.Splits[0].Path != "/in/0" {
		t.Fatalf("one split as an object: %v %+v", err, spec.MapReduce)
	}
	if _, err := ParseAppSpecBody("request body", []byte(`dshell { command = ["true"] }`)); err == nil || !strings.Contains(err.Error(), "give the app spec as JSON") {
		t.Errorf("an HCL body: %v", err)
	}
	packed := `{"dshell": {"command": ["true"], "nodes": [` + strings.Repeat(`"",`, 2000) + `""]}}`
	if _, err := ParseAppSpecBody("request body", []byte(packed)); err == nil || !strings.Contains(err.Error(), "JSON values; at most") {
		t.Errorf("a body of empty strings: %v", err)
	}
}

func TestAppSpecExpectedDuration(t *testing.T) {
	spec, err := ParseAppSpec("a.hcl", []byte("dshell {\n  command = [\"true\"]\n  expected_duration = \"90s\"\n}\n"))
	if err != nil || spec.DShell.ExpectedDuration != 90*time.Second {
		t.Fatalf("expected_duration 90s: %v %+v", err, spec.DShell)
	}
	for src, want := range map[string]string{
		"dshell {\n  command = [\"true\"]\n  expected_duration = \"soon\"\n}\n": `dshell.expected_duration: "soon" is not a duration`,
		"dshell {\n  command = [\"true\"]\n  expected_duration = \"-1s\"\n}\n":  "dshell.expected_duration: must be between 0 and",
	} {
		if _, err := ParseAppSpec("a.hcl", []byte(src)); err == nil || !strings.Contains(err.Error(), want) {
			t.Fatalf("%q: %v, want %q", src, err, want)
		}
	}
}
