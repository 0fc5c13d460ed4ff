package httpapi

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/weft-sched/weft/agent"
	"github.com/weft-sched/weft/internal/testutil"
	"github.com/weft-sched/weft/rpc"
	"github.com/weft-sched/weft/scheduler"
	"github.com/weft-sched/weft/server"
)

// weftBin is a weft binary built for the AM containers these tests launch.
var weftBin string

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "weft-httpapi-test-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	if weftBin, err = testutil.BuildWeft(dir); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

// testAPI is one in-process server (with agents if asked) and its HTTP
// API on an httptest server.
type testAPI struct {
	t      *testing.T
	srv    *server.Server
	agents []*agent.Agent
	api    *api
	h      http.Handler
	url    string
	// token is sent with every request of do when not empty.
	token string
}

type apiOpts struct {
	acl    bool
	agents int
	limits Limits
}

func newTestAPI(t *testing.T, o apiOpts) *testAPI {
	t.Helper()
	logger, _ := testutil.Logger(t, hclog.Info)
	srv, err := server.New(&server.Config{NodeID: "s1", DataDir: t.TempDir(), RPCPort: -1, SerfPort: -1,
		BootstrapExpect: 1, SerfFastGossip: true, ACLEnabled: o.acl, Logger: logger.Named("s1")})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { srv.Shutdown() })
	ta := &testAPI{t: t, srv: srv}
	var joinToken string
	if o.acl {
		var resp rpc.ACLTokenResponse
		testutil.WaitForNoError(t, 15*time.Second, "ACL bootstrap", func() error {
			return srv.Call(context.Background(), "ACL.Bootstrap", &rpc.ACLBootstrapRequest{}, &resp)
		})
		ta.token = resp.Token.SecretID
		var jt rpc.JoinTokenCreateResponse // with ACLs on, new nodes need one
		testutil.WaitForNoError(t, 15*time.Second, "a node-join token", func() error {
			return srv.Call(context.Background(), "Node.JoinTokenCreate", &rpc.JoinTokenCreateRequest{RequestHeader: rpc.RequestHeader{AuthToken: ta.token}}, &jt)
		})
		joinToken = jt.Token
	}
	for i := 1; i <= o.agents; i++ {
		a, err := agent.New(&agent.Config{NodeID: fmt.Sprintf("n%d", i), DataDir: t.TempDir(), RPCPort: -1, SerfPort: -1,
			Join: []string{srv.SerfAddr()}, Resources: scheduler.Resources{MemoryMB: 2048, Vcores: 4},
			OpportunisticQueueLength: -1, SerfFastGossip: true, Executable: weftBin, KillGrace: time.Second,
			AllowRoot: true, JoinToken: joinToken, Logger: logger.Named(fmt.Sprintf("n%d", i))})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { a.Shutdown() })
		ta.agents = append(ta.agents, a)
	}
	ta.api = newAPI(srv, srv.Authenticate, logger.Named("http"), o.limits)
	ta.api.metrics = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "weft_up 1\n") })
	ta.api.ui = http.StripPrefix("/ui/", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "ui:"+r.URL.Path) }))
	ta.h = ta.api.handler(serverRoutes)
	hs := httptest.NewServer(ta.h)
	t.Cleanup(hs.Close)
	ta.url = hs.URL
	testutil.WaitForNoError(t, 15*time.Second, "a leader and the agents registered", func() error {
		var nodes []rpc.NodeInfo
		if code, err := ta.get("/v1/nodes", &nodes); err != nil || code != 200 {
			return fmt.Errorf("GET /v1/nodes: %d %v", code, err)
		}
		if len(nodes) != o.agents {
			return fmt.Errorf("%d nodes", len(nodes))
		}
		return nil
	})
	return ta
}

// answer is one HTTP answer, read whole.
type answer struct {
	code   int
	header http.Header
	body   []byte
}

// do sends one request (with the test's token) and reads the answer.
func (ta *testAPI) do(method, path string, body []byte, header ...string) answer {
	ta.t.Helper()
	req, err := http.NewRequest(method, ta.url+path, bytes.NewReader(body))
	if err != nil {
		ta.t.Fatal(err)
	}
	if ta.token != "" {
		req.Header.Set(HeaderToken, ta.token)
	}
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		ta.t.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		ta.t.Fatalf("%s %s: reading the answer: %v", method, path, err)
	}
	return answer{code: resp.StatusCode, header: resp.Header, body: b}
}

