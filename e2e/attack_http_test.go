package e2e

import (
	"bufio"
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// The HTTP API attacked as the second attack report did, on a secure
// cluster made as the README makes one (TLS, gossip key, ACLs), with
// tokens alice (submit on root.a) and bob (submit on root.b): anonymous
// big bodies, held requests, one tenant's flood of blocking queries,
// random tokens at a follower, and probes for other users' apps. After
// each attack: every server's peak RSS (VmHWM) under 600 MB, the leader
// unchanged, `weft status` and /v1/health answering within 2 s (a deadline
// on the call), and nothing applied that should not have been.
func TestHTTPAttacksAreBounded(t *testing.T) {
	a := startAttackWorld(t)

	t.Run("anonymous big bodies", func(t *testing.T) {
		queues, apps := a.queueNames(), a.appCount()
		// 8 MiB of what HCL's parser pays most for, and a 6.7 MB spec.
		hcl := bytes.Repeat([]byte("a=1\n"), 2<<20)
		spec := append(append([]byte(`{"x":[`), bytes.Repeat([]byte("0,"), 3_350_000)...), "0]}"...)
		leader, follower := a.httpURL(a.leader), a.httpURL(a.follower())
		stop := a.sampleRSS(t)
		if code, err := a.send(a.client("127.0.0.50"), "PUT", leader+"/v1/queues", hcl, ""); code != 403 {
			t.Errorf("an anonymous 8 MiB queue file: %d %v, want 403", code, err)
		}
		var wg sync.WaitGroup
		for range 3 {
			wg.Go(func() {
				if code, err := a.send(a.client("127.0.0.50"), "PUT", leader+"/v1/queues", hcl, ""); code != 403 {
					t.Errorf("three anonymous 8 MiB queue files at once: %d %v, want 403", code, err)
				}
			})
		}
		wg.Wait()
		if code, err := a.send(a.client("127.0.0.50"), "POST", follower+"/v1/apps", spec, ""); code != 403 {
			t.Errorf("an anonymous %d-byte spec to a follower: %d %v, want 403", len(spec), code, err)
		}
		// Tokens that pass reach a cap, or a body packed with values is
		// refused by a scan that allocates nothing.
		if code, err := a.send(a.client("127.0.0.50"), "POST", follower+"/v1/apps", spec, a.alice); code != 413 {
			t.Errorf("alice's %d-byte spec: %d %v, want 413", len(spec), code, err)
		}
		packed := append(spec[:4<<20-3:4<<20-3], "0]}"...)
		if code, err := a.send(a.client("127.0.0.50"), "POST", follower+"/v1/apps", packed, a.alice); code != 400 {
			t.Errorf("alice's 4 MiB spec of zeros: %d %v, want 400", code, err)
		}
		if code, err := a.send(a.client("127.0.0.50"), "PUT", leader+"/v1/queues", hcl, a.mgmt); code != 413 {
			t.Errorf("an 8 MiB queue file with the management token: %d %v, want 413", code, err)
		}
		peak := stop()
		a.checkBounds(t, "after the big bodies")
		t.Logf("peak RSS during the big bodies: %s", peak)
		if got := a.queueNames(); got != queues {
			t.Errorf("the queues changed: %s, were %s", got, queues)
		}
		if got := a.appCount(); got != apps {
			t.Errorf("%d apps, were %d", got, apps)
		}
	})

	t.Run("held anonymous requests", func(t *testing.T) {
		// 300 requests that declare a body and never send it, and 300
		// that never finish their headers, from one source.
		stop := a.sampleRSS(t)
		var conns []net.Conn
		for i := range 600 {
			c, err := a.dialTLS("127.0.0.51", a.leader)
			if err != nil {
				continue // closed at once: the source holds its limit of connections
			}
			conns = append(conns, c)
			head := "PUT /v1/queues HTTP/1.1\r\nHost: server.global.weft\r\nContent-Length: 1000000\r\n\r\n"
			if i%2 == 1 {
				head = "PUT /v1/queues HTTP/1.1\r\nHost: server.global.weft\r\n"
			}
			c.SetWriteDeadline(time.Now().Add(time.Second))
			io.WriteString(c, head)
		}
		defer func() {
			for _, c := range conns {
				c.Close()
			}
		}()
		start := time.Now()
		a.mustAnswer(t, a.client("127.0.0.52"), "/v1/status", a.mgmt, 200)
		t.Logf("the management token answered in %s with 600 held requests", time.Since(start).Round(time.Millisecond))
		a.mustAnswer(t, a.client("127.0.0.52"), "/v1/apps", a.alice, 200)
		a.mustAnswer(t, a.client("127.0.0.52"), "/v1/health", "", 200)
		a.checkBounds(t, "with 600 requests held")
		t.Logf("peak RSS during the held requests: %s", stop())
	})

	t.Run("a tenant's flood of blocking queries", func(t *testing.T) {
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		_, h, _ := a.get(a.client("127.0.0.53"), a.httpURL(a.leader)+"/v1/apps", a.alice)
		index := h.Get("X-Weft-Index")
		var flood *http.Client
		// Her queries past her source's limit are refused (429) or their
		// connections closed (past the connections one source may hold):
		// at most 64 stay in flight.
		var ended atomic.Int64
		var wg sync.WaitGroup
		for i := range 300 {
			if i%30 == 0 {
				flood = a.h2Client("127.0.0.53")
			}
			flood := flood
			wg.Go(func() {
				req, _ := http.NewRequestWithContext(ctx, "GET", a.httpURL(a.leader)+"/v1/apps?index="+index+"&wait=5m", nil)
				req.Header.Set("X-Weft-Token", a.alice)
				if resp, err := flood.Do(req); err == nil {
					resp.Body.Close()
				}
				ended.Add(1)
			})
		}
		waitFor(t, 30*time.Second, "alice's queries past her source's limit refused", func() error {
			if n := ended.Load(); n < 300-64 {
				return fmt.Errorf("%d of 300 answered", n)
			}
			return nil
		})
		start := time.Now()
		a.mustAnswer(t, a.h2Client("127.0.0.53"), "/v1/status", a.mgmt, 200) // her source, a management token
		t.Logf("the management token answered in %s from a source holding its limit", time.Since(start).Round(time.Millisecond))
		a.mustAnswer(t, a.client("127.0.0.54"), "/v1/apps", a.bob, 200)
		a.checkBounds(t, "with alice's 300 blocking queries")
		cancel()
		wg.Wait()
	})

	t.Run("random tokens at a follower", func(t *testing.T) {
		f := a.follower()
		before := a.leaderCalls()
		const flood = 2000
		var next atomic.Int64
		var wrong atomic.Int64
		var wg sync.WaitGroup
		stop := a.sampleRSS(t)
		for i := range 64 {
			c := a.client(fmt.Sprintf("127.0.0.%d", 60+i%8))
			wg.Go(func() {
				for next.Add(1) <= flood {
					if code, _, _ := a.get(c, a.httpURL(f)+"/v1/apps", fmt.Sprintf("random-%d-%d", i, next.Load())); code != 403 {
						wrong.Add(1)
					}
				}
			})
		}
		a.mustAnswer(t, a.client("127.0.0.59"), "/v1/status", a.mgmt, 200)
		wg.Wait()
		if n := wrong.Load(); n != 0 {
			t.Errorf("%d random tokens were not refused", n)
		}
		calls := a.leaderCalls() - before
		t.Logf("%d random tokens at a follower cost the leader %d calls; peak RSS %s", flood, calls, stop())
		if calls > flood/2 {
			t.Errorf("%d random tokens at a follower cost the leader %d calls, want far fewer than one each", flood, calls)
		}
		a.checkBounds(t, "after the random tokens")
	})

	t.Run("other users' apps", func(t *testing.T) {
		base := a.httpURL(a.follower())
		c := a.client("127.0.0.56")
		alike := func(what, existing, missing, pathFmt string) {
			t.Helper()
			var answers []string
			for _, id := range []string{existing, missing} {
				code, _, body := a.get(c, base+fmt.Sprintf(pathFmt, id), a.alice)
				answers = append(answers, fmt.Sprintf("%d %s", code, strings.ReplaceAll(string(body), id, "ID")))
			}
			if answers[0] != answers[1] || !strings.HasPrefix(answers[0], "404 ") {
				t.Errorf("alice asks about %s: an existing one answers\n%s\nand a missing one\n%s", what, answers[0], answers[1])
			}
		}
		alike("bob's app", a.bobsApp, "app-999999", "/v1/app/%s")
		alike("bob's app's containers", a.bobsApp, "app-999999", "/v1/app/%s/containers")
		alike("bob's container", a.bobsContainer, "c-999999-0", "/v1/container/%s/logs")
		alike("bob's queue", "root.b", "root.nope", "/v1/queue/%s")
		var cliAnswers []string
		for _, id := range []string{a.bobsApp, "app-999999"} {
			_, stderr, code := cli(t, "app", "status", "-token", a.alice, "-address", a.any(), id)
			cliAnswers = append(cliAnswers, fmt.Sprintf("%d %s", code, strings.ReplaceAll(stderr, id, "ID")))
		}
		if cliAnswers[0] != cliAnswers[1] || !strings.Contains(cliAnswers[0], `not found among the apps token "alice" may read`) {
			t.Errorf("weft app status as alice: bob's app\n%s\nand a missing one\n%s", cliAnswers[0], cliAnswers[1])
		}
		if code, _, body := a.get(c, base+"/v1/app/"+a.bobsApp, a.bob); code != 200 {
			t.Errorf("bob reads his own app: %d %s", code, body)
		}
	})

	t.Run("HEAD", func(t *testing.T) {
		base := a.httpURL(a.leader)
		for _, path := range []string{"/v1/health", "/v1/apps", "/v1/app/" + a.bobsApp, "/v1/queues", "/v1/status"} {
			req, _ := http.NewRequest("HEAD", base+path, nil)
			req.Header.Set("X-Weft-Token", a.mgmt)
			resp, err := a.client("127.0.0.57").Do(req)
			if err != nil {
				t.Fatalf("HEAD %s: %v", path, err)
			}
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode != 200 || len(b) != 0 || resp.Header.Get("Content-Type") != "application/json" {
				t.Errorf("HEAD %s: %d, %d bytes, %q", path, resp.StatusCode, len(b), resp.Header.Get("Content-Type"))
			}
		}
	})
}

// attackWorld is a secure cluster of three servers and one agent, with the
// tokens of the attack report and an app of bob's that ran.
type attackWorld struct {
	*world
	t                      *testing.T
	leader                 string
	mgmt, alice, bob       string
	bobsApp, bobsContainer string
	roots                  *x509.CertPool
	urls                   map[string]string
}

func startAttackWorld(t *testing.T) *attackWorld {
	w := startWorldOn(t, startQuorum(t), 1, nil)
	a := &attackWorld{world: w, t: t, mgmt: os.Getenv("WEFT_TOKEN"), urls: map[string]string{}}
	a.leader = w.waitForLeader("s1", 30*time.Second, "")
	ca, err := os.ReadFile(w.sec.file("weft-agent-ca.pem"))
	if err != nil {
		t.Fatal(err)
	}
	a.roots = x509.NewCertPool()
	a.roots.AppendCertsFromPEM(ca)
	for _, id := range []string{"s1", "s2", "s3"} {
		a.urls[id] = httpURL(t, w.procs[id])
	}

	a.alice, a.bob = tenants(t, w)

	var sub struct {
		AppID string `json:"app_id"`
	}
	if err := cliJSON(t, &sub, "app", "submit", "-token", a.bob, "-queue", "b", "-address", w.any(), "--", "echo", "bob's secret"); err != nil {
		t.Fatal(err)
	}
	a.bobsApp = sub.AppID
	waitFor(t, 60*time.Second, "bob's app to finish", func() error {
		var app appInfo
		if err := cliJSON(t, &app, "app", "status", "-address", w.any(), a.bobsApp); err != nil || app.State != "FINISHED" {
			return fmt.Errorf("%+v %v", app, err)
		}
		return nil
	})
	for _, c := range w.containers(a.bobsApp) {
		if !c.IsAM {
			a.bobsContainer = c.ID
		}
	}
	return a
}

func (a *attackWorld) httpURL(id string) string { return a.urls[id] }

func (a *attackWorld) follower() string {
	for _, id := range []string{"s1", "s2", "s3"} {
		if id != a.leader {
			return id
		}
	}
	return ""
}

// client is an HTTPS client (trusting the CA, no client certificate)
// whose connections come from the loopback address src: another host, to
// the servers.
func (a *attackWorld) client(src string) *http.Client {
	d := &net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(src)}, Timeout: 5 * time.Second}
	return &http.Client{Timeout: time.Minute, Transport: &http.Transport{DialContext: d.DialContext,
		TLSClientConfig: &tls.Config{RootCAs: a.roots, ServerName: "server.global.weft"}}}
}

