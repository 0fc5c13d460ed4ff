package config

import (
	"fmt"
	"sort"
	"time"

	"github.com/hashicorp/hcl/v2"
	"github.com/weft-sched/weft/scheduler"
	"github.com/zclconf/go-cty/cty"
)

var (
	queueFileSchema = &hcl.BodySchema{Blocks: []hcl.BlockHeaderSchema{
		{Type: "scheduler"},
		{Type: "queue", LabelNames: []string{"name"}},
	}}
	schedulerSchema = &hcl.BodySchema{
		Attributes: []hcl.AttributeSchema{{Name: "placement"}},
		Blocks:     []hcl.BlockHeaderSchema{{Type: "preemption"}, {Type: "locality"}, {Type: "opportunistic"}, {Type: "capacity"}},
	}
	capacitySchema = &hcl.BodySchema{Attributes: []hcl.AttributeSchema{
		{Name: "minimum_allocation"}, {Name: "reservation_timeout"},
	}}
	opportunisticSchema = &hcl.BodySchema{Attributes: []hcl.AttributeSchema{
		{Name: "distributed"}, {Name: "sorting_nodes_interval"}, {Name: "nodes_used"},
		{Name: "queue_limit_stdev"}, {Name: "min_queue_length"}, {Name: "max_queue_length"},
		{Name: "load_comparator"}, {Name: "max_allocations_per_am_heartbeat"}, {Name: "shared_list"},
	}}
	preemptionSchema = &hcl.BodySchema{Attributes: []hcl.AttributeSchema{
		{Name: "enabled"}, {Name: "cluster_utilization_threshold"}, {Name: "wait_before_kill"},
	}}
	localitySchema = &hcl.BodySchema{Attributes: []hcl.AttributeSchema{
		{Name: "node_delay"}, {Name: "rack_delay"},
	}}
	queueSchema = &hcl.BodySchema{
		Attributes: []hcl.AttributeSchema{
			{Name: "weight"}, {Name: "min_resources"}, {Name: "max_resources"}, {Name: "policy"},
			{Name: "max_running_apps"}, {Name: "preemptable"},
			{Name: "fair_share_preemption_threshold"}, {Name: "fair_share_preemption_timeout"},
			{Name: "min_share_preemption_timeout"}, {Name: "max_am_share"},
			{Name: "type"}, {Name: "capacity"}, {Name: "max_capacity"}, {Name: "user_limit_factor"},
			{Name: "minimum_user_limit_percent"}, {Name: "maximum_am_resource_percent"},
		},
		Blocks: []hcl.BlockHeaderSchema{{Type: "queue", LabelNames: []string{"name"}}},
	}
)

// queueDecoder remembers where each field was written, so that problems
// found by scheduler validation point at the line that caused them.
type queueDecoder struct {
	diags  hcl.Diagnostics
	ranges map[string]hcl.Range // "queue.path|field" → range; field "" is the block
}

func (d *queueDecoder) note(path, field string, r hcl.Range) { d.ranges[path+"|"+field] = r }

func (d *queueDecoder) add(diags hcl.Diagnostics) bool {
	d.diags = append(d.diags, diags...)
	return !diags.HasErrors()
}

// ParseQueueConfigBody reads a queue configuration sent over the network
// (the HTTP API's body), named name in errors: HCL, or JSON, scanned
// before it is parsed (CheckHCLBody, CheckJSONBody) so that what parsing
// it costs is bounded (QueueConfigBodyCost).
func ParseQueueConfigBody(name string, src []byte) (*scheduler.QueueConfig, error) {
	var err error
	if isJSON(name, src) {
		err = CheckJSONBody(name, src, MaxQueueConfigJSONValues)
	} else {
		err = CheckHCLBody(name, src, MaxQueueConfigTokens)
	}
	if err != nil {
		return nil, err
	}
	return ParseQueueConfig(name, src)
}

