package scheduler

import (
	"fmt"
	"math"
	"strings"
	"testing"
	"time"
)

// policyNode is a node of 4 vcores and 8 GB whose local scheduler runs
// with policy, its clock at t0.
func policyNode(policy LocalPolicy) (*LocalScheduler, time.Time) {
	s := NewLocalScheduler(Resources{MemoryMB: 8192, Vcores: 4}, 10)
	s.SetPolicy(policy)
	t0 := time.Unix(1000, 0)
	s.SetTime(t0)
	return s, t0
}

func oppC(id, app string, vcores int64) LocalContainer {
	return LocalContainer{ID: id, AppID: app, Resources: Resources{MemoryMB: 1024 * vcores, Vcores: vcores}, ExecutionType: Opportunistic}
}

// Least waste: a guaranteed arrival evicts the one container whose loss
// throws away the least work, not the newest; with several needed, it
// spares any that turn out not to be.
func TestEvictionLeastWaste(t *testing.T) {
	s, t0 := policyNode(LocalPolicy{})
	s.Submit(oppC("long", "a", 1)) // will have run 100 s × 1/4
	s.SetTime(t0.Add(90 * time.Second))
	s.Submit(oppC("short", "a", 1)) // 10 s × 1/4
	s.SetTime(t0.Add(92 * time.Second))
	s.Submit(oppC("newest", "a", 2)) // 8 s × 2/4
	s.SetTime(t0.Add(100 * time.Second))
	act := s.Submit(LocalContainer{ID: "g", Resources: Resources{MemoryMB: 1024, Vcores: 1}, ExecutionType: Guaranteed})
	if got := formatActions(act); got != "kill short:evicted" {
		t.Fatalf("one vcore needed: %q, want short (2.5 vcore-seconds lost, newest 4, long 25)", got)
	}
	s.Finished("short")
	act = s.Submit(LocalContainer{ID: "g2", Resources: Resources{MemoryMB: 1024, Vcores: 2}, ExecutionType: Guaranteed})
	if got := formatActions(act); got != "kill newest:evicted" {
		t.Fatalf("two vcores needed: %q, want newest alone (it frees both)", got)
	}

	s, _ = policyNode(LocalPolicy{Eviction: EvictNewestFirst})
	s.Submit(oppC("o1", "a", 2))
	s.Submit(oppC("o2", "a", 1))
	act = s.Submit(LocalContainer{ID: "g", Resources: Resources{MemoryMB: 1024, Vcores: 2}, ExecutionType: Guaranteed})
	if got := formatActions(act); got != "kill o2:evicted" {
		t.Fatalf("newest_first: %q, want o2 (the newest; one vcore was free)", got)
	}
}

