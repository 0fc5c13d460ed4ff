package httpapi

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/weft-sched/weft/internal/testutil"
	"github.com/weft-sched/weft/rpc"
)

// countingBody is a request body that counts what is read of it, and
// whose reads wait for release when it is set.
type countingBody struct {
	r       io.Reader
	read    atomic.Int64
	release chan struct{}
}

func (b *countingBody) Read(p []byte) (int, error) {
	if b.release != nil {
		<-b.release
	}
	n, err := b.r.Read(p)
	b.read.Add(int64(n))
	return n, err
}

func newCountingBody(n int) *countingBody {
	return &countingBody{r: bytes.NewReader(bytes.Repeat([]byte("x"), n))}
}

// A caller whose token cannot pass a route is refused before a byte of
// its body is read and before it takes a slot or budget: an anonymous 8
// MiB queue file costs the server its headers, nothing more. So does a
// body past the route's cap, whoever sends it.
func TestBodiesAreReadOnlyAfterTheTokenAndWithinTheCap(t *testing.T) {
	ta := newTestAPI(t, apiOpts{acl: true})
	mgmt := ta.token
	alice := ta.makeToken("alice", `queue "root.default" { policy = "submit" }`)
	reader := ta.makeToken("reader", `queue "root" { policy = "read" }`)
	const big = 8 << 20
	for _, tc := range []struct {
		who, token, method, path string
		size                     int
		status                   int
		want                     string
	}{
		{"anonymous", "", "PUT", "/v1/queues", big, 403, "lacks operator:write (over HTTP, send the token"},
		{"anonymous", "", "POST", "/v1/apps", big, 403, "the anonymous caller (no ACL token given: set -token or WEFT_TOKEN) lacks submit on any queue"},
		{"a random token", "not-a-token", "POST", "/v1/apps", big, 403, "ACL token not found"},
		{"alice", alice, "PUT", "/v1/queues", big, 403, `token "alice" lacks operator:write`},
		{"a reader", reader, "POST", "/v1/apps", big, 403, `token "reader" lacks submit on any queue`},
		{"anonymous", "", "POST", "/v1/node/n1/drain", big, 403, "lacks node:write"},
		{"management", mgmt, "PUT", "/v1/queues", MaxQueueConfigBody + 1, 413, fmt.Sprintf("larger than %d bytes", MaxQueueConfigBody)},
		{"management", mgmt, "POST", "/v1/apps", MaxAppSpecBody + 1, 413, fmt.Sprintf("larger than %d bytes", MaxAppSpecBody)},
		{"management", mgmt, "POST", "/v1/node/n1/drain", MaxDrainBody + 1, 413, "larger than"},
		{"management", mgmt, "GET", "/v1/apps", 10, 413, "GET /v1/apps takes no request body"},
	} {
		ta.token = tc.token
		body := newCountingBody(tc.size)
		rec := ta.serve(tc.method, tc.path, body, int64(tc.size), "192.0.2.1:1000")
		var e errorBody
		json.Unmarshal(rec.Body.Bytes(), &e)
		if rec.Code != tc.status || !strings.Contains(e.Error, tc.want) {
			t.Errorf("%s %s by %s: %d %q, want %d holding %q", tc.method, tc.path, tc.who, rec.Code, e.Error, tc.status, tc.want)
		}
		if n := body.read.Load(); n != 0 {
			t.Errorf("%s %s by %s: %d bytes of the body were read", tc.method, tc.path, tc.who, n)
		}
		if rec.Header().Get("Connection") != "close" {
			t.Errorf("%s %s by %s: the connection stays open, to be read past the refusal", tc.method, tc.path, tc.who)
		}
	}
	if n := ta.inFlight(); n != 0 {
		t.Errorf("%d requests still in flight", n)
	}
	if hw := ta.api.bodies.high() + ta.api.mgmtBodies.high(); hw != 0 {
		t.Errorf("refused requests reserved %d bytes of budget", hw)
	}

	// A body sent in chunks (no length declared) is read up to the cap.
	ta.token = mgmt
	body := newCountingBody(2 * MaxQueueConfigBody)
	rec := ta.serve("PUT", "/v1/queues", body, -1, "192.0.2.1:1000")
	if rec.Code != 413 || body.read.Load() > MaxQueueConfigBody+64<<10 {
		t.Errorf("a chunked body past the cap: %d, %d bytes read", rec.Code, body.read.Load())
	}

	// Over a real connection the refusal reaches the client, which was
	// still sending.
	ta.token = ""
	a := ta.do("PUT", "/v1/queues", bytes.Repeat([]byte("queue \"root\" {}\n"), big/16))
	a.errorIs(t, 403, "lacks operator:write")
}

