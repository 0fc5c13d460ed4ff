package server

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/weft-sched/weft/fsm"
	wrpc "github.com/weft-sched/weft/rpc"
	"github.com/weft-sched/weft/scheduler"
)

// bigQueueConfig is a queue tree of n×20 leaves: about 280 bytes a queue.
func bigQueueConfig(n int) *scheduler.QueueConfig {
	cfg := scheduler.DefaultQueueConfig()
	for i := range n {
		dept := scheduler.NewQueueSpec(fmt.Sprintf("dept%03d", i))
		for j := range 20 {
			team := scheduler.NewQueueSpec(fmt.Sprintf("team%02d", j))
			limit := scheduler.Resources{MemoryMB: 1 << 20, Vcores: 1000}
			team.MaxResources = &limit
			dept.Children = append(dept.Children, team)
		}
		cfg.Root.Children = append(cfg.Root.Children, dept)
	}
	return cfg
}

// A queue tree or an app spec larger than rpc.DefaultMaxBody is read only
// from a caller whose token the request header proves before the body:
// the management token applies 1,000 queues (through a follower, which
// forwards them with the token in the header too); alice, who lacks
// operator:write, is refused without her body being read; a caller with
// no token is told its body is larger than it may send. alice, who may
// submit to root.default, sends an app spec of 2,000 splits.
func TestLargeBodiesAreReadOnlyFromAProvenToken(t *testing.T) {
	c := newTestCluster(t)
	c.acl = true
	s1 := c.start("s1", 3)
	c.start("s2", 3, s1.SerfAddr())
	c.start("s3", 3, s1.SerfAddr())
	c.waitForLeader()
	c.waitForVoters("s1", "s2", "s3")
	l := c.leader()
	anon := aclClient{c: c}
	var boot wrpc.ACLTokenResponse
	breq := &wrpc.ACLBootstrapRequest{}
	breq.AccessorID, breq.SecretID = wrpc.NewACLIDs()
	if err := anon.call(l, "ACL.Bootstrap", breq, &boot); err != nil {
		t.Fatal(err)
	}
	mgmt := aclClient{c: c, secret: boot.Token.SecretID}
	if err := mgmt.call(l, "ACL.PolicyApply", &wrpc.ACLPolicyApplyRequest{Policy: wrpc.ACLPolicy{Name: "dev", Rules: `queue "root.default" { policy = "submit" }`}}, &wrpc.WriteResponse{}); err != nil {
		t.Fatal(err)
	}
	var alice wrpc.ACLTokenResponse
	treq := &wrpc.ACLTokenCreateRequest{Name: "alice", Policies: []string{"dev"}}
	treq.AccessorID, treq.SecretID = wrpc.NewACLIDs()
	if err := mgmt.call(l, "ACL.TokenCreate", treq, &alice); err != nil {
		t.Fatal(err)
	}
	as := aclClient{c: c, secret: alice.Token.SecretID}

	cfg := bigQueueConfig(50)
	if raw, _ := wrpc.Encode(cfg); len(raw) < 16*wrpc.DefaultMaxBody {
		t.Fatalf("the queue tree is only %d bytes", len(raw))
	}
	err := anon.call(l, "Queue.Apply", &wrpc.QueueApplyRequest{Config: cfg}, &wrpc.WriteResponse{})
	if !errors.Is(err, wrpc.ErrTooLarge) || !strings.Contains(err.Error(), "carries no token") {
		t.Fatalf("1,000 queues without a token: %v, want too_large saying no token came first", err)
	}
	err = as.call(l, "Queue.Apply", &wrpc.QueueApplyRequest{Config: cfg}, &wrpc.WriteResponse{})
	if !errors.Is(err, wrpc.ErrPermissionDenied) || !strings.Contains(err.Error(), "lacks operator:write") || !strings.Contains(err.Error(), "was not read") {
		t.Fatalf("1,000 queues from alice: %v, want permission denied, the body unread", err)
	}
	if got := l.State().TableIndex(fsm.TableQueues); got != 0 {
		t.Fatalf("a refused queue apply changed the queues (index %d)", got)
	}
	if err := mgmt.call(c.follower(), "Queue.Apply", &wrpc.QueueApplyRequest{Config: cfg}, &wrpc.WriteResponse{}); err != nil {
		t.Fatalf("1,000 queues from the management token, through a follower: %v", err)
	}

	splits := make([]scheduler.Split, 2000)
	for i := range splits {
		splits[i] = scheduler.Split{Path: fmt.Sprintf("/shared/input/part-%05d", i), Nodes: []string{"n1", "n2", "n3"}}
	}
	spec := scheduler.AppSpec{Name: "wc", AMType: scheduler.AMTypeMapReduce, MapReduce: &scheduler.MapReduce{
		Splits: splits, Map: []string{"/bin/map"}, Reduce: []string{"/bin/reduce"}, Reducers: 4, Output: "/shared/out"}}
	err = anon.call(l, "App.Submit", &wrpc.AppSubmitRequest{Spec: spec}, &wrpc.AppSubmitResponse{})
	if !errors.Is(err, wrpc.ErrTooLarge) {
		t.Fatalf("a 2,000-split job without a token: %v, want too_large", err)
	}
	// alice's reaches the handler, which has no node to run it on.
	err = as.call(l, "App.Submit", &wrpc.AppSubmitRequest{Spec: spec}, &wrpc.AppSubmitResponse{})
	if errors.Is(err, wrpc.ErrTooLarge) || errors.Is(err, wrpc.ErrPermissionDenied) {
		t.Fatalf("a 2,000-split job from alice: %v, want it read and judged on its merits", err)
	}
}
