package scheduler

import (
	"fmt"
	"strings"
	"testing"
)

func validJob() *MapReduce {
	return &MapReduce{
		Splits:   []Split{{Path: "/data/in/0", Nodes: []string{"n1"}, Racks: []string{"/r1"}}, {Path: "/data/in/1"}},
		Map:      []string{"cat"},
		Reduce:   []string{"cat"},
		Reducers: 2,
		Output:   "/data/out",
	}
}

// A mapreduce app validates its job and names the first bad field; its
// defaults size the tasks and place reduces at their center of gravity.
func TestMapReduceSpecValidation(t *testing.T) {
	spec := AppSpec{AMType: AMTypeMapReduce, MapReduce: validJob()}
	spec.SetDefaults()
	if err := spec.Validate(); err != nil {
		t.Fatalf("a valid job: %v", err)
	}
	if j := spec.MapReduce; j.ReducePlacement != PlacementCenterOfGravity || j.MapResources.MemoryMB != 256 || spec.Name != "mapreduce" {
		t.Errorf("defaults: %+v, name %q", j, spec.Name)
	}
	long := "/" + strings.Repeat("x", MaxJobPath)
	for _, tc := range []struct {
		name, want string
		edit       func(*AppSpec)
	}{
		{"no job", "mapreduce: a mapreduce app needs its job", func(s *AppSpec) { s.MapReduce = nil }},
		{"a dshell command too", "dshell: a mapreduce app runs no shell command", func(s *AppSpec) { s.DShell.Command = []string{"true"} }},
		{"no splits", "mapreduce.splits: give 1 to", func(s *AppSpec) { s.MapReduce.Splits = nil }},
		{"no reducers", "mapreduce.reducers: must be between 1 and 256, not 0", func(s *AppSpec) { s.MapReduce.Reducers = 0 }},
		{"too many reducers", "mapreduce.reducers", func(s *AppSpec) { s.MapReduce.Reducers = MaxReducers + 1 }},
		{"relative output", "mapreduce.output: \"out\" must be an absolute path", func(s *AppSpec) { s.MapReduce.Output = "out" }},
		{"long split path", "mapreduce.splits[1].path: longer than", func(s *AppSpec) { s.MapReduce.Splits[1].Path = long }},
		{"control character", "mapreduce.splits[0].path", func(s *AppSpec) { s.MapReduce.Splits[0].Path = "/a\nb" }},
		{"bad node", "mapreduce.splits[0].nodes[0]", func(s *AppSpec) { s.MapReduce.Splits[0].Nodes = []string{"../x"} }},
		{"no map command", "mapreduce.map: give the command", func(s *AppSpec) { s.MapReduce.Map = nil }},
		{"no reduce command", "mapreduce.reduce: give the command", func(s *AppSpec) { s.MapReduce.Reduce = []string{""} }},
		{"bad placement", "mapreduce.reduce_placement", func(s *AppSpec) { s.MapReduce.ReducePlacement = "near" }},
		{"zero resources", "mapreduce.reduce_resources", func(s *AppSpec) { s.MapReduce.ReduceResources = Resources{MemoryMB: -1} }},
		{"bad env", "mapreduce.env", func(s *AppSpec) { s.MapReduce.Env = map[string]string{"A=B": "c"} }},
		{"a job on a dshell app", "mapreduce: only a mapreduce app", func(s *AppSpec) {
			s.AMType, s.DShell = AMTypeDShell, DShell{NumContainers: 1, Command: []string{"true"}}
		}},
	} {
		s := AppSpec{AMType: AMTypeMapReduce, MapReduce: validJob()}
		tc.edit(&s)
		s.SetDefaults()
		err := s.Validate()
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v, want an error with %q", tc.name, err, tc.want)
		}
	}
}

func TestCountersValidation(t *testing.T) {
	if err := ValidateCounters(Counters{"maps.data_local": 3, "reduce.00001.wtnd": 8}); err != nil {
		t.Fatal(err)
	}
	for _, c := range []Counters{{"": 1}, {"Maps": 1}, {"a b": 1}, {strings.Repeat("a", MaxCounterNameLength+1): 1}} {
		if err := ValidateCounters(c); err == nil || !strings.HasPrefix(err.Error(), "counters: ") {
			t.Errorf("ValidateCounters(%v) = %v", c, err)
		}
	}
	many := Counters{}
	for i := range MaxCounters + 1 {
		many[fmt.Sprintf("c%d", i)] = 1
	}
	if err := ValidateCounters(many); err == nil {
		t.Errorf("%d counters taken", len(many))
	}
}
