package agent

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/weft-sched/weft/internal/testutil"
	"github.com/weft-sched/weft/rpc"
	"github.com/weft-sched/weft/scheduler"
)

// An AM's blacklist, sent through its AMRMProxy, keeps every container of
// its app off the node: opportunistic ones the proxy allocates itself,
// guaranteed ones the leader places, and opportunistic ones the leader
// allocates centrally. The servers hold it with the app; a bad one is
// refused whole; one naming half the READY nodes is ignored.
func TestAMRMProxyAndServersHonourTheBlacklist(t *testing.T) {
	w := startAMWorld(t, 4, nil)
	w.waitList(4)
	var bad string
	for _, a := range w.agents {
		if a != w.home {
			bad = a.NodeID()
			break
		}
	}
	resp := w.allocate(rpc.AMAllocateRequest{BlacklistAdditions: []string{bad}})
	if !slices.Equal(resp.Blacklist, []string{bad}) || resp.BlacklistIgnored {
		t.Fatalf("answer to the blacklisting: blacklist %v, ignored %v; want [%s] in force (1 of 4 nodes)", resp.Blacklist, resp.BlacklistIgnored, bad)
	}
	if a, _ := w.srv.State().App(w.app); !slices.Equal(a.Blacklist, []string{bad}) {
		t.Fatalf("the servers hold blacklist %v", a.Blacklist)
	}
	on := func(cs []rpc.ContainerInfo) map[string]int {
		out := map[string]int{}
		for _, c := range cs {
			out[c.NodeID]++
		}
		return out
	}

	// Opportunistic, allocated by the proxy: spread over the three others.
	opp := w.allocate(rpc.AMAllocateRequest{Asks: []scheduler.Ask{oppAsk(2, 12, true)}}).Allocated
	if by := on(opp); len(opp) != 12 || by[bad] != 0 {
		t.Fatalf("opportunistic containers by node %v: want 12, none on %s", by, bad)
	}

	// Guaranteed, placed by the leader.
	var placed []rpc.ContainerInfo
	ask := scheduler.Ask{AskID: 3, Count: 6, Resources: oneCore, ExecutionType: scheduler.Guaranteed}
	testutil.WaitFor(t, 15*time.Second, func() bool {
		ask.Count = 6 - len(placed)
		placed = append(placed, w.allocate(rpc.AMAllocateRequest{Asks: []scheduler.Ask{ask}}).Allocated...)
		return len(placed) >= 6
	})
	if by := on(placed); by[bad] != 0 {
		t.Fatalf("guaranteed containers by node %v: none may be on %s", by, bad)
	}

	// Opportunistic, allocated centrally by the leader.
	o := scheduler.DefaultOpportunisticConfig()
	o.Distributed = false
	w.setOpportunistic(o)
	testutil.WaitFor(t, 15*time.Second, func() bool { return w.home.sched.view().Centralized })
	var central []rpc.ContainerInfo
	testutil.WaitFor(t, 15*time.Second, func() bool {
		central = append(central, w.allocate(rpc.AMAllocateRequest{Asks: []scheduler.Ask{oppAsk(4, 6-len(central), true)}}).Allocated...)
		return len(central) >= 6
	})
	if by := on(central); by[bad] != 0 {
		t.Fatalf("centrally allocated containers by node %v: none may be on %s", by, bad)
	}

	// A malformed node refuses the whole call and changes nothing.
	_, err := w.am.Allocate(context.Background(), rpc.AMAllocateRequest{BlacklistAdditions: []string{"ok", "../etc"},
		Asks: []scheduler.Ask{oppAsk(5, 1, true)}}, time.Second)
	if !errors.Is(err, rpc.ErrBadRequest) || !strings.Contains(err.Error(), "blacklist_additions[1]") {
		t.Fatalf("a malformed blacklist addition: %v", err)
	}
	if a, _ := w.srv.State().App(w.app); !slices.Equal(a.Blacklist, []string{bad}) {
		t.Fatalf("the refused call changed the blacklist to %v", a.Blacklist)
	}

	// Two of four READY nodes: ignored, so the app may use them again.
	var other string
	for _, a := range w.agents {
		if a != w.home && a.NodeID() != bad {
			other = a.NodeID()
			break
		}
	}
	resp = w.allocate(rpc.AMAllocateRequest{BlacklistAdditions: []string{other}})
	if len(resp.Blacklist) != 2 || !resp.BlacklistIgnored {
		t.Fatalf("blacklist of half the nodes: %v, ignored %v; want ignored", resp.Blacklist, resp.BlacklistIgnored)
	}
	var info rpc.AppStatusResponse
	if err := w.c.Call(context.Background(), "App.Status", &rpc.AppRequest{AppID: w.app}, &info); err != nil {
		t.Fatal(err)
	}
	if len(info.App.Blacklist) != 2 || !info.App.BlacklistIgnored || info.App.MaxFailuresPerNode != 3 {
		t.Fatalf("app status: blacklist %v, ignored %v, max_failures_per_node %d", info.App.Blacklist, info.App.BlacklistIgnored,
			info.App.MaxFailuresPerNode)
	}
}
