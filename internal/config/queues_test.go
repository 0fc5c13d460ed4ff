package config

import (
	"os"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/weft-sched/weft/scheduler"
)

const exampleJSON = `{
  "scheduler": {
    "placement": "spread",
    "preemption": {"enabled": true, "cluster_utilization_threshold": 0.8, "wait_before_kill": "15s"}
  },
  "queue": {"root": {
    "policy": "drf",
    "queue": {
      "prod": {
        "weight": 3,
        "min_resources": {"memory_mb": 4096, "vcores": 4},
        "preemptable": false,
        "fair_share_preemption_threshold": 0.8,
        "fair_share_preemption_timeout": "5s"
      },
      "dev": {"weight": 1},
      "default": {}
    }
  }}
}`

func TestExampleFileParses(t *testing.T) {
	src, err := os.ReadFile("../../examples/queues.hcl")
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := ParseQueueConfig("queues.hcl", src)
	if err != nil {
		t.Fatal(err)
	}
	if !cfg.Scheduler.Preemption.Enabled || cfg.Scheduler.Preemption.WaitBeforeKill != 15*time.Second {
		t.Fatalf("scheduler = %+v", cfg.Scheduler)
	}
	prod := cfg.Root.Children[0]
	if cfg.Root.Policy != scheduler.PolicyDRF || prod.Name != "prod" || prod.Weight != 3 ||
		prod.MinResources.MemoryMB != 4096 || prod.MinResources.Vcores != 4 ||
		prod.Preemptable == nil || *prod.Preemptable || *prod.FairSharePreemptionTimeout != 5*time.Second {
		t.Fatalf("prod = %+v", prod)
	}
	if got := cfg.Leaves(); strings.Join(got, " ") != "root.prod root.dev root.default" {
		t.Fatalf("leaves = %v", got)
	}
	// The same configuration in JSON decodes to the same value.
	fromJSON, err := ParseQueueConfig("queues.json", []byte(exampleJSON))
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(cfg.Resolve(), fromJSON.Resolve()) || !reflect.DeepEqual(cfg.Scheduler, fromJSON.Scheduler) {
		t.Fatalf("JSON and HCL differ:\n%+v\n%+v", cfg.Resolve(), fromJSON.Resolve())
	}
}

