package rpc

import (
	"errors"
	"testing"

	"github.com/weft-sched/weft/scheduler"
)

// A batch's answer carries the least-loaded list once: results of the
// same computation leave theirs out and get it back on Unshare; a result
// of another computation keeps its own; errors keep their codes.
func TestHeartbeatBatchSharesTheList(t *testing.T) {
	list := []scheduler.LeastLoadedNode{{NodeID: "n1"}, {NodeID: "n2"}}
	other := []scheduler.LeastLoadedNode{{NodeID: "n3"}}
	resp := HeartbeatBatchResponse{Results: []HeartbeatResult{
		NewHeartbeatResult(&HeartbeatResponse{LeastLoaded: list, LeastLoadedAt: 10}, nil),
		NewHeartbeatResult(&HeartbeatResponse{LeastLoadedAt: 10}, nil),
		NewHeartbeatResult(&HeartbeatResponse{LeastLoaded: list, LeastLoadedAt: 10}, nil),
		NewHeartbeatResult(&HeartbeatResponse{LeastLoaded: other, LeastLoadedAt: 11}, nil),
		NewHeartbeatResult(nil, Errorf(CodeNotReady, "not yet")),
	}}
	resp.ShareLeastLoaded()
	if len(resp.LeastLoaded) != 2 {
		t.Fatalf("shared list %v", resp.LeastLoaded)
	}
	wantShared := []bool{true, false, true, false, false}
	for i, r := range resp.Results {
		if r.SharedList != wantShared[i] {
			t.Fatalf("result %d shared %v, want %v", i, r.SharedList, wantShared[i])
		}
		if r.SharedList && r.Response.LeastLoaded != nil {
			t.Fatalf("result %d kept its copy of the shared list", i)
		}
	}
	for i := range resp.Results {
		resp.Unshare(i)
	}
	got := func(i int) int { return len(resp.Results[i].Response.LeastLoaded) }
	if got(0) != 2 || got(1) != 0 || got(2) != 2 || got(3) != 1 {
		t.Fatalf("lists after Unshare: %d %d %d %d", got(0), got(1), got(2), got(3))
	}
	if err := resp.Results[4].Err(); !errors.Is(err, ErrNotReady) || !IsRetryable(err) || err.Error() != "not yet" {
		t.Fatalf("a result's error came back as %v", err)
	}
	if err := resp.Results[0].Err(); err != nil {
		t.Fatalf("a good result's error: %v", err)
	}
}

// A batch's answer carries the federation once, through the wire: every
// answered heartbeat gets it back, an error gets none; if the leader's
// changed within the batch, each result keeps its own.
func TestHeartbeatBatchSharesTheFederation(t *testing.T) {
	fed := &AgentFederation{Subcluster: "sc1", Routers: []string{"10.0.1.1:8060", "10.0.1.2:8060"}}
	resp := HeartbeatBatchResponse{Results: []HeartbeatResult{
		NewHeartbeatResult(&HeartbeatResponse{Federation: fed}, nil),
		NewHeartbeatResult(nil, Errorf(CodeConflict, "stale heartbeat")),
		NewHeartbeatResult(&HeartbeatResponse{Federation: fed, ReRegister: true}, nil),
	}}
	resp.ShareFederation()
	if resp.Federation != fed || resp.Results[0].Response.Federation != nil || resp.Results[2].Response.Federation != nil {
		t.Fatalf("not shared: batch %v, results %v, %v", resp.Federation, resp.Results[0].Response.Federation, resp.Results[2].Response.Federation)
	}
	data, err := Encode(&resp)
	if err != nil {
		t.Fatal(err)
	}
	var back HeartbeatBatchResponse
	if err := decodeWire(data, &back, 1<<20); err != nil {
		t.Fatal(err)
	}
	for i := range back.Results {
		back.Unshare(i)
	}
	for _, i := range []int{0, 2} {
		if f := back.Results[i].Response.Federation; f == nil || !f.equal(fed) {
			t.Fatalf("result %d: federation %+v after Unshare, want %+v", i, f, fed)
		}
	}
	if back.Results[1].Response.Federation != nil {
		t.Fatalf("an error result got the federation")
	}

	moved := &AgentFederation{Subcluster: "sc1", Routers: []string{"10.0.1.3:8060"}}
	mixed := HeartbeatBatchResponse{Results: []HeartbeatResult{
		NewHeartbeatResult(&HeartbeatResponse{Federation: fed}, nil),
		NewHeartbeatResult(&HeartbeatResponse{Federation: moved}, nil),
	}}
	mixed.ShareFederation()
	if mixed.Federation != nil || mixed.Results[0].Response.Federation != fed || mixed.Results[1].Response.Federation != moved {
		t.Fatalf("a changed federation was shared: %+v", mixed)
	}
}
