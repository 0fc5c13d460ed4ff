package sim

import (
	"reflect"
	"testing"
	"time"

	"github.com/weft-sched/weft/scheduler"
)

func TestSyntheticIsSeededAndWithinItsBounds(t *testing.T) {
	syn := Synthetic{AppsPerSecond: 5, Duration: 20 * time.Second, TasksMin: 2, TasksMax: 9, TaskMin: time.Second, TaskMax: 3 * time.Second,
		Resources: scheduler.Resources{MemoryMB: 512, Vcores: 1}, Queues: map[string]float64{"root.a": 3, "root.b": 1}, Opportunistic: 0.5, Seed: 7}
	a, err := syn.Generate()
	if err != nil {
		t.Fatal(err)
	}
	b, _ := syn.Generate()
	if !reflect.DeepEqual(a, b) {
		t.Fatal("the same seed gave different workloads")
	}
	// About 100 arrivals in 20 s at 5/s: far from 0 and from unbounded.
	if len(a) < 50 || len(a) > 200 {
		t.Fatalf("%d apps in 20 s at 5/s", len(a))
	}
	queues, types := map[string]int{}, map[scheduler.ExecutionType]int{}
	for i, j := range a {
		if j.At >= syn.Duration || i > 0 && j.At < a[i-1].At {
			t.Fatalf("job %d arrives at %s (previous %s)", i, j.At, a[max(i-1, 0)].At)
		}
		if len(j.Tasks) < 2 || len(j.Tasks) > 9 {
			t.Fatalf("job %d has %d tasks", i, len(j.Tasks))
		}
		for _, task := range j.Tasks {
			if task.Duration < time.Second || task.Duration > 3*time.Second || task.ExecutionType != j.Tasks[0].ExecutionType {
				t.Fatalf("job %d task %+v", i, task)
			}
		}
		queues[j.Queue]++
		types[j.Tasks[0].ExecutionType]++
	}
	if queues["root.a"] <= queues["root.b"] || queues["root.b"] == 0 || len(queues) != 2 {
		t.Errorf("queue mix %v: want both, root.a about three times root.b", queues)
	}
	if types[scheduler.Opportunistic] == 0 || types[scheduler.Guaranteed] == 0 {
		t.Errorf("execution types %v: want both", types)
	}
	syn.AppsPerSecond = 0
	if none, err := syn.Generate(); err != nil || len(none) != 0 {
		t.Errorf("0 apps per second gave %d apps, %v", len(none), err)
	}
}

func TestHistQuantiles(t *testing.T) {
	var h Hist
	if h.Quantile(0.99) != 0 {
		t.Fatal("an empty histogram has no quantiles")
	}
	for i := 1; i <= 1000; i++ {
		h.Add(time.Duration(i) * time.Millisecond)
	}
	for _, c := range []struct {
		q    float64
		want time.Duration
	}{{0.5, 500 * time.Millisecond}, {0.99, 990 * time.Millisecond}, {1, time.Second}} {
		got := h.Quantile(c.q)
		if got < c.want || float64(got) > float64(c.want)*1.05 {
			t.Errorf("p%g = %s, want %s within a bucket (4%%) above", 100*c.q, got, c.want)
		}
	}
}