// The requests in flight are counted per source address after the token
// is checked: one source's held requests refuse that source only, and a
// management token has slots of its own, which nobody else's use takes.
func TestRequestsInFlightArePerSourceAndManagementIsNeverStarved(t *testing.T) {
	ta := newTestAPI(t, apiOpts{acl: true, limits: Limits{MaxInflightPerSource: 3, MaxInflightManagement: 2}})
	mgmt := ta.token
	alice := ta.makeToken("alice", `queue "root" { policy = "read" }`)
	ta.token = alice
	first := ta.serve("GET", "/v1/apps", nil, 0, "192.0.2.1:1")
	index := first.Header().Get(HeaderIndex)
	held := make(chan int, 3)
	for i := range 3 {
		go func() {
			held <- ta.serve("GET", "/v1/apps?index="+index+"&wait=1m", nil, 0, fmt.Sprintf("192.0.2.1:%d", 10+i)).Code
		}()
	}
	testutilWait(t, func() bool { return ta.inFlight() == 3 })

	// 256 anonymous requests from that source, and from another, are
	// refused by their token, never by the slots.
	ta.token = ""
	for i := range 256 {
		if rec := ta.serve("GET", "/v1/apps", nil, 0, fmt.Sprintf("192.0.2.%d:2", 1+i%2)); rec.Code != 403 {
			t.Fatalf("anonymous request %d: %d %s", i, rec.Code, rec.Body)
		}
	}
	ta.token = alice
	rec := ta.serve("GET", "/v1/apps", nil, 0, "192.0.2.1:3")
	if rec.Code != 429 || !strings.Contains(rec.Body.String(), "more than 3 requests in flight from 192.0.2.1") || rec.Header().Get("Retry-After") == "" {
		t.Fatalf("a fourth request from the busy source: %d %s", rec.Code, rec.Body)
	}
	if rec := ta.serve("GET", "/v1/apps", nil, 0, "192.0.2.2:3"); rec.Code != 200 {
		t.Fatalf("another source: %d %s", rec.Code, rec.Body)
	}
	ta.token = mgmt
	if rec := ta.serve("GET", "/v1/status", nil, 0, "192.0.2.1:4"); rec.Code != 200 {
		t.Fatalf("the management token from the busy source: %d %s", rec.Code, rec.Body)
	}
	// IPv6 sources are counted by /64.
	if a, b := sourceOf("[2001:db8::1]:1"), sourceOf("[2001:db8::ffff]:2"); a != b || a == sourceOf("[2001:db8:0:1::1]:1") {
		t.Fatalf("IPv6 sources %v %v", a, b)
	}

	// Wake the held queries with a change made past the API.
	ta.submit(1, "true")
	for range 3 {
		if code := <-held; code != 200 {
			t.Fatalf("a held query answered %d", code)
		}
	}
}

// A body's cost is reserved from the byte budget before it is read: what
// the bodies being read may cost together never passes the budget, one
// more is answered 503, and a management token's have a budget of their
// own.
func TestBodiesBeingReadShareABudget(t *testing.T) {
	one := appSpecCost(64 << 10)
	ta := newTestAPI(t, apiOpts{acl: true, limits: Limits{BodyBudget: 2 * one, BodyBudgetPerSource: 2 * one}})
	mgmt := ta.token
	alice := ta.makeToken("alice", `queue "root.default" { policy = "submit" }`)
	ta.token = alice
	release := make(chan struct{})
	done := make(chan int, 2)
	for i := range 2 {
		body := newCountingBody(64 << 10)
		body.release = release
		go func() {
			done <- ta.serve("POST", "/v1/apps", body, 64<<10, fmt.Sprintf("192.0.2.%d:1", 1+i)).Code
		}()
	}
	testutilWait(t, func() bool { return ta.inFlight() == 2 })
	rec := ta.serve("POST", "/v1/apps", newCountingBody(64<<10), 64<<10, "192.0.2.3:1")
	if rec.Code != 503 || !strings.Contains(rec.Body.String(), "memory budget") || rec.Header().Get("Retry-After") == "" {
		t.Fatalf("a third body past the budget: %d %s", rec.Code, rec.Body)
	}
	ta.token = mgmt
	spec := []byte(`{"dshell": {"command": ["true"]}}`)
	if rec := ta.serve("POST", "/v1/apps", bytes.NewReader(spec), int64(len(spec)), "192.0.2.3:2"); rec.Code != 200 {
		t.Fatalf("the management token's body: %d %s", rec.Code, rec.Body)
	}
	close(release)
	for range 2 {
		if code := <-done; code != 400 { // x's: not JSON
			t.Fatalf("a held body answered %d", code)
		}
	}
	if hw := ta.api.bodies.high(); hw > 2*one || hw < 2*one {
		t.Fatalf("the budget's high-water mark is %d, want exactly the two bodies' %d", hw, 2*one)
	}
}

