package scheduler

import (
	"fmt"
	"testing"
	"time"
)

// benchState is 5,000 nodes, 100 leaf queues under 10 parents, and 10,000
// pending asks (one app per queue asking for 100 containers).
func benchState(nodes, parents, leavesPer, asksPerQueue int) *fakeState {
	cfg := DefaultQueueConfig()
	cfg.Root.Policy = PolicyDRF
	cfg.Root.Children = nil
	f := &fakeState{cfg: cfg}
	idx := uint64(0)
	for p := 0; p < parents; p++ {
		pq := NewQueueSpec(fmt.Sprintf("p%d", p))
		pq.Policy = PolicyDRF
		pq.Weight = float64(1 + p%3)
		for l := 0; l < leavesPer; l++ {
			lq := NewQueueSpec(fmt.Sprintf("l%d", l))
			lq.Policy = []Policy{PolicyFair, PolicyDRF, PolicyFIFO}[l%3]
			pq.Children = append(pq.Children, lq)
			idx++
			f.apps = append(f.apps, runningApp(fmt.Sprintf("a%d", idx), "root."+pq.Name+"."+lq.Name, idx, asksPerQueue,
				Resources{MemoryMB: int64(512 * (1 + l%4)), Vcores: int64(1 + l%2)}))
		}
		cfg.Root.Children = append(cfg.Root.Children, pq)
	}
	for i := 0; i < nodes; i++ {
		f.nodes = append(f.nodes, &Node{ID: fmt.Sprintf("n%05d", i), Rack: fmt.Sprintf("/r%d", i%50), Status: NodeReady,
			Capacity: Resources{MemoryMB: 64 * 1024, Vcores: 32}})
	}
	return f
}

// BenchmarkSchedule: one pass placing all 10,000 pending asks on 5,000
// nodes under 100 queues. decisions/s is placements per second of pass.
func BenchmarkSchedule(b *testing.B) {
	f := benchState(5000, 10, 10, 100)
	queues := f.cfg.Resolve()
	st := &cachedQueues{f, queues}
	now := time.Unix(0, 0)
	b.ReportAllocs()
	b.ResetTimer()
	placed := 0
	for i := 0; i < b.N; i++ {
		placed += len(Schedule(st, now, nil, 1<<30).Placements)
	}
	b.ReportMetric(float64(placed)/b.Elapsed().Seconds(), "decisions/s")
	if placed != b.N*10000 {
		b.Fatalf("placed %d, want %d", placed, b.N*10000)
	}
}

type cachedQueues struct {
	*fakeState
	queues []*Queue
}

func (c *cachedQueues) Queues() []*Queue { return c.queues }

// BenchmarkAllocateOpportunistic is the distributed scheduler's hot path:
// one container from a list of nodes_used (10) nodes with locality.
func BenchmarkAllocateOpportunistic(b *testing.B) {
	l := list(10)
	for i := range l {
		l[i].QueueSpace = 1 << 30 // room never runs out
	}
	room := NewRoom(l)
	ask := Ask{Count: 1, Resources: Resources{MemoryMB: 4096, Vcores: 4}, Locality: Locality{Nodes: []string{"n7"}, Relax: true}}
	out := make([]int, 0, 1)
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		out, _ = AllocateOpportunistic(ask, l, room, nil, i, out[:0])
		if len(out) != 1 {
			b.Fatal("no room")
		}
	}
}

// BenchmarkLeastLoaded sorts the loads of 5,000 nodes into a list of 10,
// as the leader does every sorting_nodes_interval.
func BenchmarkLeastLoaded(b *testing.B) {
	loads := make([]NodeLoad, 5000)
	for i := range loads {
		loads[i] = load(fmt.Sprintf("n%04d", i), i%11, 10, int64(i%8192), int64(i%8))
	}
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if l := LeastLoaded(loads, 10); len(l) != 10 {
			b.Fatal("short list")
		}
	}
}

// BenchmarkWhyPending explains the pending asks of 100 apps on 5,000 nodes,
// as a leader answering `weft app list` does.
func BenchmarkWhyPending(b *testing.B) {
	f := benchState(5000, 10, 10, 100)
	st := &cachedQueues{f, f.cfg.Resolve()}
	now := time.Unix(0, 0)
	waits := NewLocalityWaits()
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if got := WhyPending(st, now, waits); len(got) != 100 {
			b.Fatalf("%d reasons, want 100", len(got))
		}
	}
}

// BenchmarkScheduleNoDemand: a pass over 10,000 nodes and 100 running
// apps none of which asks for anything, as the leader runs one at every
// state change. It should cost what the apps do, not what the nodes do.
func BenchmarkScheduleNoDemand(b *testing.B) {
	f := benchState(10000, 10, 10, 0)
	st := &cachedQueues{f, f.cfg.Resolve()}
	now := time.Unix(0, 0)
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if d := Schedule(st, now, nil, 1<<30); len(d.Placements) != 0 {
			b.Fatalf("placed %d with no demand", len(d.Placements))
		}
	}
}

// BenchmarkScheduleCapacity is BenchmarkSchedule's cluster under capacity
// queues (10% to each parent, 10% of it to each leaf, factor 10 so one
// user may borrow, seven users): siblings are ordered by used ÷ capacity
// and every placement passes its user's limit. A tenth of the apps ask
// for 48 GiB containers; the cluster holds them all, so the pass reserves
// nothing (reservations/op says so).
func BenchmarkScheduleCapacity(b *testing.B) {
	f := benchState(5000, 10, 10, 100)
	ten, factor := 10.0, 10.0
	f.cfg.Root.Type = QueueCapacity
	for _, p := range f.cfg.Root.Children {
		p.Capacity, p.Weight = &ten, 1
		for _, l := range p.Children {
			l.Capacity, l.UserLimitFactor = &ten, &factor
		}
	}
	if errs := f.cfg.Validate(); len(errs) != 0 {
		b.Fatal(errs)
	}
	for i, a := range f.apps {
		a.Spec.User = fmt.Sprintf("u%d", i%7)
		if i%10 == 0 {
			a.Asks[0].Resources = Resources{MemoryMB: 48 * 1024, Vcores: 24}
		}
	}
	queues := f.cfg.Resolve()
	st := &cachedQueues{f, queues}
	now := time.Unix(0, 0)
	b.ReportAllocs()
	b.ResetTimer()
	placed, reserved := 0, 0
	for i := 0; i < b.N; i++ {
		for _, p := range Schedule(st, now, nil, 1<<30).Placements {
			if p.Reserve {
				reserved++
			} else {
				placed++
			}
		}
	}
	b.ReportMetric(float64(placed)/b.Elapsed().Seconds(), "decisions/s")
	b.ReportMetric(float64(reserved)/float64(b.N), "reservations/op")
}
