package scheduler

import (
	"fmt"
	"path/filepath"
	"strings"
	"unicode"
)

// AMTypeMapReduce is the built-in MapReduce AM (SPEC §19): it runs a job's
// map tasks near their splits, shuffles their partitioned output to R
// reduce tasks placed at their centers of gravity, and runs the reduce.
const AMTypeMapReduce = "mapreduce"

// Reduce placements of a MapReduce job.
const (
	// PlacementCenterOfGravity gives each reduce ask its feeders: the
	// scheduler places it at the least weighted total network distance
	// from them (CoGRS, cogrs.go). The default.
	PlacementCenterOfGravity = "center_of_gravity"
	// PlacementAny asks for reduces anywhere, as Hadoop's native
	// scheduler does: the locality-unaware baseline.
	PlacementAny = "any"
)

// Limits of a MapReduce job: it is replicated with its app, so each part
// is bounded.
const (
	MaxSplits         = 10000
	MaxReducers       = 256
	MaxSplitLocations = 16   // nodes, and racks, of one split
	MaxJobPath        = 1024 // bytes of a split's path or the output directory
	MaxJobCommandArgs = 256
	MaxJobCommandLen  = 64 << 10 // bytes of a command's arguments together
)

// MapReduce is a job of the built-in MapReduce AM.
type MapReduce struct {
	// Splits are the map inputs: one map task each.
	Splits []Split `codec:"splits"`
	// Map runs once per split: the split on stdin, `key<TAB>value` lines
	// on stdout.
	Map []string `codec:"map"`
	// Reduce runs once per partition: the partition's lines sorted by key
	// on stdin; its stdout is the partition's output file.
	Reduce []string `codec:"reduce"`
	// Reducers is R, how many partitions map output is hashed into.
	Reducers int `codec:"reducers"`
	// Output is the directory the reduces write part-r-NNNNN into: a path
	// every agent's host sees (a shared file system).
	Output string `codec:"output"`
	// MapResources and ReduceResources size the task containers
	// [memory_mb 256, vcores 1].
	MapResources    Resources `codec:"map_resources"`
	ReduceResources Resources `codec:"reduce_resources"`
	// ReducePlacement is PlacementCenterOfGravity (the default) or
	// PlacementAny.
	ReducePlacement string `codec:"reduce_placement"`
	// Env is added to every task's environment.
	Env map[string]string `codec:"env,omitempty"`
}

// Split is one map input: a file, and the nodes and racks that hold it
// (declared: the AM asks for them, delay scheduling decides).
type Split struct {
	Path  string   `codec:"path"`
	Nodes []string `codec:"nodes,omitempty"`
	Racks []string `codec:"racks,omitempty"`
}

// Locality is the map ask's locality for s: its nodes and racks, relaxed.
func (s *Split) Locality() Locality {
	return Locality{Nodes: s.Nodes, Racks: s.Racks, Relax: true}
}

func (m *MapReduce) setDefaults() {
	def := Resources{MemoryMB: 256, Vcores: 1}
	if m.MapResources.IsZero() {
		m.MapResources = def
	}
	if m.ReduceResources.IsZero() {
		m.ReduceResources = def
	}
	if m.ReducePlacement == "" {
		m.ReducePlacement = PlacementCenterOfGravity
	}
}

// Validate checks a job (after its app's SetDefaults) and names the first
// bad field.
func (m *MapReduce) Validate() error {
	switch {
	case len(m.Splits) == 0 || len(m.Splits) > MaxSplits:
		return fmt.Errorf("mapreduce.splits: give 1 to %d splits, not %d", MaxSplits, len(m.Splits))
	case m.Reducers < 1 || m.Reducers > MaxReducers:
		return fmt.Errorf("mapreduce.reducers: must be between 1 and %d, not %d", MaxReducers, m.Reducers)
	case m.ReducePlacement != PlacementCenterOfGravity && m.ReducePlacement != PlacementAny:
		return fmt.Errorf("mapreduce.reduce_placement: must be %q or %q, not %.64q", PlacementCenterOfGravity, PlacementAny, m.ReducePlacement)
	}
	if err := validateJobPath("mapreduce.output", m.Output); err != nil {
		return err
	}
	for _, c := range []struct {
		field string
		argv  []string
	}{{"mapreduce.map", m.Map}, {"mapreduce.reduce", m.Reduce}} {
		if err := validateCommand(c.field, c.argv); err != nil {
			return err
		}
	}
	for _, r := range []struct {
		field string
		res   Resources
	}{{"mapreduce.map_resources", m.MapResources}, {"mapreduce.reduce_resources", m.ReduceResources}} {
		if err := ValidateContainerResources(r.res); err != nil {
			return fmt.Errorf("%s: %w", r.field, err)
		}
	}
	for k := range m.Env {
		if k == "" || strings.ContainsAny(k, "=\x00") {
			return fmt.Errorf("mapreduce.env: %.64q is not an environment variable name", k)
		}
	}
	for i := range m.Splits {
		if err := m.Splits[i].validate(i); err != nil {
			return err
		}
	}
	return nil
}