// HEAD answers every GET route as GET does, without the body.
func TestHEADAnswersEveryGETRoute(t *testing.T) {
	ta := newTestAPI(t, apiOpts{agents: 1})
	id := ta.submit(1, "echo", "hi")
	ta.waitApp(id)
	var ctrs []rpc.ContainerInfo
	ta.do("GET", "/v1/app/"+id+"/containers", nil).mustJSON(t, 200, &ctrs)
	values := map[string]string{"{id}": id, "{name}": "root.default", "{profile}": "heap"}
	for _, rt := range serverRoutes {
		if rt.method != "GET" {
			continue
		}
		path := rt.path
		switch {
		case strings.HasPrefix(path, "/v1/node/"):
			path = strings.Replace(path, "{id}", "n1", 1)
		case strings.HasPrefix(path, "/v1/container/"):
			path = strings.Replace(path, "{id}", ctrs[0].ID, 1) + "?follow=true"
		}
		for k, v := range values {
			path = strings.Replace(path, k, v, 1)
		}
		get, head := ta.do("GET", path, nil), ta.do("HEAD", path, nil)
		if get.code != head.code || len(head.body) != 0 {
			t.Errorf("HEAD %s: %d with %d bytes; GET: %d", path, head.code, len(head.body), get.code)
		}
		for _, h := range []string{"Content-Type", HeaderIndex, HeaderLogDone} {
			if get.header.Get(h) != head.header.Get(h) && h != HeaderIndex {
				t.Errorf("HEAD %s: %s %q, GET %q", path, h, head.header.Get(h), get.header.Get(h))
			}
		}
		if (get.header.Get(HeaderIndex) == "") != (head.header.Get(HeaderIndex) == "") {
			t.Errorf("HEAD %s: index %q, GET %q", path, head.header.Get(HeaderIndex), get.header.Get(HeaderIndex))
		}
	}
	ta.do("HEAD", "/v1/nope", nil).mustJSON(t, 404, nil)
	if a := ta.do("HEAD", "/v1/queues", nil); a.code != 200 {
		t.Fatalf("HEAD of a path served by GET and PUT: %d", a.code)
	}
}

// A source holding its limit of connections has more closed as soon as
// they are accepted; another source is served, and a closed connection
// frees its place.
func TestConnectionsPastTheSourceLimitAreClosed(t *testing.T) {
	raw, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ln := newSourceLimit(raw, 2)
	defer ln.Close()
	accepted := make(chan net.Conn, 8)
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			accepted <- c
		}
	}()
	dial := func(from string) net.Conn {
		d := net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(from)}}
		c, err := d.Dial("tcp", raw.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		return c
	}
	closed := func(c net.Conn) bool {
		c.SetReadDeadline(time.Now().Add(5 * time.Second))
		_, err := c.Read(make([]byte, 1))
		return err == io.EOF
	}
	a1, _ := dial("127.0.0.1"), dial("127.0.0.1")
	first := <-accepted
	<-accepted
	third := dial("127.0.0.1")
	if !closed(third) {
		t.Fatal("a third connection from one source stays open")
	}
	dial("127.0.0.2")
	select {
	case <-accepted:
	case <-time.After(5 * time.Second):
		t.Fatal("another source's connection was not accepted")
	}
	first.Close()
	a1.Close()
	testutil.WaitFor(t, 5*time.Second, func() bool {
		dial("127.0.0.1")
		select {
		case <-accepted:
			return true
		case <-time.After(100 * time.Millisecond):
			return false
		}
	})
}
