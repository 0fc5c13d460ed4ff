package config

import (
	"strings"
	"testing"

	"github.com/weft-sched/weft/scheduler"
)

// A capacity-scheduler.xml as YARN ships it, with a two-level tree.
const capacitySchedulerXML = `<?xml version="1.0"?>
<configuration>
  <property><name>yarn.scheduler.capacity.maximum-applications</name><value>10000</value></property>
  <property><name>yarn.scheduler.capacity.maximum-am-resource-percent</name><value>0.1</value></property>
  <property><name>yarn.scheduler.capacity.resource-calculator</name>
    <value>org.apache.hadoop.yarn.util.resource.DefaultResourceCalculator</value></property>
  <property><name>yarn.scheduler.capacity.node-locality-delay</name><value>40</value></property>
  <property><name>yarn.scheduler.capacity.root.queues</name><value>prod, dev</value></property>
  <property><name>yarn.scheduler.capacity.root.prod.capacity</name><value>70</value></property>
  <property><name>yarn.scheduler.capacity.root.prod.maximum-capacity</name><value>-1</value></property>
  <property><name>yarn.scheduler.capacity.root.prod.user-limit-factor</name><value>2</value></property>
  <property><name>yarn.scheduler.capacity.root.prod.minimum-user-limit-percent</name><value>25</value></property>
  <property><name>yarn.scheduler.capacity.root.prod.acl_submit_applications</name><value>alice</value></property>
  <property><name>yarn.scheduler.capacity.root.dev.capacity</name><value>30</value></property>
  <property><name>yarn.scheduler.capacity.root.dev.maximum-capacity</name><value>50</value></property>
  <property><name>yarn.scheduler.capacity.root.dev.queues</name><value>x,y</value></property>
  <property><name>yarn.scheduler.capacity.root.dev.x.capacity</name><value>40</value></property>
  <property><name>yarn.scheduler.capacity.root.dev.x.user-limit-factor</name><value>-1</value></property>
  <property><name>yarn.scheduler.capacity.root.dev.y.capacity</name><value>60</value></property>
  <property><name>yarn.scheduler.capacity.root.dev.y.maximum-am-resource-percent</name><value>0.5</value></property>
  <property><name>yarn.scheduler.capacity.root.dev.y.state</name><value>STOPPED</value></property>
  <property><name>yarn.scheduler.capacity.queue-mappings</name><value>u:bob:dev.x</value></property>
</configuration>
`

func TestImportCapacityScheduler(t *testing.T) {
	im, err := ImportCapacityScheduler("capacity-scheduler.xml", []byte(capacitySchedulerXML))
	if err != nil {
		t.Fatalf("%v\n%s", err, im.HCL)
	}
	cfg, err := ParseQueueConfig("imported.hcl", []byte(im.HCL))
	if err != nil {
		t.Fatal(err)
	}
	qs := map[string]*scheduler.Queue{}
	for _, q := range cfg.Resolve() {
		qs[q.Path] = q
	}
	prod, x, y := qs["root.prod"].Capacity, qs["root.dev.x"].Capacity, qs["root.dev.y"].Capacity
	if qs["root"].Type != scheduler.QueueCapacity || prod.Capacity != 70 || prod.MaxCapacity != 100 || prod.UserLimitFactor != 2 ||
		prod.MinimumUserLimitPercent != 25 || prod.MaximumAMResourcePercent != 0.1 ||
		x.Abs < 0.119 || x.Abs > 0.121 || x.AbsMax != 0.5 || x.UserLimitFactor != scheduler.UserLimitOff || y.MaximumAMResourcePercent != 0.5 {
		t.Fatalf("imported prod %+v, x %+v, y %+v\n%s", prod, x, y, im.HCL)
	}
	if d := cfg.Scheduler.Locality.NodeDelay; d.Opportunities != 40 {
		t.Fatalf("node_delay %v, want 40 opportunities", d)
	}
	skipped := strings.Join(im.Skipped, "\n")
	for _, want := range []string{
		"yarn.scheduler.capacity.maximum-applications", "yarn.scheduler.capacity.queue-mappings",
		"root.prod.acl_submit_applications = \"alice\": weft grants queues to ACL tokens",
		"root.dev.y.state = \"STOPPED\"", "resource-calculator",
	} {
		if !strings.Contains(skipped, want) {
			t.Errorf("not carried over %q, want it to name %s", skipped, want)
		}
	}
	if len(im.Skipped) != 5 {
		t.Errorf("%d properties left out, want 5:\n%s", len(im.Skipped), skipped)
	}
}

func TestImportCapacitySchedulerRefusesWhatItCannotCarry(t *testing.T) {
	for _, tc := range []struct{ xml, want string }{
		{`<configuration><property><name>yarn.scheduler.capacity.root.queues</name><value>a,b</value></property>
<property><name>yarn.scheduler.capacity.root.a.capacity</name><value>60</value></property>
<property><name>yarn.scheduler.capacity.root.b.capacity</name><value>30</value></property></configuration>`,
			"queue root: the capacities of its children sum to 90, not 100"},
		{`<configuration><property><name>yarn.scheduler.capacity.root.queues</name><value>a</value></property></configuration>`,
			"queue root.a: no yarn.scheduler.capacity.root.a.capacity"},
		{`<configuration><property><name>yarn.scheduler.capacity.root.queues</name><value>a</value></property>
<property><name>yarn.scheduler.capacity.root.a.capacity</name><value>[memory=1024,vcores=1]</value></property></configuration>`,
			"absolute resources"},
		{`<configuration><property><name>yarn.scheduler.capacity.root.queues</name><value>a</value></property>
<property><name>yarn.scheduler.capacity.root.a.capacity</name><value>lots</value></property></configuration>`,
			`yarn.scheduler.capacity.root.a.capacity: "lots" is not a number`},
		{`<configuration><property><name>fs.defaultFS</name><value>hdfs://x</value></property></configuration>`, "not a capacity-scheduler.xml"},
		{`{"not": "xml"}`, "not a Hadoop configuration file"},
	} {
		_, err := ImportCapacityScheduler("cs.xml", []byte(tc.xml))
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("error %v, want one with %q", err, tc.want)
		}
	}
}
