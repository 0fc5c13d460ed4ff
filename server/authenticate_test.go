package server

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/weft-sched/weft/internal/testutil"
	wrpc "github.com/weft-sched/weft/rpc"
)

// aclWorld is a server cluster with ACLs on, a management token, and
// tokens made from policies.
type aclWorld struct {
	c    *testCluster
	mgmt aclClient
}

func newACLWorld(t *testing.T, servers int) *aclWorld {
	t.Helper()
	c := newTestCluster(t)
	c.acl = true
	s1 := c.start("s1", servers)
	for i := 2; i <= servers; i++ {
		c.start(fmt.Sprintf("s%d", i), servers, s1.SerfAddr())
	}
	c.waitForLeader()
	if servers > 1 {
		c.waitForVoters(c.ids()...)
	}
	var boot wrpc.ACLTokenResponse
	if err := c.call(c.leader(), "ACL.Bootstrap", &wrpc.ACLBootstrapRequest{}, &boot); err != nil {
		t.Fatal(err)
	}
	return &aclWorld{c: c, mgmt: aclClient{c: c, secret: boot.Token.SecretID}}
}

// token makes a token named name of one policy holding rules.
func (w *aclWorld) token(t *testing.T, name, rules string) aclClient {
	t.Helper()
	l := w.c.leader()
	if err := w.mgmt.call(l, "ACL.PolicyApply", &wrpc.ACLPolicyApplyRequest{Policy: wrpc.ACLPolicy{Name: name, Rules: rules}}, &wrpc.WriteResponse{}); err != nil {
		t.Fatal(err)
	}
	var tok wrpc.ACLTokenResponse
	if err := w.mgmt.call(l, "ACL.TokenCreate", &wrpc.ACLTokenCreateRequest{Name: name, Policies: []string{name}}, &tok); err != nil {
		t.Fatal(err)
	}
	return aclClient{c: w.c, secret: tok.Token.SecretID}
}

// Authenticate refuses, before a request is read, every token that no
// request of the route could pass, and tells management tokens apart.
func TestAuthenticateChecksWhatItCanWithoutTheRequest(t *testing.T) {
	w := newACLWorld(t, 1)
	l := w.c.leader()
	alice := w.token(t, "alice", `queue "root.a" { policy = "submit" }`)
	reader := w.token(t, "reader", `queue "root.b" { policy = "read" }
operator { policy = "read" }`)
	ctx := context.Background()
	for _, tc := range []struct {
		who    string
		secret string
		c      wrpc.Capability
		refuse string // "" when allowed
	}{
		{"anonymous", "", wrpc.CapPublic, ""},
		{"anonymous", "", wrpc.CapQueueRead, "the anonymous caller (no ACL token given: set -token or WEFT_TOKEN) lacks read on any queue"},
		{"anonymous", "", wrpc.CapQueueSubmit, "lacks submit on any queue"},
		{"anonymous", "", wrpc.CapOperatorWrite, "lacks operator:write"},
		{"anonymous", "", wrpc.CapToken, "lacks token"},
		{"unknown", "not-a-token", wrpc.CapQueueRead, "ACL token not found"},
		{"alice", alice.secret, wrpc.CapQueueRead, ""},
		{"alice", alice.secret, wrpc.CapQueueSubmit, ""},
		{"alice", alice.secret, wrpc.CapToken, ""},
		{"alice", alice.secret, wrpc.CapOperatorWrite, `token "alice" lacks operator:write`},
		{"alice", alice.secret, wrpc.CapNodeRead, "lacks node:read"},
		{"reader", reader.secret, wrpc.CapQueueRead, ""},
		{"reader", reader.secret, wrpc.CapQueueSubmit, `token "reader" lacks submit on any queue`},
		{"reader", reader.secret, wrpc.CapOperatorRead, ""},
		{"management", w.mgmt.secret, wrpc.CapOperatorWrite, ""},
		{"anyone", w.mgmt.secret, wrpc.CapAgent, "no HTTP client holds"},
		{"anyone", w.mgmt.secret, wrpc.CapWorkload, "no HTTP client holds"},
	} {
		mgmt, err := l.Authenticate(ctx, "X.Y", tc.secret, tc.c)
		switch {
		case tc.refuse == "" && err != nil:
			t.Errorf("%s, %s: refused: %v", tc.who, tc.c, err)
		case tc.refuse != "" && (!errors.Is(err, wrpc.ErrPermissionDenied) || !strings.Contains(err.Error(), tc.refuse) || !strings.HasPrefix(err.Error(), "X.Y: ")):
			t.Errorf("%s, %s: got %v, want permission denied naming the method and %q", tc.who, tc.c, err, tc.refuse)
		case mgmt != (tc.who == "management"):
			t.Errorf("%s, %s: management %v", tc.who, tc.c, mgmt)
		}
	}

	// With ACLs off everyone may call everything, and no one is
	// management: the API's limits apply to all alike.
	c := newTestCluster(t)
	open := c.start("s1", 1)
	c.waitForLeader()
	if mgmt, err := open.Authenticate(ctx, "X.Y", "", wrpc.CapOperatorWrite); err != nil || mgmt {
		t.Fatalf("ACLs off: %v, management %v", err, mgmt)
	}
}