// Pausing: the victim stops (keeping its memory), the guaranteed container
// starts at once, and the victim resumes when room frees, before queued
// work; a pause past max_pause kills it.
func TestPauseAndResume(t *testing.T) {
	s, t0 := policyNode(LocalPolicy{Pause: true, MaxPause: time.Minute})
	s.Submit(LocalContainer{ID: "o1", AppID: "a", Resources: Resources{MemoryMB: 4096, Vcores: 4}, ExecutionType: Opportunistic})
	s.Submit(oppC("q", "a", 1)) // queued behind o1
	act := s.Submit(LocalContainer{ID: "g", Resources: Resources{MemoryMB: 4096, Vcores: 4}, ExecutionType: Guaranteed})
	if fmt.Sprint(act.Pause, act.Start, act.Kill) != "[o1] [g] []" {
		t.Fatalf("pause %v start %v kill %v: want o1 paused and g started", act.Pause, act.Start, act.Kill)
	}
	if l := s.Load(); l.Paused != 1 || l.RunningOpportunistic != 0 || l.Used.String() != (Resources{MemoryMB: 8192, Vcores: 4}).String() {
		t.Fatalf("load %+v: want one paused, none running opportunistic, its memory held", l)
	}
	act = s.Finished("g")
	if fmt.Sprint(act.Resume, act.Start) != "[o1] []" {
		t.Fatalf("resume %v start %v: want o1 resumed before q starts", act.Resume, act.Start)
	}
	// Paused again, for longer than max_pause: killed.
	s.Submit(LocalContainer{ID: "g2", Resources: Resources{MemoryMB: 4096, Vcores: 4}, ExecutionType: Guaranteed})
	s.SetTime(t0.Add(2 * time.Minute))
	if got := formatActions(s.ExpirePauses()); got != "kill o1:evicted" {
		t.Fatalf("past max_pause: %q, want o1 killed", got)
	}
	// A guaranteed container whose memory does not fit beside a paused one
	// kills it rather than pausing more.
	s, _ = policyNode(LocalPolicy{Pause: true})
	s.Submit(LocalContainer{ID: "o1", Resources: Resources{MemoryMB: 6144, Vcores: 2}, ExecutionType: Opportunistic})
	act = s.Submit(LocalContainer{ID: "g", Resources: Resources{MemoryMB: 4096, Vcores: 4}, ExecutionType: Guaranteed})
	if got := formatActions(act); got != "kill o1:evicted" || len(act.Pause) != 0 {
		t.Fatalf("memory short: %q pause %v, want o1 killed", got, act.Pause)
	}
}

// shortest_first starts the container expected to run shortest (the
// ask's hint, else its app's average here); an aged container goes first
// whatever the policy.
func TestQueuePolicies(t *testing.T) {
	s, t0 := policyNode(LocalPolicy{QueuePolicy: QueueShortestFirst, MaxQueueWait: time.Minute})
	// Teach the node that app "slow" runs 50 s, "fast" 2 s.
	for i, app := range []string{"slow", "fast"} {
		id := fmt.Sprintf("learn%d", i)
		s.SetTime(t0)
		s.Submit(oppC(id, app, 4))
		s.SetTime(t0.Add(map[string]time.Duration{"slow": 50 * time.Second, "fast": 2 * time.Second}[app]))
		s.Finished(id)
	}
	s.SetTime(t0)
	s.Submit(LocalContainer{ID: "g", Resources: Resources{MemoryMB: 1024, Vcores: 4}, ExecutionType: Guaranteed})
	s.Submit(oppC("slow1", "slow", 4))
	s.Submit(oppC("fast1", "fast", 4))
	hinted := oppC("hinted", "slow", 4)
	hinted.Expected = time.Second
	s.Submit(hinted)
	if got := formatActions(s.Finished("g")); got != "start hinted" {
		t.Fatalf("%q, want the hinted one-second container first", got)
	}
	if got := formatActions(s.Finished("hinted")); got != "start fast1" {
		t.Fatalf("%q, want fast1 (its app runs 2 s here) before slow1", got)
	}
	s.SetTime(t0.Add(2 * time.Minute)) // slow1 has waited past max_queue_wait
	s.Submit(oppC("fast2", "fast", 4))
	if got := formatActions(s.Finished("fast1")); got != "start slow1" {
		t.Fatalf("%q, want slow1: it waited longer than max_queue_wait", got)
	}

	s, _ = policyNode(LocalPolicy{QueuePolicy: QueueNearestCompletion})
	s.Submit(LocalContainer{ID: "g", Resources: Resources{MemoryMB: 1024, Vcores: 4}, ExecutionType: Guaranteed})
	far, near := oppC("far", "a", 4), oppC("near", "b", 4)
	far.Progress, near.Progress = 0.1, 0.9
	s.Submit(far)
	s.Submit(near)
	if got := formatActions(s.Finished("g")); got != "start near" {
		t.Fatalf("%q, want the container of the app nearest its end", got)
	}
	if err := (LocalPolicy{QueuePolicy: "lifo"}).Validate(); err == nil || err.Error() != `opportunistic.queue_policy must be "fifo", "shortest_first" or "nearest_completion", not "lifo"` {
		t.Fatalf("bad queue_policy: %v", err)
	}
}

