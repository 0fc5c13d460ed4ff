package config

import (
	"fmt"
	"path/filepath"
	"strings"
	"time"

	"github.com/hashicorp/hcl/v2/gohcl"
	"github.com/weft-sched/weft/scheduler"
)

// appFile is the `weft app submit -spec FILE` format.
// Its JSON form (appspec_json.go) has the same names.
type appFile struct {
	Name          string           `hcl:"name,optional" json:"name"`
	Queue         string           `hcl:"queue,optional" json:"queue"`
	User          string           `hcl:"user,optional" json:"user"`
	Priority      int32            `hcl:"priority,optional" json:"priority"`
	MaxAMAttempts int              `hcl:"max_am_attempts,optional" json:"max_am_attempts"`
	AMResources   map[string]int64 `hcl:"am_resources,optional" json:"am_resources"`
	DShell        *dshellBlock     `hcl:"dshell,block" json:"dshell"`
	MapReduce     *mapreduceBlock  `hcl:"mapreduce,block" json:"mapreduce"`
	// MaxFailuresPerNode is a pointer so that 0 (never blacklist) differs
	// from left out (the default).
	MaxFailuresPerNode *int `hcl:"max_failures_per_node,optional" json:"max_failures_per_node"`
}

// mapreduceBlock is a MapReduce job (SPEC §19). Relative paths are taken
// from the spec file's directory.
type mapreduceBlock struct {
	Map             []string          `hcl:"map" json:"map"`
	Reduce          []string          `hcl:"reduce" json:"reduce"`
	Reducers        int               `hcl:"reducers" json:"reducers"`
	Output          string            `hcl:"output" json:"output"`
	MapResources    map[string]int64  `hcl:"map_resources,optional" json:"map_resources"`
	ReduceResources map[string]int64  `hcl:"reduce_resources,optional" json:"reduce_resources"`
	ReducePlacement string            `hcl:"reduce_placement,optional" json:"reduce_placement"`
	Env             map[string]string `hcl:"env,optional" json:"env"`
	Splits          splitBlocks       `hcl:"split,block" json:"split"`
}

type splitBlock struct {
	Path  string   `hcl:"path" json:"path"`
	Nodes []string `hcl:"nodes,optional" json:"nodes"`
	Racks []string `hcl:"racks,optional" json:"racks"`
}

type dshellBlock struct {
	NumContainers                  *int              `hcl:"num_containers,optional" json:"num_containers"`
	Resources                      map[string]int64  `hcl:"resources,optional" json:"resources"`
	ContainerType                  string            `hcl:"container_type,optional" json:"container_type"`
	Command                        []string          `hcl:"command" json:"command"`
	Env                            map[string]string `hcl:"env,optional" json:"env"`
	PromoteOpportunisticAfterStart bool              `hcl:"promote_opportunistic_after_start,optional" json:"promote_opportunistic_after_start"`
	EnforceExecutionType           bool              `hcl:"enforce_execution_type,optional" json:"enforce_execution_type"`
	Nodes                          []string          `hcl:"nodes,optional" json:"nodes"`
	Racks                          []string          `hcl:"racks,optional" json:"racks"`
	RelaxLocality                  *bool             `hcl:"relax_locality,optional" json:"relax_locality"` // unset relaxes
	ExpectedDuration               string            `hcl:"expected_duration,optional" json:"expected_duration"`
}

// ParseAppSpec reads an app spec file (HCL or JSON); errors carry the
// file and line, and the spec is validated after defaults are applied. A
// mapreduce job's relative paths are taken from the file's directory.
func ParseAppSpec(filename string, src []byte) (scheduler.AppSpec, error) {
	base, err := filepath.Abs(filepath.Dir(filename))
	if err != nil {
		return scheduler.AppSpec{}, err
	}
	return parseAppSpec(filename, base, src)
}

// ParseAppSpecBody reads an app spec sent over the network (the HTTP
// API's body), named name in errors: JSON only, scanned before it is
// decoded (CheckJSONBody, MaxAppSpecValues), so that what reading it costs
// stays a few times its size. A mapreduce job's paths must be absolute:
// the body has no directory of its own, and the server's is not the
// submitter's.
func ParseAppSpecBody(name string, src []byte) (scheduler.AppSpec, error) {
	if !isJSON(name, src) {
		return scheduler.AppSpec{}, fmt.Errorf("%s: give the app spec as JSON, an object (weft app submit -spec reads HCL files)", name)
	}
	if err := CheckJSONBody(name, src, MaxAppSpecValues(len(src))); err != nil {
		return scheduler.AppSpec{}, err
	}
	return parseAppSpec(name, "", src)
}

