package router

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/weft-sched/weft/internal/config"
	wrpc "github.com/weft-sched/weft/rpc"
	"github.com/weft-sched/weft/server"
)

// A router checks a token before its HTTP API reads a request, as a
// sub-cluster answers ACL.Authorize: what of the capability is granted
// without the request, and whether by a management token. A refusal is
// remembered, so a flood with one bad token (or none) asks a sub-cluster
// once; a flood of random tokens asks at most maxACLChecks at once, the
// rest refused at once. An app a token may not read answers as one that
// does not exist.
func TestRoutersAuthenticateBeforeTheAPIReads(t *testing.T) {
	c := newRouters(t)
	c.acl = true
	r := c.start("r1", 1)
	c.leader()
	sc1 := subcluster(t, c, "sc1", r, 8, "", func(cfg *server.Config) { cfg.ACLEnabled = true })
	var boot wrpc.ACLTokenResponse
	if err := c.call(r, "ACL.Bootstrap", &wrpc.ACLBootstrapRequest{}, &boot); err != nil {
		t.Fatal(err)
	}
	mgmt := wrpc.RequestHeader{AuthToken: boot.Token.SecretID}
	qc, err := config.ParseQueueConfig("q.hcl", []byte(`queue "root" {
  queue "default" {}
  queue "a" {}
  queue "b" {}
}`))
	if err != nil {
		t.Fatal(err)
	}
	if err := c.call2(sc1.RPCAddr(), "Queue.Apply", &wrpc.QueueApplyRequest{RequestHeader: mgmt, Config: qc}, &wrpc.QueueApplyResponse{}); err != nil {
		t.Fatal(err)
	}
	if err := c.call(r, "ACL.PolicyApply", &wrpc.ACLPolicyApplyRequest{RequestHeader: mgmt,
		Policy: wrpc.ACLPolicy{Name: "alice", Rules: `queue "root.a" { policy = "submit" }`}}, &wrpc.WriteResponse{}); err != nil {
		t.Fatal(err)
	}
	var alice wrpc.ACLTokenResponse
	if err := c.call(r, "ACL.TokenCreate", &wrpc.ACLTokenCreateRequest{RequestHeader: mgmt, Name: "alice", Policies: []string{"alice"}}, &alice); err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()

	if _, err := r.Authenticate(ctx, "App.List", "", wrpc.CapQueueRead); !errors.Is(err, wrpc.ErrPermissionDenied) || !strings.Contains(err.Error(), "lacks read on any queue") {
		t.Fatalf("anonymous: %v", err)
	}
	if g, ok := r.grants.lookup(grantKey("", wrpc.CapQueueRead, ""), r.clock.Now()); !ok || g.refusal == nil {
		t.Fatalf("the anonymous refusal is not remembered: %+v", g)
	}
	if m, err := r.Authenticate(ctx, "Queue.Apply", mgmt.AuthToken, wrpc.CapOperatorWrite); err != nil || !m {
		t.Fatalf("management: %v, management %v", err, m)
	}
	if m, err := r.Authenticate(ctx, "App.Submit", alice.Token.SecretID, wrpc.CapQueueSubmit); err != nil || m {
		t.Fatalf("alice submits somewhere: %v, management %v", err, m)
	}
	if _, err := r.Authenticate(ctx, "Queue.Apply", alice.Token.SecretID, wrpc.CapOperatorWrite); !errors.Is(err, wrpc.ErrPermissionDenied) {
		t.Fatalf("alice applies queues: %v", err)
	}
	for range maxACLChecks {
		r.aclChecks <- struct{}{}
	}
	if _, err := r.Authenticate(ctx, "App.List", "a-token-never-seen", wrpc.CapQueueRead); wrpc.ErrorCode(err) != wrpc.CodeUnavailable {
		t.Fatalf("a new token while %d checks are in flight: %v, want unavailable at once", maxACLChecks, err)
	}
	if _, err := r.Authenticate(ctx, "App.Submit", alice.Token.SecretID, wrpc.CapQueueSubmit); err != nil {
		t.Fatalf("a token already checked, meanwhile: %v", err)
	}
	for range maxACLChecks {
		<-r.aclChecks
	}

	spec := dshell("root.b")
	spec.User = ""
	var bobs wrpc.AppSubmitResponse
	if err := c.call(r, "App.Submit", &wrpc.AppSubmitRequest{RequestHeader: mgmt, Spec: spec}, &bobs); err != nil {
		t.Fatal(err)
	}
	var answers []string
	for _, id := range []string{bobs.AppID, "app-f999", "sc1.app-1", "sc1.app-999"} {
		err := c.call(r, "App.Status", &wrpc.AppRequest{RequestHeader: wrpc.RequestHeader{AuthToken: alice.Token.SecretID}, AppID: id}, &wrpc.AppStatusResponse{})
		if wrpc.ErrorCode(err) != wrpc.CodeNotFound {
			t.Fatalf("alice asks about %s: %v, want not found", id, err)
		}
		answers = append(answers, strings.ReplaceAll(err.Error(), id, "ID"))
	}
	for _, a := range answers[1:] {
		if a != answers[0] {
			t.Fatalf("an app alice may not read and unknown ones answer differently:\n%s", strings.Join(answers, "\n"))
		}
	}
}