func TestErrorsNameFileLineAndField(t *testing.T) {
	cases := []struct {
		name, src string
		want      []string
	}{
		{"syntax", "queue \"root\" {\n  weight = \n}\n", []string{"f.hcl:2,"}},
		{"unknown field", "queue \"root\" {\n  wieght = 2\n}\n", []string{"f.hcl:2,3", `"wieght"`, `Did you mean "weight"`}},
		{"wrong type", "queue \"root\" {\n  weight = \"heavy\"\n}\n", []string{"f.hcl:2,3", "weight must be a number"}},
		{"bad duration", "queue \"root\" {\n  queue \"a\" {\n    min_share_preemption_timeout = \"5 min\"\n  }\n}\n",
			[]string{"f.hcl:3,5", "min_share_preemption_timeout", `"5 min"`}},
		{"fractional int", "queue \"root\" {\n  max_running_apps = 2.5\n}\n", []string{"f.hcl:2,3", "max_running_apps must be a whole number"}},
		{"bad resource", "queue \"root\" {\n  min_resources = { memory_mb = 1, GPU = 1 }\n}\n", []string{"f.hcl:2,3", "lower-case"}},
		{"negative weight", "queue \"root\" {\n  queue \"a\" {\n    weight = -1\n  }\n}\n", []string{"f.hcl:3,5", "queue root.a: weight"}},
		{"min above max", "queue \"root\" {\n  queue \"b\" {\n    min_resources = { memory_mb = 10 }\n    max_resources = { memory_mb = 5 }\n  }\n}\n",
			[]string{"f.hcl:3,5", "root.b: min_resources"}},
		{"duplicate", "queue \"root\" {\n  queue \"a\" {}\n  queue \"a\" {}\n}\n", []string{"f.hcl:3,3", "root.a", "defined twice"}},
		{"bad name", "queue \"root\" {\n  queue \"a.b\" {}\n}\n", []string{"f.hcl:2,9", "a.b"}},
		{"wrong root", "queue \"top\" {}\n", []string{"f.hcl:1,7", `named "root"`}},
		{"no root", "scheduler {\n  placement = \"spread\"\n}\n", []string{"f.hcl:1,1", "must define queue"}},
		{"placement", "scheduler {\n  placement = \"random\"\n}\nqueue \"root\" {}\n", []string{"f.hcl:2,3", "placement"}},
		{"delay", "scheduler {\n  locality {\n    node_delay = true\n  }\n}\nqueue \"root\" {}\n", []string{"f.hcl:3,5", "node_delay"}},
		{"json", `{"queue": {"root": {"queue": {"x": {"weight": 0}}}}}`, []string{"f.hcl:1,", "root.x: weight"}},
		{"max_am_share above 1", "queue \"root\" {\n  queue \"a\" {\n    weight = 2\n    max_am_share = 1.5\n  }\n}\n",
			[]string{"f.hcl:4,5", "queue root.a: max_am_share", "-1 (off)"}},
		{"max_am_share not a number", "queue \"root\" {\n  max_am_share = \"half\"\n}\n", []string{"f.hcl:2,3", "max_am_share must be a number"}},
		{"capacities not summing to 100", "queue \"root\" {\n  type = \"capacity\"\n  queue \"a\" { capacity = 60 }\n  queue \"b\" { capacity = 30 }\n}\n",
			[]string{"f.hcl:1,1", "queue root: the capacities of its children sum to 90, not 100"}},
		{"max_capacity below capacity", "queue \"root\" {\n  type = \"capacity\"\n  queue \"a\" {\n    capacity = 60\n    max_capacity = 50\n  }\n  queue \"b\" { capacity = 40 }\n}\n",
			[]string{"f.hcl:5,5", "queue root.a: max_capacity: must be between capacity (60) and 100"}},
		{"capacity in a fair tree", "queue \"root\" {\n  queue \"a\" {\n    capacity = 50\n  }\n}\n",
			[]string{"f.hcl:3,5", "queue root.a: capacity: only queues below a queue of type \"capacity\""}},
		{"unknown type", "queue \"root\" {\n  type = \"yarn\"\n}\n", []string{"f.hcl:2,3", "type: must be fair or capacity"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			cfg, err := ParseQueueConfig("f.hcl", []byte(c.src))
			if err == nil {
				t.Fatalf("accepted: %+v", cfg)
			}
			if cfg != nil {
				t.Fatalf("returned a config alongside an error")
			}
			for _, w := range c.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not mention %q", err, w)
				}
			}
		})
	}
}

func TestEveryProblemIsReported(t *testing.T) {
	src := "queue \"root\" {\n  weight = -1\n  queue \"a\" { policy = \"lifo\" }\n  queue \"b\" { weight = 0 }\n}\n"
	_, err := ParseQueueConfig("f.hcl", []byte(src))
	e, ok := err.(*Error)
	if !ok || len(e.Problems) != 3 {
		t.Fatalf("want 3 problems, got %v", err)
	}
	for i, line := range []string{"f.hcl:2,", "f.hcl:3,", "f.hcl:4,"} {
		if !strings.HasPrefix(e.Problems[i], line) {
			t.Errorf("problem %d = %q, want it at %s", i, e.Problems[i], line)
		}
	}
}

