package scheduler

import (
	"fmt"
	"reflect"
	"strings"
	"testing"
)

// step is one call on a LocalScheduler and the actions it must return,
// written compactly: "start a b", "kill c:evicted", "drop d:rejected".
type step struct {
	op   string // "G id mem" | "O id mem" | "fin id" | "stop id" | "shed n" | "promote id" | "demote id"
	want string // actions, "; "-separated, empty for none
}

func runSteps(t *testing.T, capMem int64, queueLimit int, steps []step) *LocalScheduler {
	t.Helper()
	s := NewLocalScheduler(Resources{MemoryMB: capMem, Vcores: 100}, queueLimit)
	for i, st := range steps {
		f := strings.Fields(st.op)
		var act Actions
		switch f[0] {
		case "G", "O":
			var mem int64
			fmt.Sscan(f[2], &mem)
			et := Guaranteed
			if f[0] == "O" {
				et = Opportunistic
			}
			act = s.Submit(LocalContainer{ID: f[1], Resources: Resources{MemoryMB: mem, Vcores: 1}, ExecutionType: et})
		case "fin":
			act = s.Finished(f[1])
		case "stop":
			act = s.Stop(f[1], ReasonKilled)
		case "shed":
			var n int
			fmt.Sscan(f[1], &n)
			act = s.Shed(n)
		case "promote":
			if !s.Promote(f[1]) {
				act.Drop = append(act.Drop, Stop{f[1], "not-promoted"})
			}
		case "demote":
			if !s.Demote(f[1]) {
				act.Drop = append(act.Drop, Stop{f[1], "not-demoted"})
			}
		}
		if got := formatActions(act); got != st.want {
			t.Fatalf("step %d (%s): actions %q, want %q", i, st.op, got, st.want)
		}
	}
	return s
}

func formatActions(a Actions) string {
	var parts []string
	if len(a.Start) > 0 {
		parts = append(parts, "start "+strings.Join(a.Start, " "))
	}
	for _, list := range []struct {
		name  string
		stops []Stop
	}{{"kill", a.Kill}, {"drop", a.Drop}} {
		if len(list.stops) == 0 {
			continue
		}
		var s []string
		for _, x := range list.stops {
			s = append(s, x.ID+":"+string(x.Reason))
		}
		parts = append(parts, list.name+" "+strings.Join(s, " "))
	}
	return strings.Join(parts, "; ")
}

