package e2e

import (
	"bufio"
	"context"
	"fmt"
	"net"
	"net/http"
	"net/rpc"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hashicorp/yamux"
	"github.com/weft-sched/weft/internal/tlsutil"
	wrpc "github.com/weft-sched/weft/rpc"
)

// The blocking-query flood of issue 26, on real processes: a client
// certificate with no token, and one with a valid low-privilege token,
// send 25,000 blocking App.List calls through a follower of a secure
// cluster. Before, the follower forwarded every one to the leader, past
// its connection limit there: 50,000 goroutines, 745 MiB and up to 186%
// CPU on the follower, 12,000 waiting queries on the leader, which lost
// its leadership.

const (
	// floodConns × floodStreams is the flood: 100 connections (the
	// servers' per-address limit) of 250 streams each (below the 256 a
	// connection may carry), one blocking call on each stream.
	floodConns   = 100
	floodStreams = 250
	// floodSource is the attacker's address: neither a server's nor an
	// agent's, as an attacker on another host would be.
	floodSource = "127.0.0.20"
	// maxServerRSS bounds every server's peak resident memory (VmHWM).
	maxServerRSS = 600 << 20
	// answerWithin bounds `weft status` and /v1/health during and right
	// after the flood.
	answerWithin = 2 * time.Second
	// idleHandlers is how many idle handler goroutines an RPC server keeps
	// (rpc.maxIdleHandlers).
	idleHandlers = 512
)

func TestBlockingQueryFloodThroughAFollower(t *testing.T) {
	w := startWorldOn(t, startQuorum(t), 2, nil)
	leader := w.waitForLeader("s1", 30*time.Second, "")
	follower := "s1"
	if leader == follower {
		follower = "s2"
	}
	reader := lowPrivilegeToken(t, w.any())
	term := raftTerm(t, w.rpcAddr(leader))
	httpClient := httpsClient(t, w.sec, "server")
	health := httpURL(t, w.procs[follower]) + "/v1/health"
	metrics := httpURL(t, w.procs[follower]) + "/v1/metrics"
	token := os.Getenv("WEFT_TOKEN")
	before := goroutinesOf(t, httpClient, metrics, token)
	t.Logf("leader %s (term %d), flooding follower %s; its goroutines before: %d", leader, term, follower, before)

	peaks := watchRSS(t, w.procs)
	f := startFlood(t, w.sec, w.rpcAddr(follower), []string{"", reader})
	f.waitSent(t, 2*time.Minute)
	t.Logf("flood sent: %s", f)
	during := goroutinesOf(t, httpClient, metrics, token)
	t.Logf("follower goroutines during the flood: %d", during)
	for _, id := range []string{"s1", "s2", "s3"} {
		answersWithin(t, answerWithin, "weft status via "+id, func(ctx context.Context) error {
			return statusVia(ctx, w.rpcAddr(id))
		})
	}
	answersWithin(t, answerWithin, "/v1/health of the follower", func(ctx context.Context) error {
		return healthy(ctx, httpClient, health)
	})

	f.stop()
	stopped := time.Now()
	answersWithin(t, answerWithin, "weft status via the follower right after the flood", func(ctx context.Context) error {
		return statusVia(ctx, w.rpcAddr(follower))
	})
	answersWithin(t, answerWithin, "/v1/health of the follower right after the flood", func(ctx context.Context) error {
		return healthy(ctx, httpClient, health)
	})
	// What the flood held ends with its connections: right after, what is
	// left is the RPC server's idle handler goroutines (at most
	// idleHandlers, each gone after 30 s idle).
	var after int
	waitFor(t, 10*time.Second, "the follower's goroutines to come back down", func() error {
		after = goroutinesOf(t, httpClient, metrics, token)
		if after > before+idleHandlers+100 {
			return fmt.Errorf("%d goroutines (%d before the flood)", after, before)
		}
		return nil
	})
	t.Logf("follower goroutines down to %d, %s after the flood", after, time.Since(stopped).Round(100*time.Millisecond))
	waitFor(t, 90*time.Second, "the follower's idle goroutines to go", func() error {
		after = goroutinesOf(t, httpClient, metrics, token)
		if after > before+100 {
			return fmt.Errorf("%d goroutines (%d before the flood)", after, before)
		}
		return nil
	})
	t.Logf("follower goroutines back to %d, %s after the flood", after, time.Since(stopped).Round(100*time.Millisecond))

	if got := raftTerm(t, w.rpcAddr(leader)); got != term {
		t.Errorf("Raft term went from %d to %d during the flood: the leader lost leadership", term, got)
	}
	if now := w.waitForLeader(follower, 30*time.Second, ""); now != leader {
		t.Errorf("leader went from %s to %s", leader, now)
	}
	for _, n := range w.nodes(leader) {
		if n.Status != "READY" {
			t.Errorf("node %s is %s after the flood; its heartbeats were starved", n.ID, n.Status)
		}
	}
	for id, peak := range peaks.stop() {
		t.Logf("%s peak RSS %d MiB", id, peak>>20)
		if peak > maxServerRSS {
			t.Errorf("%s peaked at %d MiB resident, above %d MiB", id, peak>>20, maxServerRSS>>20)
		}
	}
	// The anonymous half is refused before it waits or is forwarded; the
	// low-privilege token's is bounded per address and per token.
	if f.denied.Load() == 0 || f.rateLimited.Load() == 0 {
		t.Errorf("the flood was not refused as it should be (anonymous calls denied, the rest past the bounds rate_limited): %s", f)
	}
}