func TestOpportunisticSettings(t *testing.T) {
	src := `scheduler {
  opportunistic {
    distributed            = false
    sorting_nodes_interval = "500ms"
    nodes_used             = 20
    queue_limit_stdev      = 1.5
    min_queue_length       = 2
    max_queue_length       = 30
  }
}
queue "root" {
  queue "default" {}
}
`
	cfg, err := ParseQueueConfig("q.hcl", []byte(src))
	if err != nil {
		t.Fatal(err)
	}
	want := scheduler.OpportunisticConfig{Distributed: false, SortingNodesInterval: 500 * time.Millisecond, NodesUsed: 20,
		QueueLimitStdev: 1.5, MinQueueLength: 2, MaxQueueLength: 30}
	if cfg.Scheduler.Opportunistic != want {
		t.Fatalf("opportunistic = %+v, want %+v", cfg.Scheduler.Opportunistic, want)
	}
	// Unset keys keep their defaults.
	cfg, err = ParseQueueConfig("q.hcl", []byte("scheduler {\n  opportunistic {\n    nodes_used = 3\n  }\n}\nqueue \"root\" {\n  queue \"default\" {}\n}\n"))
	if err != nil {
		t.Fatal(err)
	}
	def := scheduler.DefaultOpportunisticConfig()
	def.NodesUsed = 3
	if cfg.Scheduler.Opportunistic != def {
		t.Fatalf("opportunistic = %+v, want the defaults with nodes_used 3", cfg.Scheduler.Opportunistic)
	}
	// A bad value is refused with its line and the field's name.
	_, err = ParseQueueConfig("q.hcl", []byte("scheduler {\n  opportunistic {\n    min_queue_length = 40\n  }\n}\nqueue \"root\" {\n  queue \"default\" {}\n}\n"))
	if err == nil || !strings.Contains(err.Error(), "q.hcl:3,") || !strings.Contains(err.Error(), "opportunistic.min_queue_length") {
		t.Fatalf("error %v: want line 3 and opportunistic.min_queue_length", err)
	}
}

func TestBadQueueNamesAreReportedAtTheirOwnLine(t *testing.T) {
	src := "queue \"root\" {\n  queue \"bad name\" {}\n  queue \"ok\" {}\n  queue \"also.bad\" {}\n  queue \"default\" {}\n}\n"
	_, err := ParseQueueConfig("q.hcl", []byte(src))
	e, ok := err.(*Error)
	if !ok || len(e.Problems) != 2 {
		t.Fatalf("want 2 problems, got %v", err)
	}
	for i, want := range []string{`q.hcl:2,9: Invalid queue name: in queue root: queue name "bad name"`, `q.hcl:4,9: Invalid queue name: in queue root: queue name "also.bad"`} {
		if !strings.HasPrefix(e.Problems[i], want) {
			t.Errorf("problem %d = %q, want it to start %q", i, e.Problems[i], want)
		}
	}
}

func TestMaxAMShare(t *testing.T) {
	src := `queue "root" {
  max_am_share = 0.25
  queue "batch" {
    max_am_share = -1
  }
  queue "default" {}
}
`
	cfg, err := ParseQueueConfig("q.hcl", []byte(src))
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]float64{}
	for _, q := range cfg.Resolve() {
		got[q.Path] = q.MaxAMShare
	}
	if got["root"] != 0.25 || got["root.batch"] != scheduler.MaxAMShareOff || got["root.default"] != 0.25 {
		t.Fatalf("max_am_share resolved to %v, want root 0.25, batch off (-1), default inheriting 0.25", got)
	}
	unset, err := ParseQueueConfig("q.hcl", []byte("queue \"root\" {\n  queue \"default\" {}\n}\n"))
	if err != nil {
		t.Fatal(err)
	}
	if q := unset.Resolve()[1]; q.MaxAMShare != scheduler.DefaultMaxAMShare {
		t.Fatalf("unset max_am_share resolved to %v, want the default %v", q.MaxAMShare, scheduler.DefaultMaxAMShare)
	}
}

func TestCapacityExampleFileParses(t *testing.T) {
	src, err := os.ReadFile("../../examples/capacity-queues.hcl")
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := ParseQueueConfig("capacity-queues.hcl", src)
	if err != nil {
		t.Fatal(err)
	}
	for _, q := range cfg.Resolve() {
		if q.Path == "root.dev.bob" && (q.Capacity == nil || q.Capacity.Abs < 0.149 || q.Capacity.Abs > 0.151 || q.Capacity.AbsMax != 0.5) {
			t.Fatalf("root.dev.bob: %+v, want 15%% of the cluster, at most 50%%", q.Capacity)
		}
	}
}

