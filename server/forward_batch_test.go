package server

import (
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/weft-sched/weft/internal/testutil"
	wrpc "github.com/weft-sched/weft/rpc"
	"github.com/weft-sched/weft/scheduler"
)

// Heartbeats that reach a follower together go to the leader in one
// Node.HeartbeatBatch call, and each agent gets its own answer: a live
// node's, a re-registration for a node the servers do not know, and a
// refusal for a wrong secret. A heartbeat too large to batch goes alone.
func TestFollowerForwardsHeartbeatsInBatches(t *testing.T) {
	c := startThree(t)
	l, f := c.leader(), c.follower()
	const n = 10
	nodes := make([]*fakeNode, n)
	for i := range nodes {
		nodes[i] = registerFake(t, c, l, fmt.Sprintf("n%d", i), scheduler.Resources{MemoryMB: 4096, Vcores: 4})
	}
	// Hold the follower's first batches so that what follows queues.
	h := newHeldCommit(forwardBatchesInFlight, f.sendHeartbeats)
	f.hbForward.commit.Store(ptr(commitFunc[forwardedHeartbeat, wrpc.HeartbeatResult](h.propose)))

	type answer struct {
		resp wrpc.HeartbeatResponse
		err  error
	}
	answers := make([]answer, n+2)
	var wg sync.WaitGroup
	beat := func(i int, req wrpc.HeartbeatRequest) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			answers[i].err = c.call(f, "Node.Heartbeat", &req, &answers[i].resp)
		}()
	}
	beatNode := func(i int) {
		nd := nodes[i]
		beat(i, wrpc.HeartbeatRequest{NodeID: nd.id, Epoch: nd.epoch, Secret: nd.secret})
	}
	fillSlots(t, h, beatNode)
	for i := forwardBatchesInFlight; i < n; i++ {
		beatNode(i)
	}
	beat(n, wrpc.HeartbeatRequest{NodeID: "ghost", Epoch: 1, Secret: nodeSecret("ghost")})
	beat(n+1, wrpc.HeartbeatRequest{NodeID: nodes[0].id, Epoch: nodes[0].epoch, Secret: nodeSecret("wrong")})
	queued := n + 2 - forwardBatchesInFlight
	testutil.WaitFor(t, 10*time.Second, func() bool { return len(f.hbForward.in) == queued })
	close(h.release)
	wg.Wait()

	if got := h.calls(); len(got) != forwardBatchesInFlight+1 || got[forwardBatchesInFlight] != queued {
		t.Fatalf("batches %v: want %d of one, then one of %d", got, forwardBatchesInFlight, queued)
	}
	for i := range n {
		if a := answers[i]; a.err != nil || a.resp.ReRegister || len(a.resp.Servers) != 3 {
			t.Fatalf("heartbeat of %s: %v, re-register %v, servers %v", nodes[i].id, a.err, a.resp.ReRegister, a.resp.Servers)
		}
	}
	if a := answers[n]; a.err != nil || !a.resp.ReRegister {
		t.Fatalf("heartbeat of an unknown node: %v, re-register %v", a.err, a.resp.ReRegister)
	}
	if a := answers[n+1]; !errors.Is(a.err, wrpc.ErrPermissionDenied) {
		t.Fatalf("heartbeat with a wrong secret: %v", a.err)
	}

	// One too large to batch is forwarded on its own.
	big := wrpc.HeartbeatRequest{NodeID: nodes[1].id, Epoch: nodes[1].epoch, Secret: nodes[1].secret}
	for len(big.Containers)*200 <= maxBatchedHeartbeatBytes {
		big.Containers = append(big.Containers, wrpc.ContainerReport{ID: fmt.Sprintf("g-%d-0", len(big.Containers)+1000),
			State: scheduler.ContainerRunning, Diagnostics: strings.Repeat("d", 64)})
	}
	var hb wrpc.HeartbeatResponse
	if err := c.call(f, "Node.Heartbeat", &big, &hb); err != nil || hb.ReRegister {
		t.Fatalf("a large heartbeat: %v, re-register %v", err, hb.ReRegister)
	}
	if got := h.calls(); len(got) != forwardBatchesInFlight+1 {
		t.Fatalf("a heartbeat of %d bytes was batched: batches %v", heartbeatBytes(&big), got)
	}
	if len(hb.Kill) != len(big.Containers) {
		t.Fatalf("the leader ordered %d of the %d unknown containers killed", len(hb.Kill), len(big.Containers))
	}
}

// Node.HeartbeatBatch refuses a batch over its bound, naming the field,
// and a follower refuses one (it is not the leader) with the retryable
// no_leader, so the sender forwards each heartbeat on its own.
func TestHeartbeatBatchRefusals(t *testing.T) {
	c := startThree(t)
	l, f := c.leader(), c.follower()
	nd := registerFake(t, c, l, "n1", scheduler.Resources{MemoryMB: 4096, Vcores: 4})
	one := wrpc.HeartbeatRequest{NodeID: nd.id, Epoch: nd.epoch, Secret: nd.secret}

	tooMany := wrpc.HeartbeatBatchRequest{Heartbeats: make([]wrpc.HeartbeatRequest, wrpc.MaxHeartbeatBatch+1)}
	for i := range tooMany.Heartbeats {
		tooMany.Heartbeats[i] = one
	}
	var resp wrpc.HeartbeatBatchResponse
	err := c.call(l, "Node.HeartbeatBatch", &tooMany, &resp)
	if !errors.Is(err, wrpc.ErrBadRequest) || !strings.HasPrefix(err.Error(), "heartbeats: ") {
		t.Fatalf("a batch of %d: %v", len(tooMany.Heartbeats), err)
	}
	if err := c.call(f, "Node.HeartbeatBatch", &wrpc.HeartbeatBatchRequest{Heartbeats: []wrpc.HeartbeatRequest{one}}, &resp); !errors.Is(err, wrpc.ErrNoLeader) {
		t.Fatalf("a batch sent to a follower: %v", err)
	}
	resp = wrpc.HeartbeatBatchResponse{}
	if err := c.call(l, "Node.HeartbeatBatch", &wrpc.HeartbeatBatchRequest{Heartbeats: []wrpc.HeartbeatRequest{one, one}}, &resp); err != nil || len(resp.Results) != 2 {
		t.Fatalf("a batch of two to the leader: %v, %d results", err, len(resp.Results))
	}
	for i, r := range resp.Results {
		if r.Err() != nil || r.Response.ReRegister {
			t.Fatalf("result %d: %v, re-register %v", i, r.Err(), r.Response.ReRegister)
		}
	}
}