// lowPrivilegeToken makes a token that may read one queue and nothing
// else, and returns its secret.
func lowPrivilegeToken(t *testing.T, addr string) string {
	t.Helper()
	policy := filepath.Join(t.TempDir(), "reader.hcl")
	if err := os.WriteFile(policy, []byte("queue \"root.a\" {\n  policy = \"read\"\n}\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, errOut, code := cli(t, "acl", "policy", "apply", "-address", addr, "reader", policy); code != 0 {
		t.Fatalf("acl policy apply: %s", errOut)
	}
	var tok struct {
		SecretID string `json:"secret_id"`
	}
	if err := cliJSON(t, &tok, "acl", "token", "create", "-address", addr, "-name", "reader", "-policy", "reader"); err != nil {
		t.Fatal(err)
	}
	return tok.SecretID
}

// raftTerm is the Raft term the server at addr is in.
func raftTerm(t *testing.T, addr string) uint64 {
	t.Helper()
	var st struct {
		Raft struct {
			Term uint64 `json:"term"`
		} `json:"raft"`
	}
	if err := cliJSON(t, &st, "status", "-stale", "-address", addr); err != nil {
		t.Fatal(err)
	}
	return st.Raft.Term
}

// statusVia runs `weft status` against one server until ctx ends.
func statusVia(ctx context.Context, addr string) error {
	cmd := exec.CommandContext(ctx, weftBin, "status", "-address", addr)
	cmd.Env = append(os.Environ(), "WEFT_ADDR=")
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("%v: %s", err, strings.TrimSpace(string(out)))
	}
	return nil
}

// healthy GETs a /v1/health page until ctx ends.
func healthy(ctx context.Context, c *http.Client, url string) error {
	req, err := http.NewRequestWithContext(ctx, "GET", url, nil)
	if err != nil {
		return err
	}
	resp, err := c.Do(req)
	if err != nil {
		return err
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("%s answered %d", url, resp.StatusCode)
	}
	return nil
}

// answersWithin fails the test unless call succeeds before within passes.
func answersWithin(t *testing.T, within time.Duration, what string, call func(context.Context) error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), within)
	defer cancel()
	start := time.Now()
	if err := call(ctx); err != nil {
		t.Errorf("%s did not answer within %s: %v", what, within, err)
		return
	}
	t.Logf("%s answered in %s", what, time.Since(start).Round(time.Millisecond))
}

// goroutinesOf reads go_goroutines from a server's metrics.
func goroutinesOf(t *testing.T, c *http.Client, url, token string) int {
	t.Helper()
	n, ok := series(scrape(t, c, url, token), "go_goroutines", nil)
	if !ok {
		t.Fatalf("%s has no go_goroutines", url)
	}
	return int(n)
}

// rssWatch samples the resident memory of processes until stopped.
type rssWatch struct {
	procs map[string]*proc
	stopc chan struct{}
	done  chan map[string]int64
}

// watchRSS follows the servers' VmHWM (peak resident set) from now on.
func watchRSS(t *testing.T, procs map[string]*proc) *rssWatch {
	w := &rssWatch{procs: procs, stopc: make(chan struct{}), done: make(chan map[string]int64, 1)}
	go func() {
		peaks := map[string]int64{}
		tick := time.NewTicker(100 * time.Millisecond)
		defer tick.Stop()
		for {
			for id, p := range procs {
				if p.cmd.Process == nil {
					continue
				}
				if v := procStatus(p.cmd.Process.Pid, "VmHWM"); v > peaks[id] {
					peaks[id] = v
				}
			}
			select {
			case <-tick.C:
			case <-w.stopc:
				w.done <- peaks
				return
			}
		}
	}()
	t.Cleanup(func() {
		select {
		case <-w.stopc:
		default:
			w.stop()
		}
	})
	return w
}