func parseAppSpec(filename, base string, src []byte) (scheduler.AppSpec, error) {
	var spec scheduler.AppSpec
	var af appFile
	if isJSON(filename, src) {
		var err error
		if af, err = decodeAppFileJSON(filename, src); err != nil {
			return spec, err
		}
	} else {
		f, diags := parseFile(filename, src)
		if diags.HasErrors() {
			return spec, diagError(diags)
		}
		if diags := gohcl.DecodeBody(f.Body, nil, &af); diags.HasErrors() {
			return spec, diagError(diags)
		}
	}
	at := func(field string) error {
		return fmt.Errorf("%s: %s", filename, field)
	}
	amRes, err := toResources(af.AMResources)
	if err != nil {
		return spec, at("am_resources: " + err.Error())
	}
	switch {
	case af.DShell != nil && af.MapReduce != nil:
		return spec, at("give a dshell block or a mapreduce block, not both")
	case af.MapReduce != nil:
		job, err := af.MapReduce.job(base)
		if err != nil {
			return spec, at(err.Error())
		}
		spec = scheduler.AppSpec{Name: af.Name, Queue: af.Queue, User: af.User, Priority: af.Priority, MaxAMAttempts: af.MaxAMAttempts,
			MaxFailuresPerNode: af.MaxFailuresPerNode, AMType: scheduler.AMTypeMapReduce, AMResources: amRes, MapReduce: job}
		spec.SetDefaults()
		if err := spec.Validate(); err != nil {
			return spec, at(err.Error())
		}
		return spec, nil
	case af.DShell == nil:
		return spec, at(`the file needs a dshell block with the command, e.g. dshell { command = ["sh", "-c", "echo hi"] }, or a mapreduce block`)
	}
	res, err := toResources(af.DShell.Resources)
	if err != nil {
		return spec, at("dshell.resources: " + err.Error())
	}
	spec = scheduler.AppSpec{
		Name: af.Name, Queue: af.Queue, User: af.User, Priority: af.Priority, MaxAMAttempts: af.MaxAMAttempts,
		MaxFailuresPerNode: af.MaxFailuresPerNode, AMType: scheduler.AMTypeDShell, AMResources: amRes,
		DShell: scheduler.DShell{
			NumContainers: 1, Resources: res,
			ExecutionType: scheduler.ExecutionType(strings.ToUpper(af.DShell.ContainerType)),
			Command:       af.DShell.Command, Env: af.DShell.Env,
			PromoteOpportunisticAfterStart: af.DShell.PromoteOpportunisticAfterStart,
			EnforceExecutionType:           af.DShell.EnforceExecutionType,
			Nodes:                          af.DShell.Nodes, Racks: af.DShell.Racks, RelaxLocality: af.DShell.RelaxLocality,
		},
	}
	if n := af.DShell.NumContainers; n != nil {
		spec.DShell.NumContainers = *n // 0 is refused below, not taken as 1
	}
	if s := af.DShell.ExpectedDuration; s != "" {
		d, err := time.ParseDuration(s)
		if err != nil {
			return spec, at(fmt.Sprintf("dshell.expected_duration: %q is not a duration such as 30s or 2m", s))
		}
		spec.DShell.ExpectedDuration = d
	}
	spec.SetDefaults()
	if err := spec.Validate(); err != nil {
		return spec, at(err.Error())
	}
	return spec, nil
}

func toResources(m map[string]int64) (scheduler.Resources, error) {
	var r scheduler.Resources
	for k, v := range m {
		if k != scheduler.ResourceMemoryMB && k != scheduler.ResourceVcores {
			if err := scheduler.ValidateResourceName(k); err != nil {
				return r, err
			}
		}
		r = r.With(k, v)
	}
	return r, r.Validate()
}

// job is the block's job, its relative paths taken from base (left
// relative, to be refused, when base is "").
func (b *mapreduceBlock) job(base string) (*scheduler.MapReduce, error) {
	mapRes, err := toResources(b.MapResources)
	if err != nil {
		return nil, fmt.Errorf("mapreduce.map_resources: %w", err)
	}
	reduceRes, err := toResources(b.ReduceResources)
	if err != nil {
		return nil, fmt.Errorf("mapreduce.reduce_resources: %w", err)
	}
	abs := func(p string) string {
		if p == "" || base == "" || filepath.IsAbs(p) {
			return p
		}
		return filepath.Join(base, p)
	}
	job := &scheduler.MapReduce{Map: b.Map, Reduce: b.Reduce, Reducers: b.Reducers, Output: abs(b.Output),
		MapResources: mapRes, ReduceResources: reduceRes, ReducePlacement: b.ReducePlacement, Env: b.Env}
	for _, s := range b.Splits {
		job.Splits = append(job.Splits, scheduler.Split{Path: abs(s.Path), Nodes: s.Nodes, Racks: s.Racks})
	}
	return job, nil
}