func TestCapacityQueues(t *testing.T) {
	src := `queue "root" {
  type = "capacity"
  queue "prod" {
    capacity          = 70
    max_capacity      = 90
    user_limit_factor = 2
  }
  queue "dev" { capacity = 30 }
}
`
	cfg, err := ParseQueueConfig("cap.hcl", []byte(src))
	if err != nil {
		t.Fatal(err)
	}
	if c := cfg.Scheduler.Capacity; c.MinAllocation().String() != scheduler.DefaultMinimumAllocation.String() || c.ReservationWait() != scheduler.DefaultReservationTimeout {
		t.Fatalf("capacity settings %+v, want the defaults", c)
	}
	qs := map[string]*scheduler.Queue{}
	for _, q := range cfg.Resolve() {
		qs[q.Path] = q
	}
	prod, dev := qs["root.prod"].Capacity, qs["root.dev"].Capacity
	if prod == nil || prod.Capacity != 70 || prod.MaxCapacity != 90 || prod.UserLimitFactor != 2 ||
		dev == nil || dev.Capacity != 30 || dev.MaxCapacity != 100 || dev.UserLimitFactor != 1 || qs["root"].Policy != scheduler.PolicyCapacity {
		t.Fatalf("resolved prod %+v, dev %+v, root policy %s", prod, dev, qs["root"].Policy)
	}
}

// YARN's knobs: minimum_user_limit_percent, maximum_am_resource_percent
// (inherited), user_limit_factor and max_capacity -1, and the capacity
// settings of the scheduler block; bad values name their line.
func TestCapacityKnobs(t *testing.T) {
	src := `scheduler {
  capacity {
    minimum_allocation  = { memory_mb = 512, vcores = 1 }
    reservation_timeout = "90s"
  }
}
queue "root" {
  type                        = "capacity"
  maximum_am_resource_percent = 0.2
  queue "prod" {
    capacity                   = 70
    max_capacity               = -1
    user_limit_factor          = -1
    minimum_user_limit_percent = 25
  }
  queue "dev" {
    capacity                    = 30
    maximum_am_resource_percent = 0.5
  }
}
`
	cfg, err := ParseQueueConfig("cap.hcl", []byte(src))
	if err != nil {
		t.Fatal(err)
	}
	if c := cfg.Scheduler.Capacity; c.MinAllocation().MemoryMB != 512 || c.ReservationWait() != 90*time.Second {
		t.Fatalf("capacity settings %+v", c)
	}
	qs := map[string]*scheduler.Queue{}
	for _, q := range cfg.Resolve() {
		qs[q.Path] = q
	}
	prod, dev := qs["root.prod"].Capacity, qs["root.dev"].Capacity
	if prod.MaxCapacity != 100 || prod.UserLimitFactor != scheduler.UserLimitOff || prod.MinimumUserLimitPercent != 25 ||
		prod.MaximumAMResourcePercent != 0.2 || dev.MaximumAMResourcePercent != 0.5 || dev.MinimumUserLimitPercent != 100 {
		t.Fatalf("resolved prod %+v, dev %+v", prod, dev)
	}
	for _, tc := range []struct{ src, want string }{
		{`queue "root" {
  type = "capacity"
  queue "a" {
    capacity = 100
    minimum_user_limit_percent = 0
  }
}`, "cap.hcl:5,5: Invalid queue configuration: queue root.a: minimum_user_limit_percent: must be more than 0 and at most 100, not 0"},
		{`queue "root" {
  maximum_am_resource_percent = 0.1
  queue "a" {}
}`, "cap.hcl:2,3: Invalid queue configuration: queue root: maximum_am_resource_percent: only capacity queues have it"},
		{`queue "root" {
  type = "capacity"
  queue "a" {
    capacity = 100
    maximum_am_resource_percent = 10
  }
}`, "must be a fraction more than 0 and at most 1 (YARN's 0.1 is 10%), not 10"},
		{`queue "root" {
  type = "capacity"
  queue "a" {
    capacity = 100
    max_am_share = 0.5
  }
}`, "queue root.a: max_am_share: capacity queues limit their AMs with maximum_am_resource_percent instead"},
		{`scheduler {
  capacity { minimum_allocation = { memory_mb = 0, vcores = 1 } }
}
queue "root" {}`, "cap.hcl:2,14: Invalid queue configuration: scheduler capacity.minimum_allocation: must give positive memory_mb and vcores"},
	} {
		_, err := ParseQueueConfig("cap.hcl", []byte(tc.src))
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("error %v, want one with %q", err, tc.want)
		}
	}
}
