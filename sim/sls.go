package sim

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"sort"
	"strings"
	"time"

	"github.com/weft-sched/weft/scheduler"
)

// ParseSLS reads a YARN Scheduler Load Simulator JSON trace: a stream of
// job objects (or one array of them) with job.id, job.queue.name,
// job.start.ms, job.end.ms and job.tasks[], each task with
// container.host, container.start.ms, container.end.ms,
// container.priority and container.type ("map", "reduce" or any other
// name runs guaranteed; "GUARANTEED" or "OPPORTUNISTIC" choose), and
// optionally container.memory and container.vcores (else def). Jobs are
// returned in start order, times relative to the earliest start. A bad
// field is a one-line error that names the job and the field.
func ParseSLS(r io.Reader, def scheduler.Resources) ([]Job, error) {
	dec := json.NewDecoder(r)
	dec.UseNumber()
	var raws []map[string]any
	for {
		var v any
		if err := dec.Decode(&v); err != nil {
			if errors.Is(err, io.EOF) {
				break
			}
			return nil, fmt.Errorf("trace: job %d: not JSON: %v", len(raws)+1, err)
		}
		switch v := v.(type) {
		case map[string]any:
			raws = append(raws, v)
		case []any:
			for _, e := range v {
				m, ok := e.(map[string]any)
				if !ok {
					return nil, fmt.Errorf("trace: job %d: not a JSON object", len(raws)+1)
				}
				raws = append(raws, m)
			}
		default:
			return nil, fmt.Errorf("trace: job %d: not a JSON object", len(raws)+1)
		}
	}
	if len(raws) == 0 {
		return nil, fmt.Errorf("trace: no jobs")
	}
	type parsed struct {
		job   Job
		start int64
	}
	var out []parsed
	seen := map[string]bool{}
	for i, m := range raws {
		f := fields{where: fmt.Sprintf("trace: job %d", i+1), m: m}
		id := f.str("job.id", true)
		if id != "" {
			f.where = fmt.Sprintf("trace: job %d (%s)", i+1, id)
		}
		queue := f.str("job.queue.name", false)
		start := f.ms("job.start.ms")
		end := f.ms("job.end.ms")
		if f.err == nil && end < start {
			f.fail("job.end.ms", "%d is before job.start.ms %d", end, start)
		}
		tasksV, ok := m["job.tasks"]
		tasks, isList := tasksV.([]any)
		if f.err == nil && (!ok || !isList || len(tasks) == 0) {
			f.fail("job.tasks", "want a non-empty list of tasks")
		}
		if f.err != nil {
			return nil, f.err
		}
		if seen[id] {
			return nil, fmt.Errorf("%s: job.id: %q appears twice", f.where, id)
		}
		seen[id] = true
		if queue == "" {
			queue = scheduler.DefaultQueue
		} else if !strings.HasPrefix(queue, "root") {
			queue = "root." + queue
		}
		j := Job{ID: id, Queue: queue, Tasks: make([]Task, len(tasks))}
		for k, tv := range tasks {
			tm, ok := tv.(map[string]any)
			tf := fields{where: f.where, prefix: fmt.Sprintf("job.tasks[%d].", k), m: tm}
			if !ok {
				tf.fail("", "not a JSON object")
				return nil, tf.err
			}
			t := Task{Host: tf.str("container.host", false), Resources: def, ExecutionType: scheduler.Guaranteed}
			cs, ce := tf.ms("container.start.ms"), tf.ms("container.end.ms")
			if tf.err == nil && ce <= cs {
				tf.fail("container.end.ms", "%d is not after container.start.ms %d", ce, cs)
			}
			t.Duration = time.Duration(ce-cs) * time.Millisecond
			if _, has := tm["container.priority"]; has {
				t.Priority = int32(tf.int("container.priority", math.MinInt32, math.MaxInt32))
			}
			switch typ := tf.str("container.type", false); strings.ToUpper(typ) {
			case string(scheduler.Opportunistic):
				t.ExecutionType = scheduler.Opportunistic
			}
			if _, has := tm["container.memory"]; has {
				t.Resources.MemoryMB = tf.int("container.memory", 1, math.MaxInt32)
			}
			if _, has := tm["container.vcores"]; has {
				t.Resources.Vcores = tf.int("container.vcores", 1, 1<<16)
			}
			if tf.err != nil {
				return nil, tf.err
			}
			j.Tasks[k] = t
		}
		out = append(out, parsed{j, start})
	}
	sort.SliceStable(out, func(a, b int) bool { return out[a].start < out[b].start })
	jobs := make([]Job, len(out))
	for i, p := range out {
		p.job.At = time.Duration(p.start-out[0].start) * time.Millisecond
		jobs[i] = p.job
	}
	return jobs, nil
}

// fields reads one JSON object's fields, keeping the first error.
type fields struct {
	where  string
	prefix string
	m      map[string]any
	err    error
}

func (f *fields) fail(name, format string, a ...any) {
	if f.err == nil {
		f.err = fmt.Errorf("%s: %s%s: %s", f.where, f.prefix, name, fmt.Sprintf(format, a...))
	}
}

func (f *fields) str(name string, required bool) string {
	v, ok := f.m[name]
	if !ok {
		if required {
			f.fail(name, "missing")
		}
		return ""
	}
	s, ok := v.(string)
	if !ok {
		if n, isNum := v.(json.Number); isNum {
			return n.String() // SLS traces write some IDs as numbers
		}
		f.fail(name, "want a string, got %v", v)
		return ""
	}
	if required && s == "" {
		f.fail(name, "empty")
	}
	return s
}

func (f *fields) int(name string, lo, hi int64) int64 {
	v, ok := f.m[name]
	if !ok {
		f.fail(name, "missing")
		return 0
	}
	var n json.Number
	switch v := v.(type) {
	case json.Number:
		n = v
	case string: // some traces quote their numbers
		n = json.Number(v)
	default:
		f.fail(name, "want a number, got %v", v)
		return 0
	}
	x, err := n.Int64()
	if err != nil {
		f.fail(name, "want an integer, got %s", n)
		return 0
	}
	if x < lo || x > hi {
		f.fail(name, "%d is out of range [%d, %d]", x, lo, hi)
		return 0
	}
	return x
}

func (f *fields) ms(name string) int64 { return f.int(name, 0, math.MaxInt64/int64(time.Millisecond)) }