// Overcommit: an opportunistic container starts into capacity an idle
// container holds, while measured use stays under the limit; when use
// rises past it, opportunistic work gives way (paused for vcores, killed
// for memory), never guaranteed work.
func TestOvercommitOnMeasuredUse(t *testing.T) {
	s, _ := policyNode(LocalPolicy{Pause: true, Overcommit: Overcommit{MemoryMB: 0.9, Vcores: 1.0}})
	am := LocalContainer{ID: "am", Resources: Resources{MemoryMB: 1024, Vcores: 1}, ExecutionType: Guaranteed}
	s.Submit(am)
	big := oppC("big", "a", 4) // 4 vcores, 4 GB: allocation leaves only 3 vcores
	if act := s.Submit(big); len(act.Start) != 0 {
		t.Fatalf("started %v before any use was measured", act.Start)
	}
	// The AM is measured idle: its vcore is room.
	act := s.SetUsage(Resources{MemoryMB: 300, Vcores: 0})
	if fmt.Sprint(act.Start) != "[big]" {
		t.Fatalf("after an idle measurement: %+v, want big started into the AM's idle vcore", act)
	}
	if l := s.Load(); l.Used.Vcores != 5 {
		t.Fatalf("allocated %d vcores, want 5 of 4: overcommitted", l.Used.Vcores)
	}
	// The AM gets busy: vcores over the limit, the opportunistic one pauses.
	act = s.SetUsage(Resources{MemoryMB: 4400, Vcores: 5})
	if fmt.Sprint(act.Pause, act.Kill) != "[big] []" {
		t.Fatalf("use over the vcore limit: %+v, want big paused", act)
	}
	// Idle again: it resumes.
	act = s.SetUsage(Resources{MemoryMB: 4400, Vcores: 0})
	if fmt.Sprint(act.Resume) != "[big]" {
		t.Fatalf("use back under: %+v, want big resumed", act)
	}
	// Memory over 90%: killed, not paused (a paused container keeps it).
	act = s.SetUsage(Resources{MemoryMB: 7800, Vcores: 1})
	if got := formatActions(act); got != "kill big:evicted" || len(act.Pause) != 0 {
		t.Fatalf("memory over the limit: %q pause %v, want big killed", got, act.Pause)
	}
	// Without overcommit nothing starts past allocation, whatever the use.
	s, _ = policyNode(LocalPolicy{})
	s.Submit(am)
	s.Submit(oppC("big", "a", 4))
	if act := s.SetUsage(Resources{}); len(act.Start) != 0 {
		t.Fatalf("started %v with overcommit off", act.Start)
	}
	if err := (LocalPolicy{Overcommit: Overcommit{Vcores: 1.5}}).Validate(); err == nil {
		t.Fatalf("an overcommit fraction above 1 was accepted")
	}
}

// Hints come from the network: a node keeps them within bounds, and an ask
// with a bad one is refused naming the field.
func TestLocalHintsAreBounded(t *testing.T) {
	c := LocalHints(LocalContainer{ID: "c"}, -time.Second, float32(math.NaN()))
	if c.Expected != 0 || c.Progress != 0 {
		t.Fatalf("%+v: a negative duration and NaN progress must read as no hint", c)
	}
	c = LocalHints(LocalContainer{ID: "c"}, 100*MaxExpectedDuration, 7)
	if c.Expected != MaxExpectedDuration || c.Progress != 1 {
		t.Fatalf("%+v: want both clamped", c)
	}
	ask := Ask{AskID: 1, Count: 1, Resources: Resources{MemoryMB: 1, Vcores: 1}, ExecutionType: Opportunistic, ExpectedDuration: -time.Second}
	if err := ask.Validate(); err == nil || !strings.Contains(err.Error(), "expected_duration") {
		t.Fatalf("negative expected_duration: %v", err)
	}
}