// A flood of requests with tokens a follower does not know costs the
// leader one question per round, whatever their number: a follower asks
// how far the leader has applied, once for every request then waiting,
// and then looks the tokens up itself. A token created a moment ago, on
// the leader, is found through a follower at once.
func TestUnknownTokensOnAFollowerShareOneQuestionToTheLeader(t *testing.T) {
	w := newACLWorld(t, 3)
	f := w.c.follower()
	ask := *f.leaderIndex.commit.Load()
	var mu sync.Mutex
	calls, firstBatch := 0, 0
	hold := make(chan struct{})
	counted := commitFunc[struct{}, uint64](func(batch []struct{}) ([]uint64, error) {
		mu.Lock()
		calls++
		first := calls == 1
		if first {
			firstBatch = len(batch)
		}
		mu.Unlock()
		if first {
			<-hold // every other request queues meanwhile
		}
		return ask(batch)
	})
	f.leaderIndex.commit.Store(&counted)
	callsNow := func() int {
		mu.Lock()
		defer mu.Unlock()
		return calls
	}

	const flood = 500
	errs := make(chan error, flood)
	for i := range flood {
		go func() {
			_, err := f.Authenticate(context.Background(), "App.List", fmt.Sprintf("random-%d", i), wrpc.CapQueueRead)
			errs <- err
		}()
	}
	testutil.WaitFor(t, 10*time.Second, func() bool {
		mu.Lock()
		defer mu.Unlock()
		return calls == 1 && firstBatch+len(f.leaderIndex.in) == flood
	})
	close(hold)
	for range flood {
		if err := <-errs; !errors.Is(err, wrpc.ErrPermissionDenied) || !strings.Contains(err.Error(), "ACL token not found") {
			t.Fatalf("a random token: %v", err)
		}
	}
	if n := callsNow(); n != 2 {
		t.Fatalf("%d unknown tokens asked the leader %d times, want 2 (the first, and one for all the others)", flood, n)
	}

	// A token made on the leader this instant works through the follower.
	var tok wrpc.ACLTokenResponse
	if err := w.mgmt.call(w.c.leader(), "ACL.TokenCreate", &wrpc.ACLTokenCreateRequest{Name: "fresh", Type: "management"}, &tok); err != nil {
		t.Fatal(err)
	}
	if mgmt, err := f.Authenticate(context.Background(), "App.List", tok.Token.SecretID, wrpc.CapQueueRead); err != nil || !mgmt {
		t.Fatalf("a fresh management token through a follower: %v, management %v", err, mgmt)
	}
}
