package server

import (
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/weft-sched/weft/internal/testutil"
	wrpc "github.com/weft-sched/weft/rpc"
	"github.com/weft-sched/weft/scheduler"
)

// An AM blacklists a node that every placement would prefer (it offers the
// most room), with AM.Allocate through a follower: the same call's asks
// are placed elsewhere, the answer and the app's status carry the list,
// the same addition again writes nothing, and a malformed or oversized one
// is refused naming the field, changing nothing.
func TestAMBlacklistKeepsTheLeadersPlacementsOff(t *testing.T) {
	c := startThree(t)
	l := c.leader()
	x := registerFake(t, c, l, "x", fourCores)
	app := submit(t, c, l, "careful")
	tok, _ := x.amToken(t, l, app)
	var ar wrpc.AMRegisterResponse
	if err := c.call(l, "AM.Register", &wrpc.AMRegisterRequest{AppID: app, Attempt: 1, Token: tok}, &ar); err != nil {
		t.Fatal(err)
	}
	registerFake(t, c, l, "hole", scheduler.Resources{MemoryMB: 4 << 20, Vcores: 1024}) // the most max_node_resources allows
	registerFake(t, c, l, "y", fourCores)
	registerFake(t, c, l, "z", fourCores)

	ask := scheduler.Ask{AskID: 1, Count: 3, Resources: scheduler.Resources{MemoryMB: 256, Vcores: 1}}
	req := &wrpc.AMAllocateRequest{AppID: app, Attempt: 1, Token: tok, Asks: []scheduler.Ask{ask}, BlacklistAdditions: []string{"hole"}}
	var placed []wrpc.ContainerInfo
	var resp wrpc.AMAllocateResponse
	testutil.WaitFor(t, 10*time.Second, func() bool {
		req.MaxWait = 200 * time.Millisecond
		resp = wrpc.AMAllocateResponse{}
		if err := c.call(c.follower(), "AM.Allocate", req, &resp); err != nil {
			t.Fatal(err)
		}
		placed = append(placed, resp.Allocated...)
		req.MinQueryIndex = resp.Index
		return len(placed) >= 3
	})
	for _, ci := range placed {
		if ci.NodeID == "hole" {
			t.Fatalf("container %s placed on the blacklisted node", ci.ID)
		}
	}
	if !slices.Equal(resp.Blacklist, []string{"hole"}) || resp.BlacklistIgnored {
		t.Fatalf("answer: blacklist %v, ignored %v; want [hole] in force", resp.Blacklist, resp.BlacklistIgnored)
	}
	var st wrpc.AppStatusResponse
	if err := c.call(l, "App.Status", &wrpc.AppRequest{AppID: app}, &st); err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(st.App.Blacklist, []string{"hole"}) || st.App.BlacklistIgnored || st.App.MaxFailuresPerNode != 3 {
		t.Fatalf("app status: blacklist %v, ignored %v, max_failures_per_node %d", st.App.Blacklist, st.App.BlacklistIgnored, st.App.MaxFailuresPerNode)
	}

	before, _ := l.State().App(app)
	again := &wrpc.AMAllocateRequest{AppID: app, Attempt: 1, Token: tok, BlacklistAdditions: []string{"hole"}}
	again.MinQueryIndex, again.MaxWait = l.State().Index(), time.Millisecond
	if err := c.call(l, "AM.Allocate", again, &wrpc.AMAllocateResponse{}); err != nil {
		t.Fatal(err)
	}
	if after, _ := l.State().App(app); after.ModifyIndex != before.ModifyIndex {
		t.Fatalf("blacklisting the same node again changed the app (index %d → %d)", before.ModifyIndex, after.ModifyIndex)
	}
	var many []string
	for i := range scheduler.MaxBlacklistedNodes {
		many = append(many, "n"+strings.Repeat("x", i%5)+string(rune('a'+i%26))+string(rune('a'+i/26)))
	}
	for _, bad := range []struct {
		adds []string
		want string
	}{{[]string{"y", "../etc"}, "blacklist_additions[1]"}, {many, "at most 100"}} {
		req := &wrpc.AMAllocateRequest{AppID: app, Attempt: 1, Token: tok, BlacklistAdditions: bad.adds}
		req.MaxWait = time.Millisecond
		err := c.call(l, "AM.Allocate", req, &wrpc.AMAllocateResponse{})
		if !errors.Is(err, wrpc.ErrBadRequest) || !strings.Contains(err.Error(), bad.want) {
			t.Fatalf("blacklist additions %d: %v; want bad_request naming %s", len(bad.adds), err, bad.want)
		}
	}
	if after, _ := l.State().App(app); !slices.Equal(after.Blacklist, []string{"hole"}) {
		t.Fatalf("refused additions changed the blacklist to %v", after.Blacklist)
	}
}