// h2Client is client over HTTP/2, whose requests share connections.
func (a *attackWorld) h2Client(src string) *http.Client {
	c := a.client(src)
	c.Transport.(*http.Transport).ForceAttemptHTTP2 = true
	return c
}

func (a *attackWorld) dialTLS(src, server string) (net.Conn, error) {
	u := strings.TrimPrefix(a.httpURL(server), "https://")
	d := &net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(src)}, Timeout: 5 * time.Second}
	c, err := tls.DialWithDialer(d, "tcp", u, &tls.Config{RootCAs: a.roots, ServerName: "server.global.weft"})
	if err != nil {
		return nil, err
	}
	return c, nil
}

// send sends body with method to url with token ("" for none) and
// returns the status (0 when the request failed, with why).
func (a *attackWorld) send(c *http.Client, method, url string, body []byte, token string) (int, error) {
	req, err := http.NewRequest(method, url, bytes.NewReader(body))
	if err != nil {
		return 0, err
	}
	if token != "" {
		req.Header.Set("X-Weft-Token", token)
	}
	resp, err := c.Do(req)
	if err != nil {
		return 0, err
	}
	b, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
	resp.Body.Close()
	if resp.StatusCode >= 300 {
		return resp.StatusCode, fmt.Errorf("%s", bytes.TrimSpace(b))
	}
	return resp.StatusCode, nil
}

