package config

import (
	"bytes"
	"encoding/xml"
	"fmt"
	"sort"
	"strconv"
	"strings"

	"github.com/hashicorp/hcl/v2/hclwrite"
	"github.com/weft-sched/weft/scheduler"
)

// Importing a YARN capacity-scheduler.xml (`weft queue import`): the queue
// tree and the properties weft has an equivalent for become a queue file;
// every other property is named, with why it was left out.

// MaxCapacitySchedulerXML bounds the file an import reads.
const MaxCapacitySchedulerXML = 8 << 20

const csPrefix = "yarn.scheduler.capacity."

// CapacityImport is an imported capacity-scheduler.xml: the queue file
// (HCL, which ParseQueueConfig accepts) and the properties left out.
type CapacityImport struct {
	HCL     string   `json:"hcl"`
	Skipped []string `json:"not_carried_over"`
}

// ImportCapacityScheduler converts a Hadoop configuration file holding
// yarn.scheduler.capacity.* properties, named name in errors.
func ImportCapacityScheduler(name string, src []byte) (*CapacityImport, error) {
	if len(src) > MaxCapacitySchedulerXML {
		return nil, fmt.Errorf("%s: larger than %d MiB", name, MaxCapacitySchedulerXML>>20)
	}
	props, err := hadoopProperties(src)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	if _, ok := props[csPrefix+"root.queues"]; !ok {
		return nil, fmt.Errorf("%s: no %sroot.queues: not a capacity-scheduler.xml", name, csPrefix)
	}
	im := &capImporter{props: props, used: map[string]bool{}}
	var b strings.Builder
	im.scheduler(&b)
	if err := im.queue(&b, "root", 0); err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	for _, k := range sortedKeys(props) {
		if !im.used[k] {
			im.skip(k, "weft has no equivalent, or it names a queue that is not in the tree")
		}
	}
	out := &CapacityImport{HCL: string(hclwrite.Format([]byte(b.String()))), Skipped: im.skipped}
	// What was written must be a valid queue file: a tree whose
	// capacities do not sum to 100 is named here, line by line.
	if _, err := ParseQueueConfig(name+" (imported)", []byte(out.HCL)); err != nil {
		return out, err
	}
	return out, nil
}

type capImporter struct {
	props   map[string]string
	used    map[string]bool
	skipped []string
}

func (im *capImporter) get(key string) (string, bool) {
	v, ok := im.props[key]
	if ok {
		im.used[key] = true
	}
	return strings.TrimSpace(v), ok
}

func (im *capImporter) skip(key, why string) {
	im.used[key] = true
	im.skipped = append(im.skipped, fmt.Sprintf("%s = %q: %s", key, im.props[key], why))
}

// scheduler writes the scheduler block from the global properties.
func (im *capImporter) scheduler(b *strings.Builder) {
	var lines []string
	if v, ok := im.get(csPrefix + "node-locality-delay"); ok {
		if n, err := strconv.Atoi(v); err == nil && n >= 0 {
			lines = append(lines, fmt.Sprintf("  locality {\n    node_delay = %d\n  }", n))
		} else if err != nil || n < 0 {
			im.skip(csPrefix+"node-locality-delay", "not a non-negative count")
		}
	}
	var alloc []string
	for _, p := range []struct{ key, field string }{
		{"yarn.scheduler.minimum-allocation-mb", "memory_mb"}, {"yarn.scheduler.minimum-allocation-vcores", "vcores"},
	} {
		if v, ok := im.get(p.key); ok {
			if n, err := strconv.ParseInt(v, 10, 64); err == nil && n > 0 {
				alloc = append(alloc, fmt.Sprintf("%s = %d", p.field, n))
			} else {
				im.skip(p.key, "not a positive number")
			}
		}
	}
	if len(alloc) == 1 {
		im.skipped = append(im.skipped, "yarn.scheduler.minimum-allocation-*: only one of -mb and -vcores given; weft's default stands for both")
	} else if len(alloc) == 2 {
		lines = append(lines, fmt.Sprintf("  capacity {\n    minimum_allocation = { %s }\n  }", strings.Join(alloc, ", ")))
	}
	if v, ok := im.get(csPrefix + "resource-calculator"); ok && !strings.HasSuffix(v, "DominantResourceCalculator") {
		im.skip(csPrefix+"resource-calculator", "weft compares every resource, as the DominantResourceCalculator does")
	}
	if len(lines) > 0 {
		fmt.Fprintf(b, "scheduler {\n%s\n}\n\n", strings.Join(lines, "\n"))
	}
}

