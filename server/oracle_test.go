package server

import (
	"strings"
	"testing"

	wrpc "github.com/weft-sched/weft/rpc"
	"github.com/weft-sched/weft/scheduler"
)

// For a caller who may not read an app or a queue, naming one that exists
// and naming one that does not answer the same: the same code, the same
// message but for the name. Otherwise any token, even the anonymous
// caller, could learn which apps and queues other users have.
func TestUnreadableAndUnknownAnswerAlike(t *testing.T) {
	w := newACLWorld(t, 1)
	l := w.c.leader()
	cfg := scheduler.DefaultQueueConfig()
	for _, name := range []string{"a", "b", "c"} {
		cfg.Root.Children = append(cfg.Root.Children, scheduler.NewQueueSpec(name))
	}
	parent := scheduler.NewQueueSpec("p")
	parent.Children = append(parent.Children, scheduler.NewQueueSpec("x"))
	cfg.Root.Children = append(cfg.Root.Children, parent)
	if err := w.mgmt.call(l, "Queue.Apply", &wrpc.QueueApplyRequest{Config: cfg}, &wrpc.QueueApplyResponse{}); err != nil {
		t.Fatal(err)
	}
	alice := w.token(t, "alice", `queue "root.a" { policy = "submit" }
queue "root.c" { policy = "read" }
queue "root.p" { policy = "read" }`)
	submit := func(c aclClient, queue string) (string, error) {
		var resp wrpc.AppSubmitResponse
		err := c.call(l, "App.Submit", &wrpc.AppSubmitRequest{Spec: scheduler.AppSpec{Name: "x", Queue: queue,
			DShell: scheduler.DShell{NumContainers: 1, Command: []string{"true"}}}}, &resp)
		return resp.AppID, err
	}
	bobs, err := submit(w.mgmt, "b")
	if err != nil {
		t.Fatal(err)
	}
	readable, err := submit(w.mgmt, "c")
	if err != nil {
		t.Fatal(err)
	}

	// same calls method with existing and missing (each a name the caller
	// may not read, and one nothing has) and wants one answer, with the
	// name replaced, of code code.
	same := func(who aclClient, method string, args func(name string) any, existing, missing string, code wrpc.Code, want string) {
		t.Helper()
		var answers [2]string
		for i, name := range []string{existing, missing} {
			err := who.call(l, method, args(name), &struct{}{})
			if wrpc.ErrorCode(err) != code {
				t.Fatalf("%s %s: got %v, want %s", method, name, err, code)
			}
			answers[i] = strings.ReplaceAll(err.Error(), name, "NAME")
		}
		if answers[0] != answers[1] || !strings.Contains(answers[0], want) {
			t.Fatalf("%s answers an existing name it may not read with\n  %s\nand a missing one with\n  %s\nwant the same, holding %q", method, answers[0], answers[1], want)
		}
	}
	app := func(id string) any { return &wrpc.AppRequest{AppID: id} }
	same(alice, "App.Status", app, bobs, "app-999", wrpc.CodeNotFound, `app NAME not found among the apps token "alice" may read`)
	same(alice, "App.Kill", app, bobs, "app-999", wrpc.CodeNotFound, `app NAME not found among the apps token "alice" may read`)
	// A caller who may read no queue at all hears so, whatever it names.
	anon := aclClient{c: w.c}
	same(anon, "App.Status", app, bobs, "app-999", wrpc.CodePermissionDenied, "the anonymous caller (no ACL token given: set -token or WEFT_TOKEN) lacks read on any queue")
	if err := w.mgmt.call(l, "ACL.PolicyApply", &wrpc.ACLPolicyApplyRequest{Policy: wrpc.ACLPolicy{Name: "anonymous", Rules: `queue "root.c" { policy = "read" }`}}, &wrpc.WriteResponse{}); err != nil {
		t.Fatal(err)
	}
	same(anon, "App.Status", app, bobs, "app-999", wrpc.CodeNotFound, "not found among the apps the anonymous caller may read (no ACL token given")
	same(alice, "Queue.Status", func(n string) any { return &wrpc.QueueStatusRequest{Name: n} }, "root.b", "root.nope", wrpc.CodeNotFound,
		`queue NAME not found among the queues token "alice" may read; queues are: root.a, root.c, root.p`)
	same(alice, "App.Submit", func(q string) any {
		return &wrpc.AppSubmitRequest{Spec: scheduler.AppSpec{Queue: q, DShell: scheduler.DShell{NumContainers: 1, Command: []string{"true"}}}}
	}, "b", "nope", wrpc.CodeBadRequest, `queue root.NAME not found among the queues token "alice" may read; leaf queues it may read are: root.a, root.c`)

	// What a caller may read is no secret: there it hears why it may not act.
	if _, err := submit(alice, "c"); wrpc.ErrorCode(err) != wrpc.CodePermissionDenied || !strings.Contains(err.Error(), "lacks submit on queue root.c") {
		t.Fatalf("submit to a queue alice reads: %v", err)
	}
	if _, err := submit(alice, "p"); wrpc.ErrorCode(err) != wrpc.CodeBadRequest || !strings.Contains(err.Error(), "queue root.p is a parent queue; submit to a leaf: root.a, root.c") {
		t.Fatalf("submit to a parent queue alice reads: %v", err)
	}
	if err := alice.call(l, "App.Kill", &wrpc.AppRequest{AppID: readable}, &wrpc.WriteResponse{}); wrpc.ErrorCode(err) != wrpc.CodePermissionDenied {
		t.Fatalf("kill of an app alice reads but may not kill: %v", err)
	}
	var st wrpc.AppStatusResponse
	if err := alice.call(l, "App.Status", &wrpc.AppRequest{AppID: readable}, &st); err != nil || st.App.ID != readable {
		t.Fatalf("status of an app alice reads: %+v %v", st.App, err)
	}
	// Management reads everything: a plain "not found".
	if err := w.mgmt.call(l, "App.Status", &wrpc.AppRequest{AppID: "app-999"}, &st); wrpc.ErrorCode(err) != wrpc.CodeNotFound || !strings.HasSuffix(err.Error(), "app app-999 not found") {
		t.Fatalf("management, an unknown app: %v", err)
	}
}