// ParseQueueConfig reads a queue configuration file. It returns the
// configuration only if the file parses and validates completely; otherwise
// an *Error listing every problem as file:line,col: reason.
func ParseQueueConfig(filename string, src []byte) (*scheduler.QueueConfig, error) {
	f, diags := parseFile(filename, src)
	if diags.HasErrors() {
		return nil, diagError(diags)
	}
	d := &queueDecoder{ranges: map[string]hcl.Range{}}
	content, diags := f.Body.Content(queueFileSchema)
	if !d.add(diags) {
		return nil, diagError(d.diags)
	}
	cfg := &scheduler.QueueConfig{Scheduler: scheduler.DefaultSchedulerConfig()}
	fileRange := hcl.Range{Filename: filename, Start: hcl.Pos{Line: 1, Column: 1}, End: hcl.Pos{Line: 1, Column: 1}}
	for _, b := range content.Blocks {
		switch b.Type {
		case "scheduler":
			d.decodeScheduler(b, &cfg.Scheduler)
		case "queue":
			if cfg.Root != nil {
				d.add(hcl.Diagnostics{errAt(b.DefRange, "Duplicate root queue", "a file has one top-level queue, %q", scheduler.RootQueue)})
				continue
			}
			if b.Labels[0] != scheduler.RootQueue {
				d.add(hcl.Diagnostics{errAt(b.LabelRanges[0], "Invalid root queue", "the top-level queue must be named %q, not %q", scheduler.RootQueue, b.Labels[0])})
				continue
			}
			cfg.Root = d.decodeQueue(b, "")
		}
	}
	if cfg.Root == nil && !d.diags.HasErrors() {
		d.add(hcl.Diagnostics{errAt(fileRange, "Missing root queue", "the file must define queue %q", scheduler.RootQueue)})
	}
	if d.diags.HasErrors() {
		return nil, diagError(d.diags)
	}
	for _, fe := range cfg.Validate() {
		r, ok := d.ranges[fe.Queue+"|"+fe.Field]
		if !ok {
			r, ok = d.ranges[fe.Queue+"|"]
		}
		if !ok {
			r = fileRange
		}
		d.add(hcl.Diagnostics{errAt(r, "Invalid queue configuration", "%s", fe.Error())})
	}
	if d.diags.HasErrors() {
		return nil, diagError(d.diags)
	}
	return cfg, nil
}

func (d *queueDecoder) decodeScheduler(b *hcl.Block, s *scheduler.SchedulerConfig) {
	content, diags := b.Body.Content(schedulerSchema)
	if !d.add(diags) {
		return
	}
	if a := content.Attributes["placement"]; a != nil {
		d.note("", "placement", a.Range)
		v, diags := asString(a)
		if d.add(diags) {
			s.Placement = scheduler.PlacementPolicy(v)
		}
	}
	for _, blk := range content.Blocks {
		switch blk.Type {
		case "preemption":
			c, diags := blk.Body.Content(preemptionSchema)
			if !d.add(diags) {
				continue
			}
			if a := c.Attributes["enabled"]; a != nil {
				v, diags := asBool(a)
				if d.add(diags) {
					s.Preemption.Enabled = v
				}
			}
			if a := c.Attributes["cluster_utilization_threshold"]; a != nil {
				d.note("", "preemption.cluster_utilization_threshold", a.Range)
				v, diags := asFloat(a)
				if d.add(diags) {
					s.Preemption.ClusterUtilizationThreshold = v
				}
			}
			if a := c.Attributes["wait_before_kill"]; a != nil {
				d.note("", "preemption.wait_before_kill", a.Range)
				v, diags := asDuration(a, "")
				if d.add(diags) {
					s.Preemption.WaitBeforeKill = v
				}
			}
		case "opportunistic":
			c, diags := blk.Body.Content(opportunisticSchema)
			if !d.add(diags) {
				continue
			}
			o := &s.Opportunistic
			for _, a := range sortedAttributes(c.Attributes) {
				d.note("", "opportunistic."+a.Name, a.Range)
				var diags hcl.Diagnostics
				switch a.Name {
				case "distributed":
					o.Distributed, diags = asBool(a)
				case "sorting_nodes_interval":
					o.SortingNodesInterval, diags = asDuration(a, "")
				case "nodes_used":
					var n int64
					n, diags = asInt(a)
					o.NodesUsed = int(n)
				case "queue_limit_stdev":
					o.QueueLimitStdev, diags = asFloat(a)
				case "min_queue_length":
					var n int64
					n, diags = asInt(a)
					o.MinQueueLength = int(n)
				case "max_queue_length":
					var n int64
					n, diags = asInt(a)
					o.MaxQueueLength = int(n)
				case "load_comparator":
					o.LoadComparator, diags = asString(a)
				case "max_allocations_per_am_heartbeat":
					var n int64
					n, diags = asInt(a)
					o.MaxAllocationsPerAMHeartbeat = int(n)
				case "shared_list":
					o.SharedList, diags = asBool(a)
				}
				d.add(diags)
			}
		case "capacity":
			c, diags := blk.Body.Content(capacitySchema)
			if !d.add(diags) {
				continue
			}
			for _, a := range sortedAttributes(c.Attributes) {
				d.note("", "capacity."+a.Name, a.Range)
				var diags hcl.Diagnostics
				switch a.Name {
				case "minimum_allocation":
					s.Capacity.MinimumAllocation, diags = asResources(a)
				case "reservation_timeout":
					s.Capacity.ReservationTimeout, diags = asDuration(a, "")
				}
				d.add(diags)
			}
		case "locality":
			c, diags := blk.Body.Content(localitySchema)
			if !d.add(diags) {
				continue
			}
			for name, dst := range map[string]*scheduler.Delay{"node_delay": &s.Locality.NodeDelay, "rack_delay": &s.Locality.RackDelay} {
				if a := c.Attributes[name]; a != nil {
					d.note("", "locality."+name, a.Range)
					v, diags := asDelay(a)
					if d.add(diags) {
						*dst = v
					}
				}
			}
		}
	}
}