// get GETs path into out (when the answer is 200), returning the status.
func (ta *testAPI) get(path string, out any) (int, error) {
	a := ta.do("GET", path, nil)
	if a.code != 200 {
		return a.code, fmt.Errorf("%s", a.body)
	}
	return a.code, json.Unmarshal(a.body, out)
}

// mustJSON checks the answer's status and decodes its body into out.
func (a answer) mustJSON(t *testing.T, code int, out any) {
	t.Helper()
	if a.code != code {
		t.Fatalf("status %d, want %d: %s", a.code, code, a.body)
	}
	if ct := a.header.Get("Content-Type"); ct != "application/json" {
		t.Fatalf("Content-Type %q", ct)
	}
	if out != nil {
		if err := json.Unmarshal(a.body, out); err != nil {
			t.Fatalf("decode %s: %v", a.body, err)
		}
	}
}

// errorIs checks an error answer: status code and a message holding want.
func (a answer) errorIs(t *testing.T, code int, want string) {
	t.Helper()
	var e errorBody
	a.mustJSON(t, code, &e)
	if !strings.Contains(e.Error, want) || strings.Contains(e.Error, "\n") {
		t.Fatalf("error %q, want one line holding %q", e.Error, want)
	}
}

// submit submits an app that runs cmd in n containers and returns its ID.
func (ta *testAPI) submit(n int, cmd ...string) string {
	ta.t.Helper()
	spec := map[string]any{"name": "t", "dshell": map[string]any{"command": cmd, "num_containers": n,
		"resources": map[string]int{"memory_mb": 64, "vcores": 1}}}
	if ta.token == "" {
		spec["user"] = "tester"
	}
	body, _ := json.Marshal(spec)
	var resp rpc.AppSubmitResponse
	ta.do("POST", "/v1/apps", body).mustJSON(ta.t, 200, &resp)
	if resp.AppID == "" {
		ta.t.Fatal("submit answered no app ID")
	}
	return resp.AppID
}

// waitApp follows an app with blocking queries until it ends.
func (ta *testAPI) waitApp(id string) rpc.AppInfo {
	ta.t.Helper()
	index := "0"
	for range 60 {
		a := ta.do("GET", "/v1/app/"+id+"?index="+index+"&wait=5s", nil)
		var app rpc.AppInfo
		a.mustJSON(ta.t, 200, &app)
		if scheduler.AppState(app.State).Terminal() {
			return app
		}
		index = a.header.Get(HeaderIndex)
	}
	ta.t.Fatalf("app %s did not end", id)
	return rpc.AppInfo{}
}

func testutilWait(t *testing.T, cond func() bool) {
	t.Helper()
	testutil.WaitFor(t, 30*time.Second, cond)
}

// inFlight is how many requests the API is serving.
func (ta *testAPI) inFlight() int {
	all, _ := ta.api.slots.counts()
	return all
}

// serve hands one request to the API's handler in process, as if from
// remote ("IP:port"), with body as its body (declaring length bytes; -1
// for none declared), and returns the answer.
func (ta *testAPI) serve(method, path string, body io.Reader, length int64, remote string, header ...string) *httptest.ResponseRecorder {
	req := httptest.NewRequest(method, path, body)
	req.ContentLength, req.RemoteAddr = length, remote
	if body == nil {
		req.Body = http.NoBody
	}
	if ta.token != "" {
		req.Header.Set(HeaderToken, ta.token)
	}
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	rec := httptest.NewRecorder()
	ta.h.ServeHTTP(rec, req)
	return rec
}

// makeToken creates a token of one policy holding rules, with the
// test's (management) token.
func (ta *testAPI) makeToken(name, rules string) string {
	ta.t.Helper()
	hdr := rpc.RequestHeader{AuthToken: ta.token}
	if err := ta.srv.Call(context.Background(), "ACL.PolicyApply", &rpc.ACLPolicyApplyRequest{RequestHeader: hdr,
		Policy: rpc.ACLPolicy{Name: name, Rules: rules}}, &rpc.WriteResponse{}); err != nil {
		ta.t.Fatal(err)
	}
	var tok rpc.ACLTokenResponse
	if err := ta.srv.Call(context.Background(), "ACL.TokenCreate", &rpc.ACLTokenCreateRequest{RequestHeader: hdr,
		Name: name, Type: "client", Policies: []string{name}}, &tok); err != nil {
		ta.t.Fatal(err)
	}
	return tok.Token.SecretID
}