func (s *Split) validate(i int) error {
	if err := validateJobPath(fmt.Sprintf("mapreduce.splits[%d].path", i), s.Path); err != nil {
		return err
	}
	if len(s.Nodes) > MaxSplitLocations || len(s.Racks) > MaxSplitLocations {
		return fmt.Errorf("mapreduce.splits[%d]: at most %d nodes and %d racks", i, MaxSplitLocations, MaxSplitLocations)
	}
	for j, n := range s.Nodes {
		if err := ValidateNodeID(n); err != nil {
			return fmt.Errorf("mapreduce.splits[%d].nodes[%d]: %w", i, j, err)
		}
	}
	for j, r := range s.Racks {
		if err := validateRack(r); err != nil {
			return fmt.Errorf("mapreduce.splits[%d].racks[%d]: %w", i, j, err)
		}
	}
	return nil
}

// validateJobPath checks a path of a job: absolute (tasks run in their own
// directories, so a relative path would mean a different file on each),
// clean of control characters, and bounded.
func validateJobPath(field, p string) error {
	switch {
	case p == "":
		return fmt.Errorf("%s: give a path", field)
	case len(p) > MaxJobPath:
		return fmt.Errorf("%s: longer than %d bytes", field, MaxJobPath)
	case !filepath.IsAbs(p):
		return fmt.Errorf("%s: %.64q must be an absolute path (every task runs in its own directory)", field, p)
	}
	for _, c := range p {
		if unicode.IsControl(c) {
			return fmt.Errorf("%s: %.64q holds a control character", field, p)
		}
	}
	return nil
}

func validateCommand(field string, argv []string) error {
	if len(argv) == 0 || argv[0] == "" {
		return fmt.Errorf("%s: give the command, e.g. [\"sh\", \"-c\", \"...\"]", field)
	}
	if len(argv) > MaxJobCommandArgs {
		return fmt.Errorf("%s: %d arguments; at most %d", field, len(argv), MaxJobCommandArgs)
	}
	n := 0
	for _, a := range argv {
		n += len(a)
		if strings.IndexByte(a, 0) >= 0 {
			return fmt.Errorf("%s: an argument holds a NUL byte", field)
		}
	}
	if n > MaxJobCommandLen {
		return fmt.Errorf("%s: %d bytes of arguments; at most %d", field, n, MaxJobCommandLen)
	}
	return nil
}

// Counters are an app's named figures, which its AM reports (SPEC §19: a
// MapReduce job's data-local maps, shuffle bytes by distance, WTND...).
// The servers keep the latest with the app.
type Counters map[string]int64

// Limits of an app's counters.
const (
	MaxCounters          = 1024
	MaxCounterNameLength = 64
)

// ValidateCounters checks counters an AM reports and names a bad one:
// names are 1 to MaxCounterNameLength of a-z, 0-9, '.', '_' and '-'. Of
// several bad names it names the first in name order, whatever the map's
// order, so that every server refusing them says the same (a refusal is
// remembered, replicated, with a client's request ID).
func ValidateCounters(c Counters) error {
	if len(c) > MaxCounters {
		return fmt.Errorf("counters: %d; at most %d", len(c), MaxCounters)
	}
	bad, why := "", ""
	for name := range c {
		if problem := counterNameProblem(name); problem != "" && (why == "" || name < bad) {
			bad, why = name, problem
		}
	}
	if why != "" {
		return fmt.Errorf("counters: name %.64q %s", bad, why)
	}
	return nil
}

// counterNameProblem says what is wrong with a counter's name, or "".
func counterNameProblem(name string) string {
	if name == "" || len(name) > MaxCounterNameLength {
		return fmt.Sprintf("must be 1 to %d characters", MaxCounterNameLength)
	}
	for _, r := range name {
		if !(r >= 'a' && r <= 'z' || r >= '0' && r <= '9' || r == '.' || r == '_' || r == '-') {
			return "may hold only a-z, 0-9, '.', '_' and '-'"
		}
	}
	return ""
}

// Equal reports whether c and o hold the same figures.
func (c Counters) Equal(o Counters) bool {
	if len(c) != len(o) {
		return false
	}
	for k, v := range c {
		if w, ok := o[k]; !ok || w != v {
			return false
		}
	}
	return true
}
