package scheduler

import (
	"math/rand/v2"
	"testing"
	"time"
)

func TestDRFOrdering(t *testing.T) {
	cluster := Resources{MemoryMB: 8000, Vcores: 100}
	gpus := Resources{MemoryMB: 8000, Vcores: 100, Extended: map[string]int64{"gpu": 10, "fpga": 10}}
	res := func(mem, vcores int64) Resources { return Resources{MemoryMB: mem, Vcores: vcores} }
	cases := []struct {
		name    string
		cluster Resources
		a, b    Schedulable
		aFirst  bool
	}{
		{
			// Both below their min share in memory, their dominant resource.
			// Paired in each side's order: memory 2000/3000 = 0.67 against
			// 4000/5000 = 0.8, so a first. (Sorting the min-share ratios
			// themselves, largest first, would compare a's vcores 5/6 = 0.83
			// with b's memory 0.8 and serve b.)
			name:   "both needy: usage/min paired in dominant order",
			a:      Schedulable{Name: "a", Usage: res(2000, 5), Min: res(3000, 6)},
			b:      Schedulable{Name: "b", Usage: res(4000, 3), Min: res(5000, 4)},
			aFirst: true,
		},
		{
			// a is dominated by vcores (0.3), b by memory (0.25): a's vcores
			// pair with b's memory, 0.3 > 0.25, so b first although a's
			// memory share is lower.
			name:   "neither needy: dominant shares paired",
			a:      Schedulable{Name: "a", Usage: res(400, 30)},
			b:      Schedulable{Name: "b", Usage: res(2000, 1)},
			aFirst: false,
		},
		{
			// Equal dominant shares (0.25): the second resources decide,
			// a's memory 0.05 against b's vcores 0.1.
			name:   "neither needy: next-largest share breaks the tie",
			a:      Schedulable{Name: "b", Usage: res(400, 25)},
			b:      Schedulable{Name: "a", Usage: res(2000, 10)},
			aFirst: true,
		},
		{
			name:   "weight divides the cluster share",
			a:      Schedulable{Name: "a", Weight: 3, Usage: res(4000, 1)}, // 0.5 / 3
			b:      Schedulable{Name: "b", Weight: 1, Usage: res(2000, 1)}, // 0.25
			aFirst: true,
		},
		{
			name:   "a needy side first",
			a:      Schedulable{Name: "a", Usage: res(1000, 50), Min: res(0, 60)}, // vcores dominate: 50 < min 60
			b:      Schedulable{Name: "b", Usage: res(100, 1)},
			aFirst: true,
		},
		{
			// b's dominant resource is memory (0.5), whose min share is 0:
			// not needy, whatever its vcores' min share.
			name:   "no min share in the dominant resource: not needy",
			a:      Schedulable{Name: "a", Usage: res(1000, 10)},
			b:      Schedulable{Name: "b", Usage: res(4000, 1), Min: res(0, 50)},
			aFirst: true,
		},
		{
			// Equal shares of memory and vcores (0.25): memory ranks first,
			// so it is the dominant resource, and its min share (3000) is
			// not reached.
			name:   "ties in the order: memory before vcores",
			a:      Schedulable{Name: "a", Usage: res(2000, 25), Min: res(3000, 10)},
			b:      Schedulable{Name: "b", Usage: res(100, 1)},
			aFirst: true,
		},
		{
			// a's fpga and gpu shares tie (0.5): fpga ranks first by name,
			// so it is a's dominant resource, and its min share (6) is not
			// reached. Ranked the other way, gpu (no min share) would make
			// a not needy, and b's smaller share would come first.
			name:    "ties in the order: extended resources by name",
			cluster: gpus,
			a:       Schedulable{Name: "a", Usage: Resources{Extended: map[string]int64{"gpu": 5, "fpga": 5}}, Min: Resources{Extended: map[string]int64{"fpga": 6}}},
			b:       Schedulable{Name: "b", Usage: Resources{Extended: map[string]int64{"gpu": 1}}},
			aFirst:  true,
		},
		{
			name:   "equal: earlier start",
			a:      Schedulable{Name: "z", Usage: res(1000, 1), Start: 1},
			b:      Schedulable{Name: "a", Usage: res(1000, 1), Start: 2},
			aFirst: true,
		},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			cl := cluster
			if !c.cluster.IsZero() {
				cl = c.cluster
			}
			if c.a.Weight == 0 {
				c.a.Weight = 1
			}
			if c.b.Weight == 0 {
				c.b.Weight = 1
			}
			if got := Less(PolicyDRF, &c.a, &c.b, cl); got != c.aFirst {
				t.Errorf("Less(a, b) = %v, want %v", got, c.aFirst)
			}
			if got := Less(PolicyDRF, &c.b, &c.a, cl); got == c.aFirst {
				t.Errorf("Less(b, a) = %v, want %v", got, !c.aFirst)
			}
		})
	}
}