func TestLocalSchedulerTransitions(t *testing.T) {
	cases := []struct {
		name       string
		capMem     int64
		queueLimit int
		steps      []step
		wantLoad   LocalLoad
	}{
		{"containers that fit start at once", 1000, 10, []step{
			{"G g1 400", "start g1"},
			{"O o1 400", "start o1"},
		}, LocalLoad{RunningGuaranteed: 1, RunningOpportunistic: 1}},

		{"opportunistic waits in FIFO order and drains as containers end", 1000, 10, []step{
			{"G g1 800", "start g1"},
			{"O o1 300", ""},
			{"O o2 100", ""}, // fits, but must not jump o1
			{"fin g1", "start o1 o2"},
		}, LocalLoad{RunningOpportunistic: 2}},

		{"a full queue rejects", 1000, 2, []step{
			{"G g1 1000", "start g1"},
			{"O o1 100", ""},
			{"O o2 100", ""},
			{"O o3 100", "drop o3:rejected"},
		}, LocalLoad{RunningGuaranteed: 1, Queued: 2}},

		{"queue length 0 never queues", 1000, 0, []step{
			{"G g1 1000", "start g1"},
			{"O o1 100", "drop o1:rejected"},
		}, LocalLoad{RunningGuaranteed: 1}},

		{"guaranteed arrival evicts the most recently started opportunistic first", 1000, 10, []step{
			{"O o1 300", "start o1"},
			{"O o2 300", "start o2"},
			{"O o3 300", "start o3"},
			{"G g1 400", "kill o3:evicted"}, // 100 free + o3's 300 is enough
			{"fin o3", "start g1"},
			{"G g2 500", "kill o2:evicted o1:evicted"},
			{"fin o1", ""},
			{"fin o2", "start g2"},
		}, LocalLoad{RunningGuaranteed: 2}},

		{"guaranteed starts only once its victims have exited", 1000, 10, []step{
			{"O o1 500", "start o1"},
			{"O o2 500", "start o2"},
			{"G g1 600", "kill o2:evicted o1:evicted"},
			{"fin o2", ""},
			{"fin o1", "start g1"},
		}, LocalLoad{RunningGuaranteed: 1}},

		{"guaranteed containers are never evicted", 1000, 10, []step{
			{"G g1 900", "start g1"},
			{"G g2 500", ""}, // waits for g1: nothing to evict
			{"O o1 50", ""},  // must not jump the waiting guaranteed container
			{"fin g1", "start g2 o1"},
		}, LocalLoad{RunningGuaranteed: 1, RunningOpportunistic: 1}},

		{"a promoted container is not evicted", 1000, 10, []step{
			{"O o1 500", "start o1"},
			{"O o2 500", "start o2"},
			{"promote o2", ""},
			{"G g1 500", "kill o1:evicted"},
			{"fin o1", "start g1"},
		}, LocalLoad{RunningGuaranteed: 2}},

		{"a demoted container is evictable again", 1000, 10, []step{
			{"O o1 500", "start o1"},
			{"O o2 500", "start o2"},
			{"promote o2", ""},
			{"demote o2", ""},
			{"demote o1", "drop o1:not-demoted"}, // never promoted
			{"G g1 500", "kill o2:evicted"},
		}, LocalLoad{RunningOpportunistic: 2}},

		{"a container larger than the node is rejected and blocks nothing", 1000, 10, []step{
			{"G g1 1000", "start g1"},
			{"O big 1200", "drop big:rejected"},
			{"O o1 100", ""},
			{"fin g1", "start o1"},
		}, LocalLoad{RunningOpportunistic: 1}},

		{"shedding drops the newest queued", 1000, 10, []step{
			{"G g1 1000", "start g1"},
			{"O o1 100", ""},
			{"O o2 100", ""},
			{"O o3 100", ""},
			{"shed 1", "drop o3:shed o2:shed"},
			{"fin g1", "start o1"},
		}, LocalLoad{RunningOpportunistic: 1}},

		{"stopping a queued container drops it; a running one is killed", 1000, 10, []step{
			{"G g1 1000", "start g1"},
			{"O o1 100", ""},
			{"stop o1", "drop o1:killed"},
			{"stop g1", "kill g1:killed"},
			{"stop g1", ""}, // already being killed
			{"fin g1", ""},
		}, LocalLoad{}},

		{"stopping a waiting guaranteed container lets the queue drain", 1000, 10, []step{
			{"G g1 900", "start g1"},
			{"G g2 500", ""},
			{"O o1 100", ""},
			{"stop g2", "start o1; drop g2:killed"},
		}, LocalLoad{RunningGuaranteed: 1, RunningOpportunistic: 1}},

		{"duplicate submissions and unknown IDs are ignored", 1000, 10, []step{
			{"G g1 100", "start g1"},
			{"G g1 100", ""},
			{"fin nope", ""},
			{"stop nope", ""},
			{"promote g1", "drop g1:not-promoted"},
		}, LocalLoad{RunningGuaranteed: 1}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			s := runSteps(t, c.capMem, c.queueLimit, c.steps)
			load := s.Load()
			load.Used, load.UsedOpportunistic = Resources{}, Resources{}
			if !reflect.DeepEqual(load, c.wantLoad) {
				t.Fatalf("load %+v, want %+v", load, c.wantLoad)
			}
		})
	}
}

func TestLocalSchedulerAccountsResources(t *testing.T) {
	s := runSteps(t, 1000, 10, []step{
		{"G g1 300", "start g1"},
		{"O o1 200", "start o1"},
	})
	l := s.Load()
	if l.Used.MemoryMB != 500 || l.UsedOpportunistic.MemoryMB != 200 {
		t.Fatalf("load %+v", l)
	}
	s.Finished("g1")
	s.Finished("o1")
	if !s.Load().Used.IsZero() {
		t.Fatalf("resources leaked: %+v", s.Load())
	}
}
