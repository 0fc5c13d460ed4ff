package scheduler

import (
	"testing"
)

// The seed 002 example: 12 vcores and 24 GB, three equal-weight queues.
func TestFairShareWorkedExample(t *testing.T) {
	cfg := DefaultQueueConfig()
	cfg.Root.Children = []*QueueSpec{NewQueueSpec("tenant1"), NewQueueSpec("tenant2"), NewQueueSpec("tenant3")}
	cluster := Resources{MemoryMB: 24 * 1024, Vcores: 12}
	shares := ComputeQueueShares(cfg.Resolve(), cluster, map[string]bool{"root.tenant1": true, "root.tenant2": true})
	for _, q := range []string{"root.tenant1", "root.tenant2", "root.tenant3"} {
		if got := shares.Steady[q]; got.Vcores != 4 || got.MemoryMB != 8*1024 {
			t.Errorf("steady share of %s = %v, want 4 vcores / 8 GB", q, got)
		}
	}
	for q, want := range map[string]Resources{
		"root.tenant1": {MemoryMB: 12 * 1024, Vcores: 6},
		"root.tenant2": {MemoryMB: 12 * 1024, Vcores: 6},
		"root.tenant3": {},
	} {
		if got := shares.Instantaneous[q]; got.String() != want.String() {
			t.Errorf("instantaneous share of %s = %v, want %v", q, got, want)
		}
	}
}

func TestComputeSharesHonoursWeightsMinAndMax(t *testing.T) {
	total := Resources{MemoryMB: 100, Vcores: 100}
	max20 := Resources{MemoryMB: 20, Vcores: 100}
	cases := []struct {
		name  string
		parts []Shareable
		want  []int64 // memory shares
	}{
		{"weights 3:1", []Shareable{{Weight: 3}, {Weight: 1}}, []int64{75, 25}},
		{"a min above the weighted share", []Shareable{{Weight: 1, Min: Resources{MemoryMB: 60}}, {Weight: 1}, {Weight: 1}}, []int64{60, 20, 20}},
		{"a max below the weighted share", []Shareable{{Weight: 1, Max: &max20}, {Weight: 1}}, []int64{20, 80}},
		{"maxima below the total", []Shareable{{Weight: 1, Max: &max20}, {Weight: 1, Max: &max20}}, []int64{20, 20}},
		{"minima above the total", []Shareable{{Weight: 1, Min: Resources{MemoryMB: 70}}, {Weight: 1, Min: Resources{MemoryMB: 70}}}, []int64{70, 70}},
	}
	for _, c := range cases {
		got := ComputeShares(c.parts, total)
		for i := range c.want {
			if got[i].MemoryMB != c.want[i] {
				t.Errorf("%s: shares %v, want memory %v", c.name, got, c.want)
				break
			}
		}
	}
}

func TestFairSharesRecurse(t *testing.T) {
	cfg := DefaultQueueConfig()
	prod := NewQueueSpec("prod")
	prod.Weight = 3
	prod.Children = []*QueueSpec{NewQueueSpec("a"), NewQueueSpec("b")}
	cfg.Root.Children = []*QueueSpec{prod, NewQueueSpec("dev")}
	cluster := Resources{MemoryMB: 4000, Vcores: 40}
	s := ComputeQueueShares(cfg.Resolve(), cluster, map[string]bool{"root.prod.a": true})
	if s.Steady["root.prod"].MemoryMB != 3000 || s.Steady["root.prod.a"].MemoryMB != 1500 || s.Steady["root.dev"].MemoryMB != 1000 {
		t.Fatalf("steady %v", s.Steady)
	}
	// Only root.prod.a is active: it gets everything.
	if s.Instantaneous["root.prod.a"].MemoryMB != 4000 || s.Instantaneous["root.prod.b"].MemoryMB != 0 || s.Instantaneous["root.dev"].MemoryMB != 0 {
		t.Fatalf("instantaneous %v", s.Instantaneous)
	}
}
