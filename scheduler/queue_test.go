package scheduler

import (
	"strings"
	"testing"
	"time"
)

func ptr[T any](v T) *T { return &v }

func exampleConfig() *QueueConfig {
	prod := NewQueueSpec("prod")
	prod.Weight = 3
	prod.MinResources = Resources{MemoryMB: 4096, Vcores: 4}
	prod.Preemptable = ptr(false)
	prod.FairSharePreemptionTimeout = ptr(5 * time.Second)
	etl := NewQueueSpec("etl")
	prod.Children = []*QueueSpec{etl}
	dev := NewQueueSpec("dev")
	root := NewQueueSpec(RootQueue)
	root.Policy = PolicyDRF
	root.MinSharePreemptionTimeout = ptr(30 * time.Second)
	root.Children = []*QueueSpec{prod, dev, NewQueueSpec("default")}
	return &QueueConfig{Scheduler: DefaultSchedulerConfig(), Root: root}
}

func TestDefaultQueueConfigIsValid(t *testing.T) {
	c := DefaultQueueConfig()
	if errs := c.Validate(); errs != nil {
		t.Fatalf("default config invalid: %v", errs)
	}
	if got := c.Leaves(); len(got) != 1 || got[0] != DefaultQueue {
		t.Fatalf("leaves = %v, want [%s]", got, DefaultQueue)
	}
}

func TestResolveInheritsPreemptionProperties(t *testing.T) {
	qs := exampleConfig().Resolve()
	byPath := map[string]*Queue{}
	for _, q := range qs {
		byPath[q.Path] = q
	}
	if len(qs) != 5 || qs[0].Path != "root" || qs[1].Path != "root.prod" || qs[2].Path != "root.prod.etl" {
		t.Fatalf("order = %v", qs)
	}
	etl := byPath["root.prod.etl"]
	if etl.Preemptable || etl.FairSharePreemptionTimeout != 5*time.Second || etl.MinSharePreemptionTimeout != 30*time.Second {
		t.Fatalf("etl did not inherit: %+v", etl)
	}
	if etl.Depth != 2 || etl.Parent != "root.prod" || !etl.IsLeaf() {
		t.Fatalf("etl position: %+v", etl)
	}
	dev := byPath["root.dev"]
	if !dev.Preemptable || dev.FairSharePreemptionThreshold != 0.5 || dev.FairSharePreemptionTimeout != 0 {
		t.Fatalf("dev defaults: %+v", dev)
	}
	// Inherited limits are not: max_resources and weight stay per queue.
	if etl.Weight != 1 || etl.MinResources.MemoryMB != 0 {
		t.Fatalf("etl took non-inheritable properties: %+v", etl)
	}
	if got := byPath["root.prod"].Children; len(got) != 1 || got[0] != "root.prod.etl" {
		t.Fatalf("prod children = %v", got)
	}
}