// asDelay reads a count of scheduling opportunities (a number) or a
// duration (a string such as "3s").
func asDelay(a *hcl.Attribute) (scheduler.Delay, hcl.Diagnostics) {
	v, diags := value(a)
	if diags.HasErrors() {
		return scheduler.Delay{}, diags
	}
	if v.Type() == cty.String {
		dur, diags := asDuration(a, "")
		return scheduler.Delay{Duration: dur}, diags
	}
	n, diags := numberToInt(v, a.Name, a.Range)
	if diags.HasErrors() {
		return scheduler.Delay{}, hcl.Diagnostics{errAt(a.Range, "Invalid value", "%s must be a count of skipped opportunities or a duration like \"3s\"", a.Name)}
	}
	return scheduler.Delay{Opportunities: int(n)}, nil
}

func (d *queueDecoder) decodeQueue(b *hcl.Block, parent string) *scheduler.QueueSpec {
	q := scheduler.NewQueueSpec(b.Labels[0])
	path := q.Name
	if parent != "" {
		path = parent + "." + q.Name
	}
	d.note(path, "", b.DefRange)
	if parent != "" {
		// A bad name is reported here, at its own label: the tree-wide
		// validation can only name the parent.
		if err := scheduler.ValidateQueueName(q.Name); err != nil {
			d.add(hcl.Diagnostics{errAt(b.LabelRanges[0], "Invalid queue name", "in queue %s: %v", parent, err)})
		}
	}
	content, diags := b.Body.Content(queueSchema)
	if !d.add(diags) {
		return q
	}
	for _, a := range sortedAttributes(content.Attributes) {
		name := a.Name
		d.note(path, name, a.Range)
		var diags hcl.Diagnostics
		switch name {
		case "weight":
			q.Weight, diags = asFloat(a)
		case "policy":
			var s string
			s, diags = asString(a)
			q.Policy = scheduler.Policy(s)
		case "min_resources":
			q.MinResources, diags = asResources(a)
		case "max_resources":
			var r scheduler.Resources
			if r, diags = asResources(a); !diags.HasErrors() {
				// memory_mb or vcores left out of a limit do not constrain.
				v, _ := value(a)
				if !hasKey(v, scheduler.ResourceMemoryMB) {
					r.MemoryMB = scheduler.Unlimited
				}
				if !hasKey(v, scheduler.ResourceVcores) {
					r.Vcores = scheduler.Unlimited
				}
				q.MaxResources = &r
			}
		case "max_running_apps":
			var n int64
			if n, diags = asInt(a); !diags.HasErrors() {
				v := int(n)
				q.MaxRunningApps = &v
			}
		case "preemptable":
			var v bool
			if v, diags = asBool(a); !diags.HasErrors() {
				q.Preemptable = &v
			}
		case "fair_share_preemption_threshold":
			var v float64
			if v, diags = asFloat(a); !diags.HasErrors() {
				q.FairSharePreemptionThreshold = &v
			}
		case "fair_share_preemption_timeout":
			var v time.Duration
			if v, diags = asDuration(a, "off"); !diags.HasErrors() {
				q.FairSharePreemptionTimeout = &v
			}
		case "min_share_preemption_timeout":
			var v time.Duration
			if v, diags = asDuration(a, "off"); !diags.HasErrors() {
				q.MinSharePreemptionTimeout = &v
			}
		case "max_am_share":
			var v float64
			if v, diags = asFloat(a); !diags.HasErrors() {
				q.MaxAMShare = &v
			}
		case "type":
			var v string
			v, diags = asString(a)
			q.Type = scheduler.QueueType(v)
		case "capacity":
			var v float64
			if v, diags = asFloat(a); !diags.HasErrors() {
				q.Capacity = &v
			}
		case "max_capacity":
			var v float64
			if v, diags = asFloat(a); !diags.HasErrors() {
				q.MaxCapacity = &v
			}
		case "user_limit_factor":
			var v float64
			if v, diags = asFloat(a); !diags.HasErrors() {
				q.UserLimitFactor = &v
			}
		case "minimum_user_limit_percent":
			var v float64
			if v, diags = asFloat(a); !diags.HasErrors() {
				q.MinimumUserLimitPercent = &v
			}
		case "maximum_am_resource_percent":
			var v float64
			if v, diags = asFloat(a); !diags.HasErrors() {
				q.MaximumAMResourcePercent = &v
			}
		}
		d.add(diags)
	}
	for _, child := range content.Blocks {
		q.Children = append(q.Children, d.decodeQueue(child, path))
	}
	return q
}