func (a *attackWorld) get(c *http.Client, url, token string) (int, http.Header, []byte) {
	req, _ := http.NewRequest("GET", url, nil)
	if token != "" {
		req.Header.Set("X-Weft-Token", token)
	}
	resp, err := c.Do(req)
	if err != nil {
		return 0, nil, []byte(err.Error())
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, resp.Header, b
}

// mustAnswer GETs path from the leader with a 2 s deadline on the call and
// wants status.
func (a *attackWorld) mustAnswer(t *testing.T, c *http.Client, path, token string, status int) {
	t.Helper()
	c.Timeout = 2 * time.Second
	if code, _, body := a.get(c, a.httpURL(a.leader)+path, token); code != status {
		t.Errorf("GET %s within 2 s: %d %.300s, want %d", path, code, body, status)
	}
}

// checkBounds checks what every attack must leave true: each server's
// peak RSS under 600 MB, the same leader, and `weft status` and
// /v1/health (of every server) answering within 2 s.
func (a *attackWorld) checkBounds(t *testing.T, when string) {
	t.Helper()
	for _, id := range []string{"s1", "s2", "s3"} {
		if hwm := a.status(id, "VmHWM"); hwm >= 600<<20 {
			t.Errorf("%s: %s's peak RSS is %d MB", when, id, hwm>>20)
		}
		c := a.client("127.0.0.58")
		c.Timeout = 2 * time.Second
		if code, _, body := a.get(c, a.httpURL(id)+"/v1/health", ""); code != 200 {
			t.Errorf("%s: %s's /v1/health within 2 s: %d %s", when, id, code, body)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, weftBin, "status", "-address", a.any())
	cmd.Env = append(os.Environ(), "WEFT_ADDR=")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Errorf("%s: weft status within 2 s: %v: %s", when, err, out)
	}
	if leader := a.waitForLeader("s1", 10*time.Second, ""); leader != a.leader {
		t.Errorf("%s: the leader is %s, was %s", when, leader, a.leader)
	}
}

// status reads a field of a server's /proc/PID/status, in bytes.
func (a *attackWorld) status(id, field string) int64 {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", a.procs[id].cmd.Process.Pid))
	if err != nil {
		return 0
	}
	m := regexp.MustCompile(`(?m)^` + field + `:\s+(\d+) kB`).FindSubmatch(b)
	if m == nil {
		return 0
	}
	kb, _ := strconv.ParseInt(string(m[1]), 10, 64)
	return kb << 10
}

// sampleRSS samples every server's RSS until the returned function is
// called, which reports each one's peak (for the report's figures).
func (a *attackWorld) sampleRSS(t *testing.T) func() string {
	peaks := map[string]int64{}
	var mu sync.Mutex
	done := make(chan struct{})
	stopped := make(chan struct{})
	go func() {
		defer close(stopped)
		tick := time.NewTicker(20 * time.Millisecond)
		defer tick.Stop()
		for {
			mu.Lock()
			for _, id := range []string{"s1", "s2", "s3"} {
				peaks[id] = max(peaks[id], a.status(id, "VmRSS"))
			}
			mu.Unlock()
			select {
			case <-done:
				return
			case <-tick.C:
			}
		}
	}()
	return func() string {
		close(done)
		<-stopped
		return fmt.Sprintf("s1 %d MB, s2 %d MB, s3 %d MB (leader %s)", peaks["s1"]>>20, peaks["s2"]>>20, peaks["s3"]>>20, a.leader)
	}
}

func (a *attackWorld) queueNames() string {
	var qs []struct {
		Name string `json:"name"`
	}
	if err := cliJSON(a.t, &qs, "queue", "list", "-address", a.any()); err != nil {
		a.t.Fatal(err)
	}
	var names []string
	for _, q := range qs {
		names = append(names, q.Name)
	}
	return strings.Join(names, ",")
}

func (a *attackWorld) appCount() int {
	var apps []appInfo
	if err := cliJSON(a.t, &apps, "app", "list", "-address", a.any()); err != nil {
		a.t.Fatal(err)
	}
	return len(apps)
}

// leaderCalls is how many RPCs the leader has answered for followers
// checking tokens they did not know: Status.AppliedIndex (ACL.TokenSelf
// before it).
func (a *attackWorld) leaderCalls() int {
	_, _, body := a.get(a.client("127.0.0.58"), a.httpURL(a.leader)+"/v1/metrics", a.mgmt)
	n := 0
	sc := bufio.NewScanner(bytes.NewReader(body))
	for sc.Scan() {
		line := sc.Text()
		if strings.HasPrefix(line, "weft_rpc_requests_total{") &&
			(strings.Contains(line, `method="Status.AppliedIndex"`) || strings.Contains(line, `method="ACL.TokenSelf"`)) {
			f := strings.Fields(line)
			v, _ := strconv.ParseFloat(f[len(f)-1], 64)
			n += int(v)
		}
	}
	return n
}