func TestValidateNamesQueueAndField(t *testing.T) {
	cases := []struct {
		name   string
		mutate func(c *QueueConfig)
		queue  string
		field  string
	}{
		{"zero weight", func(c *QueueConfig) { c.Root.Children[1].Weight = 0 }, "root.dev", "weight"},
		{"bad policy", func(c *QueueConfig) { c.Root.Children[0].Policy = "lifo" }, "root.prod", "policy"},
		{"negative min", func(c *QueueConfig) { c.Root.Children[1].MinResources.Vcores = -1 }, "root.dev", "min_resources"},
		{"min above max", func(c *QueueConfig) { c.Root.Children[0].MaxResources = &Resources{MemoryMB: 1024, Vcores: 100} }, "root.prod", "min_resources"},
		{"negative max apps", func(c *QueueConfig) { c.Root.Children[1].MaxRunningApps = ptr(-1) }, "root.dev", "max_running_apps"},
		{"threshold above 1", func(c *QueueConfig) { c.Root.FairSharePreemptionThreshold = ptr(1.5) }, "root", "fair_share_preemption_threshold"},
		{"negative timeout", func(c *QueueConfig) { c.Root.Children[0].Children[0].MinSharePreemptionTimeout = ptr(-time.Second) }, "root.prod.etl", "min_share_preemption_timeout"},
		{"max_am_share 0", func(c *QueueConfig) { c.Root.Children[1].MaxAMShare = ptr(0.0) }, "root.dev", "max_am_share"},
		{"max_am_share above 1", func(c *QueueConfig) { c.Root.MaxAMShare = ptr(1.5) }, "root", "max_am_share"},
		{"max_am_share negative but not -1", func(c *QueueConfig) { c.Root.Children[0].MaxAMShare = ptr(-0.5) }, "root.prod", "max_am_share"},
		{"duplicate child", func(c *QueueConfig) { c.Root.Children = append(c.Root.Children, NewQueueSpec("dev")) }, "root.dev", ""},
		{"dotted name", func(c *QueueConfig) { c.Root.Children[1].Name = "a.b" }, "root", "queue"},
		{"root renamed", func(c *QueueConfig) { c.Root.Name = "top" }, "top", ""},
		{"bad placement", func(c *QueueConfig) { c.Scheduler.Placement = "random" }, "", "placement"},
		{"utilization above 1", func(c *QueueConfig) { c.Scheduler.Preemption.ClusterUtilizationThreshold = 2 }, "", "preemption.cluster_utilization_threshold"},
		{"both delay kinds", func(c *QueueConfig) { c.Scheduler.Locality.NodeDelay = Delay{Opportunities: 2, Duration: time.Second} }, "", "locality.node_delay"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			cfg := exampleConfig()
			if errs := cfg.Validate(); errs != nil {
				t.Fatalf("example invalid before mutation: %v", errs)
			}
			c.mutate(cfg)
			errs := cfg.Validate()
			if len(errs) != 1 {
				t.Fatalf("want exactly one error, got %v", errs)
			}
			if errs[0].Queue != c.queue || errs[0].Field != c.field {
				t.Fatalf("error %q names (%q, %q), want (%q, %q)", errs[0], errs[0].Queue, errs[0].Field, c.queue, c.field)
			}
		})
	}
}

func TestMaxAMShareIsInherited(t *testing.T) {
	cfg := exampleConfig()
	cfg.Root.Children[0].MaxAMShare = ptr(0.25) // prod, inherited by prod.etl
	cfg.Root.Children[1].MaxAMShare = ptr(MaxAMShareOff)
	cfg.Root.Children[2].MaxAMShare = ptr(1.0)
	if errs := cfg.Validate(); errs != nil {
		t.Fatalf("valid values refused: %v", errs)
	}
	want := map[string]float64{"root": DefaultMaxAMShare, "root.prod": 0.25, "root.prod.etl": 0.25, "root.dev": -1, "root.default": 1}
	for _, q := range cfg.Resolve() {
		if q.MaxAMShare != want[q.Path] {
			t.Errorf("%s: max_am_share %v, want %v", q.Path, q.MaxAMShare, want[q.Path])
		}
	}
	cfg.Root.MaxAMShare = ptr(0.75)
	cfg.Root.Children[0].MaxAMShare = nil
	for _, q := range cfg.Resolve() {
		if q.Path == "root.prod.etl" && q.MaxAMShare != 0.75 {
			t.Errorf("root.prod.etl: max_am_share %v, want root's 0.75", q.MaxAMShare)
		}
	}
}

func TestValidateLimitsDepth(t *testing.T) {
	cfg := DefaultQueueConfig()
	q := cfg.Root
	for i := 0; i < MaxQueueDepth+2; i++ {
		ch := NewQueueSpec("q")
		q.Children = []*QueueSpec{ch}
		q = ch
	}
	errs := cfg.Validate()
	if len(errs) == 0 || !strings.Contains(errs[len(errs)-1].Error(), "deeper") {
		t.Fatalf("deep tree accepted: %v", errs)
	}
}

func TestCheckSubmitQueue(t *testing.T) {
	cfg := exampleConfig()
	for in, want := range map[string]string{"": "root.default", "dev": "root.dev", "root.prod.etl": "root.prod.etl"} {
		got, err := cfg.CheckSubmitQueue(in)
		if err != nil || got != want {
			t.Errorf("CheckSubmitQueue(%q) = %q, %v; want %q", in, got, err, want)
		}
	}
	for in, want := range map[string]string{"root.prod": "parent queue", "nope": "does not exist", "root": "parent queue"} {
		_, err := cfg.CheckSubmitQueue(in)
		if err == nil || !strings.Contains(err.Error(), want) || !strings.Contains(err.Error(), "root.prod.etl, root.dev, root.default") {
			t.Errorf("CheckSubmitQueue(%q) = %v; want %q and the list of leaves", in, err, want)
		}
	}
}
