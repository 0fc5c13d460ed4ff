package agent

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/weft-sched/weft/internal/testutil"
	"github.com/weft-sched/weft/rpc"
	"github.com/weft-sched/weft/scheduler"
)

// appCounters reads the app's counters from the servers.
func (w *amWorld) appCounters() (scheduler.Counters, string) {
	w.t.Helper()
	var st rpc.AppStatusResponse
	if err := w.c.Call(context.Background(), "App.Status", &rpc.AppRequest{AppID: w.app}, &st); err != nil {
		w.t.Fatal(err)
	}
	return st.App.Counters, st.App.State
}

// The AMRMProxy passes an AM's counters (SPEC §19) to the servers: with
// a call it answers alone (opportunistic asks, relayed in the background)
// as with one it forwards, and the final ones with AM.Finish. Bad ones are
// refused at the proxy. Its own opportunistic containers name their
// node's rack.
func TestAMRMProxyPassesCountersToTheServers(t *testing.T) {
	w := startAMWorld(t, 2, func(cfg *Config) { cfg.Rack = "/dc1/r3" })
	w.waitList(2)

	first := scheduler.Counters{"maps.data_local": 2, "shuffle.bytes.node": 4096}
	resp := w.allocate(rpc.AMAllocateRequest{Asks: []scheduler.Ask{oppAsk(1, 2, true)}, Counters: first})
	if len(resp.Allocated) != 2 {
		t.Fatalf("%d opportunistic containers from the proxy, want 2 at once", len(resp.Allocated))
	}
	for _, c := range resp.Allocated {
		if c.Rack != "/dc1/r3" {
			t.Fatalf("the proxy's container %s names rack %q, want its node's /dc1/r3", c.ID, c.Rack)
		}
	}
	testutil.WaitFor(t, 10*time.Second, func() bool { got, _ := w.appCounters(); return got.Equal(first) })

	// Changed counters with nothing else: forwarded.
	second := scheduler.Counters{"maps.data_local": 3, "shuffle.bytes.node": 8192}
	w.allocate(rpc.AMAllocateRequest{Counters: second})
	if got, _ := w.appCounters(); !got.Equal(second) {
		t.Fatalf("after a forwarded Allocate the servers hold %v, want %v", got, second)
	}

	_, err := w.am.Allocate(context.Background(), rpc.AMAllocateRequest{Counters: scheduler.Counters{"Not A Name": 1}}, time.Second)
	if !errors.Is(err, rpc.ErrBadRequest) || !strings.Contains(err.Error(), "counters: name") {
		t.Fatalf("bad counters answered %v, want bad_request naming counters", err)
	}
	err = w.am.FinishWith(context.Background(), rpc.AMFinishRequest{FinalState: "FINISHED", Counters: scheduler.Counters{"": 1}})
	if !errors.Is(err, rpc.ErrBadRequest) || !strings.Contains(err.Error(), "counters: name") {
		t.Fatalf("AM.Finish with bad counters answered %v, want bad_request naming counters", err)
	}

	final := scheduler.Counters{"maps.data_local": 4, "shuffle.bytes.node": 9000, "tnd": 6}
	if err := w.am.FinishWith(context.Background(), rpc.AMFinishRequest{FinalState: "FINISHED", Counters: final}); err != nil {
		t.Fatal(err)
	}
	if got, state := w.appCounters(); state != string(scheduler.AppFinished) || !got.Equal(final) {
		t.Fatalf("finished app: %s with %v, want FINISHED with %v", state, got, final)
	}
}