func (w *rssWatch) stop() map[string]int64 {
	close(w.stopc)
	return <-w.done
}

// procStatus reads a "kB" field of /proc/PID/status, in bytes.
func procStatus(pid int, field string) int64 {
	f, err := os.Open(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0
	}
	defer f.Close()
	s := bufio.NewScanner(f)
	for s.Scan() {
		if v, ok := strings.CutPrefix(s.Text(), field+":"); ok {
			kb, _ := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
			return kb << 10
		}
	}
	return 0
}

// flood is floodConns connections from floodSource, each carrying
// floodStreams blocking App.List calls at once, the tokens taking turns.
type flood struct {
	sessions []*yamux.Session
	wg       sync.WaitGroup
	sent     atomic.Int64
	// Answers by kind; calls still waiting are sent minus all of them.
	rateLimited, denied, answered, failed atomic.Int64
	failures                              sync.Map // code → an example message
}

func startFlood(t *testing.T, sec *security, addr string, tokens []string) *flood {
	t.Helper()
	tc, err := tlsutil.New(sec.file("weft-agent-ca.pem"), sec.file("global-client-weft.pem"), sec.file("global-client-weft-key.pem"), "global")
	if err != nil {
		t.Fatal(err)
	}
	f := &flood{}
	dialer := net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(floodSource)}, Timeout: 5 * time.Second}
	for i := 0; i < floodConns; i++ {
		raw, err := dialer.Dial("tcp", addr)
		if err != nil {
			t.Fatalf("flood connection %d: %v", i, err)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		conn, err := wrpc.ClientHandshake(ctx, raw, tc, wrpc.RoleServer, wrpc.ConnMultiplex)
		cancel()
		if err != nil {
			t.Fatalf("flood connection %d: %v", i, err)
		}
		session, err := yamux.Client(conn, wrpc.YamuxConfig())
		if err != nil {
			t.Fatal(err)
		}
		f.sessions = append(f.sessions, session)
		for j := 0; j < floodStreams; j++ {
			token := tokens[(i*floodStreams+j)%len(tokens)]
			f.wg.Add(1)
			go f.call(session, token)
		}
	}
	t.Cleanup(f.stop)
	return f
}

// call sends one blocking App.List on a stream of its own and waits for
// the answer.
func (f *flood) call(session *yamux.Session, token string) {
	defer f.wg.Done()
	stream, err := session.Open()
	if err != nil {
		f.fail("open", err)
		return
	}
	defer stream.Close()
	codec := wrpc.NewClientCodec(stream)
	req := &wrpc.AppListRequest{RequestHeader: wrpc.RequestHeader{AuthToken: token, MinQueryIndex: 1 << 40, MaxWait: wrpc.MaxBlockingWait}}
	if err := codec.WriteRequest(&rpc.Request{ServiceMethod: "App.List", Seq: 1}, req); err != nil {
		f.fail("write", err)
		return
	}
	f.sent.Add(1)
	var resp rpc.Response
	if err := codec.ReadResponseHeader(&resp); err != nil {
		f.fail("read", err)
		return
	}
	codec.ReadResponseBody(nil)
	switch {
	case resp.Error == "":
		f.answered.Add(1)
	case strings.HasPrefix(resp.Error, "[rate_limited]"):
		f.rateLimited.Add(1)
	case strings.HasPrefix(resp.Error, "[permission_denied]"):
		f.denied.Add(1)
	default:
		f.fail("answer", fmt.Errorf("%s", resp.Error))
	}
}

func (f *flood) fail(what string, err error) {
	f.failed.Add(1)
	f.failures.LoadOrStore(what, err.Error())
}

// waitSent waits until every call of the flood has been sent (or has
// failed to be).
func (f *flood) waitSent(t *testing.T, timeout time.Duration) {
	t.Helper()
	waitFor(t, timeout, "the flood to be sent", func() error {
		if n := f.sent.Load() + f.failed.Load(); n < floodConns*floodStreams {
			return fmt.Errorf("%d of %d sent", n, floodConns*floodStreams)
		}
		return nil
	})
}

// stop ends the flood: every connection closes.
func (f *flood) stop() {
	for _, s := range f.sessions {
		s.Close()
	}
	f.wg.Wait()
}

func (f *flood) String() string {
	var failures []string
	f.failures.Range(func(k, v any) bool {
		failures = append(failures, fmt.Sprintf("%s: %s", k, v))
		return true
	})
	return fmt.Sprintf("%d sent: %d rate_limited, %d denied, %d answered, %d failed %v", f.sent.Load(), f.rateLimited.Load(),
		f.denied.Load(), f.answered.Load(), f.failed.Load(), failures)
}
