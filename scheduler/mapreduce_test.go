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

func TestValidateCounters(t *testing.T) {
	many := Counters{}
	for i := 0; i <= MaxCounters; i++ {
		many[fmt.Sprintf("c%d", i)] = int64(i)
	}
	for _, tc := range []struct {
		name string
		c    Counters
		want string // "" for valid
	}{
		{"none", nil, ""},
		{"good", Counters{"maps.data_local": 3, "shuffle.bytes.off_rack": -1, "reduce_0-wtnd": 1 << 62}, ""},
		{"empty name", Counters{"": 1}, `counters: name "" must be 1 to 64 characters`},
		{"long name", Counters{strings.Repeat("a", MaxCounterNameLength+1): 1}, "must be 1 to 64 characters"},
		{"upper case", Counters{"Maps": 1}, `counters: name "Maps" may hold only a-z`},
		{"space", Counters{"maps local": 1}, `"maps local" may hold only`},
		{"too many", many, "counters: 1025; at most 1024"},
	} {
		err := ValidateCounters(tc.c)
		if tc.want == "" && err != nil || tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)) {
			t.Errorf("%s: %v, want %q", tc.name, err, tc.want)
		}
	}
}

// Every server refusing the same counters must say the same, whatever
// order it ranges over the map in: the refusal is replicated.
func TestValidateCountersNamesTheFirstBadNameInNameOrder(t *testing.T) {
	c := Counters{"ok": 1}
	for _, n := range []string{"Zed", "b c", "A", "x!", "Q"} {
		c[n] = 1
	}
	for range 50 {
		if err := ValidateCounters(c); err == nil || !strings.Contains(err.Error(), `name "A" `) {
			t.Fatalf("%v: want the first bad name in order, \"A\"", err)
		}
	}
}