// queue writes queue path (YARN's name: root.a.b) and its children.
func (im *capImporter) queue(b *strings.Builder, path string, depth int) error {
	if depth > scheduler.MaxQueueDepth {
		return fmt.Errorf("queue %s: deeper than %d levels", path, scheduler.MaxQueueDepth)
	}
	key := func(prop string) string { return csPrefix + path + "." + prop }
	indent := strings.Repeat("  ", depth)
	name := path[strings.LastIndex(path, ".")+1:]
	fmt.Fprintf(b, "%squeue %q {\n", indent, name)
	in := indent + "  "
	if depth == 0 {
		fmt.Fprintf(b, "%stype = \"capacity\"\n", in)
		im.get(key("capacity")) // root's is 100 by definition
		im.get(key("maximum-capacity"))
		if v, ok := im.get(csPrefix + "maximum-am-resource-percent"); ok {
			if err := im.number(b, in, "maximum_am_resource_percent", csPrefix+"maximum-am-resource-percent", v); err != nil {
				return err
			}
		}
	} else {
		for _, p := range []struct{ prop, field string }{
			{"capacity", "capacity"}, {"maximum-capacity", "max_capacity"}, {"user-limit-factor", "user_limit_factor"},
			{"minimum-user-limit-percent", "minimum_user_limit_percent"}, {"maximum-am-resource-percent", "maximum_am_resource_percent"},
		} {
			v, ok := im.get(key(p.prop))
			if !ok {
				if p.prop == "capacity" {
					return fmt.Errorf("queue %s: no %s", path, key("capacity"))
				}
				continue
			}
			if p.prop == "capacity" && strings.HasPrefix(v, "[") {
				return fmt.Errorf("queue %s: capacity %s is absolute resources; weft's capacities are percentages", path, v)
			}
			if err := im.number(b, in, p.field, key(p.prop), v); err != nil {
				return err
			}
		}
	}
	if v, ok := im.get(key("state")); ok && !strings.EqualFold(v, "RUNNING") {
		im.skip(key("state"), "weft queues are always open; remove the queue instead")
	}
	for _, prop := range []string{"acl_submit_applications", "acl_administer_queue"} {
		if _, ok := im.props[key(prop)]; ok {
			im.skip(key(prop), "weft grants queues to ACL tokens (acl policy \"queue\" rules: docs/security.md)")
		}
	}
	for _, prop := range []string{"maximum-applications", "maximum-allocation-mb", "maximum-allocation-vcores", "ordering-policy", "disable_preemption", "priority"} {
		if _, ok := im.props[key(prop)]; ok {
			why := "weft has no equivalent"
			switch prop {
			case "ordering-policy":
				why = "a capacity leaf is FIFO by priority, then submission"
			case "disable_preemption":
				why = "capacity queues never preempt"
			}
			im.skip(key(prop), why)
		}
	}
	children, _ := im.get(key("queues"))
	var names []string
	for _, c := range strings.Split(children, ",") {
		if c = strings.TrimSpace(c); c != "" {
			names = append(names, c)
		}
	}
	for _, c := range names {
		if err := scheduler.ValidateQueueName(c); err != nil {
			return fmt.Errorf("queue %s: child %q: %v", path, c, err)
		}
		if err := im.queue(b, path+"."+c, depth+1); err != nil {
			return err
		}
	}
	fmt.Fprintf(b, "%s}\n", indent)
	return nil
}

// number writes field = v, v being a number (key names it in errors).
func (im *capImporter) number(b *strings.Builder, indent, field, key, v string) error {
	f, err := strconv.ParseFloat(v, 64)
	if err != nil {
		return fmt.Errorf("%s: %q is not a number", key, v)
	}
	fmt.Fprintf(b, "%s%s = %s\n", indent, field, strconv.FormatFloat(f, 'f', -1, 64))
	return nil
}

// hadoopProperties reads <configuration><property><name/><value/>…, the
// last value of a name winning, as Hadoop's Configuration does.
func hadoopProperties(src []byte) (map[string]string, error) {
	var doc struct {
		XMLName  xml.Name `xml:"configuration"`
		Property []struct {
			Name  string `xml:"name"`
			Value string `xml:"value"`
		} `xml:"property"`
	}
	d := xml.NewDecoder(bytes.NewReader(src))
	if err := d.Decode(&doc); err != nil {
		return nil, fmt.Errorf("not a Hadoop configuration file: %v", err)
	}
	out := make(map[string]string, len(doc.Property))
	for _, p := range doc.Property {
		if n := strings.TrimSpace(p.Name); strings.HasPrefix(n, csPrefix) || strings.HasPrefix(n, "yarn.scheduler.minimum-allocation-") {
			out[n] = p.Value
		}
	}
	return out, nil
}

func sortedKeys(m map[string]string) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}