// sortedAttributes returns attributes in file order, so that problems are
// reported top to bottom.
func sortedAttributes(attrs hcl.Attributes) []*hcl.Attribute {
	out := make([]*hcl.Attribute, 0, len(attrs))
	for _, a := range attrs {
		out = append(out, a)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Range.Start.Byte < out[j].Range.Start.Byte })
	return out
}

func hasKey(v cty.Value, key string) bool {
	for it := v.ElementIterator(); it.Next(); {
		if k, _ := it.Element(); k.AsString() == key {
			return true
		}
	}
	return false
}

// asResources reads { memory_mb = 4096, vcores = 4, gpu = 1 }.
func asResources(a *hcl.Attribute) (scheduler.Resources, hcl.Diagnostics) {
	v, diags := value(a)
	if diags.HasErrors() {
		return scheduler.Resources{}, diags
	}
	if !v.Type().IsObjectType() && !v.Type().IsMapType() {
		return scheduler.Resources{}, hcl.Diagnostics{errAt(a.Range, "Invalid value", "%s must be an object like { memory_mb = 4096, vcores = 4 }", a.Name)}
	}
	var r scheduler.Resources
	for it := v.ElementIterator(); it.Next(); {
		k, ev := it.Element()
		name := k.AsString()
		if name != scheduler.ResourceMemoryMB && name != scheduler.ResourceVcores {
			if err := scheduler.ValidateResourceName(name); err != nil {
				return scheduler.Resources{}, hcl.Diagnostics{errAt(a.Range, "Invalid resource", "%s: %v", a.Name, err)}
			}
		}
		n, diags := numberToInt(ev, fmt.Sprintf("%s.%s", a.Name, name), a.Range)
		if diags.HasErrors() {
			return scheduler.Resources{}, diags
		}
		r = r.With(name, n)
	}
	return r, nil
}
