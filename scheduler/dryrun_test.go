package scheduler

import (
	"fmt"
	"strings"
	"testing"
)

// A worked example of `weft queue apply -dry-run`. One node of 16 GB and
// 16 vcores; queues a and b (weight 1 each, fair policy, preemption on),
// app-1 in a and app-2 in b each running 8 GB / 8 vcores. Now each queue's
// steady and instantaneous share is half the cluster, and neither app is
// over its share. The proposal weighs a 3, b 1 and adds an empty queue c
// of weight 4 (total 8): steady shares become 6, 2 and 8 GB; c has no app,
// so instantaneous shares split between a and b only, 12 and 4 GB. app-2
// uses 8 GB against a fair share of 4 GB: it becomes preemptable. app-1
// is under its 12 GB and is not.
func TestPlanQueueConfigWorkedExample(t *testing.T) {
	used := Resources{MemoryMB: 8192, Vcores: 8}
	now := leaves(PolicyFair, "a", "b")
	now.Scheduler.Preemption.Enabled = true
	f := &fakeState{nodes: []*Node{node("n1", 16384, 16)}, cfg: now, apps: []*App{
		{ID: "app-1", Queue: "root.a", State: AppRunning, CreateIndex: 1, Used: used, Live: 8},
		{ID: "app-2", Queue: "root.b", State: AppRunning, CreateIndex: 2, Used: used, Live: 8},
	}}
	next := leaves(PolicyFair, "a", "b", "c")
	next.Scheduler.Preemption.Enabled = true
	next.Root.Children[0].Weight, next.Root.Children[2].Weight = 3, 4

	plan, err := PlanQueueConfig(f, next)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, q := range plan.Queues {
		got = append(got, fmt.Sprintf("%s added=%v steady %s -> %s inst %s -> %s", q.Path, q.Added,
			q.SteadyNow, q.SteadyAfter, q.InstantaneousNow, q.InstantaneousAfter))
	}
	want := []string{
		"root added=false steady memory_mb=16384,vcores=16 -> memory_mb=16384,vcores=16 inst memory_mb=16384,vcores=16 -> memory_mb=16384,vcores=16",
		"root.a added=false steady memory_mb=8192,vcores=8 -> memory_mb=6144,vcores=6 inst memory_mb=8192,vcores=8 -> memory_mb=12288,vcores=12",
		"root.b added=false steady memory_mb=8192,vcores=8 -> memory_mb=2048,vcores=2 inst memory_mb=8192,vcores=8 -> memory_mb=4096,vcores=4",
		"root.c added=true steady memory_mb=0,vcores=0 -> memory_mb=8192,vcores=8 inst memory_mb=0,vcores=0 -> memory_mb=0,vcores=0",
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Fatalf("queues:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	if len(plan.Preemptable) != 1 || plan.Preemptable[0].AppID != "app-2" ||
		plan.Preemptable[0].FairShareNow.MemoryMB != 8192 || plan.Preemptable[0].FairShareAfter.MemoryMB != 4096 {
		t.Fatalf("preemptable: %+v, want app-2 (fair share 8192 -> 4096 MB)", plan.Preemptable)
	}
	// The state is untouched: the current configuration is still in force.
	if f.cfg != now || len(now.Root.Children) != 2 {
		t.Fatal("the dry run changed the configuration")
	}

	// With preemption off in the proposal nothing is preemptable; a
	// proposal that drops a queue with active apps is refused.
	next.Scheduler.Preemption.Enabled = false
	if plan, _ := PlanQueueConfig(f, next); len(plan.Preemptable) != 0 {
		t.Fatalf("preemption off, yet preemptable: %+v", plan.Preemptable)
	}
	if _, err := PlanQueueConfig(f, leaves(PolicyFair, "a")); err == nil || !strings.Contains(err.Error(), "root.b has active apps (e.g. app-2)") {
		t.Fatalf("dropping root.b: %v", err)
	}
}