// The regression of the needy case through a whole pass: queue a is served
// first, so the first placement is a's.
func TestDRFServesTheNeedierQueueFirst(t *testing.T) {
	cfg := leaves(PolicyDRF, "a", "b")
	cfg.Root.Children[0].MinResources = Resources{MemoryMB: 3000, Vcores: 6}
	cfg.Root.Children[1].MinResources = Resources{MemoryMB: 5000, Vcores: 4}
	f := &fakeState{nodes: []*Node{node("n1", 8000, 100)}, cfg: cfg}
	a := runningApp("A", "root.a", 1, 1, Resources{MemoryMB: 100, Vcores: 1})
	b := runningApp("B", "root.b", 2, 1, Resources{MemoryMB: 100, Vcores: 1})
	a.Used, b.Used = Resources{MemoryMB: 2000, Vcores: 5}, Resources{MemoryMB: 4000, Vcores: 3}
	f.nodes[0].AllocatedGuaranteed = a.Used.Add(b.Used)
	f.apps = []*App{a, b}
	ps := Schedule(f, time.Unix(0, 0), nil, 1).Placements
	if len(ps) != 1 || ps[0].AppID != "A" {
		t.Fatalf("first placement %v, want A's", ps)
	}
}

func TestLessDoesNotAllocate(t *testing.T) {
	cluster := Resources{MemoryMB: 8000, Vcores: 100, Extended: map[string]int64{"gpu": 8, "fpga": 4}}
	a := &Schedulable{Name: "a", Weight: 1, Usage: Resources{MemoryMB: 2000, Vcores: 5, Extended: map[string]int64{"gpu": 1}},
		Min: Resources{MemoryMB: 3000, Vcores: 6}}
	b := &Schedulable{Name: "b", Weight: 2, Usage: Resources{MemoryMB: 4000, Vcores: 3, Extended: map[string]int64{"fpga": 1}},
		Min: Resources{MemoryMB: 5000, Vcores: 4}}
	for _, p := range []Policy{PolicyFIFO, PolicyFair, PolicyDRF} {
		if n := testing.AllocsPerRun(100, func() { Less(p, a, b, cluster) }); n != 0 {
			t.Errorf("%s: %v allocations per Less", p, n)
		}
	}
}

// The memory-and-vcores hot path orders exactly as the general comparator.
func TestDRFHotPathMatchesTheGeneralComparator(t *testing.T) {
	rng := rand.New(rand.NewPCG(4, 2))
	cluster := Resources{MemoryMB: 8192, Vcores: 64}
	random := func() *Schedulable {
		s := &Schedulable{Weight: float64(1 + rng.IntN(3)), Usage: Resources{MemoryMB: rng.Int64N(9) * 1024, Vcores: rng.Int64N(9) * 8}}
		if rng.IntN(2) == 0 {
			s.Min = Resources{MemoryMB: rng.Int64N(9) * 1024, Vcores: rng.Int64N(9) * 8}
		}
		return s
	}
	for i := 0; i < 20000; i++ {
		a, b := random(), random()
		if fast, general := compareDRF2(a, b, cluster), compareDRFN(a, b, cluster); fast != general {
			t.Fatalf("a=%+v b=%+v: hot path %d, general %d", a, b, fast, general)
		}
	}
}
