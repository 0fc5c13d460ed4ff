package e2e

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
)

// chromiumPath is Debian's chromium (`make chromium` installs it).
const chromiumPath = "/usr/bin/chromium"

// browser is one headless Chromium tab on the web UI of a server.
type browser struct {
	t    *testing.T
	ctx  context.Context
	base string // e.g. https://127.0.0.1:8088
	dir  string // where screenshots go
}

// startBrowser starts headless Chromium for the test. The cluster's HTTPS
// certificate is signed by the test's own CA, which the browser does not
// know, so certificate errors are ignored (the Go client of the test does
// verify it). Uncaught exceptions in the pages fail the test.
func startBrowser(t *testing.T, base string) *browser {
	t.Helper()
	if _, err := os.Stat(chromiumPath); err != nil {
		t.Fatalf("the UI tests need Chromium at %s: run `make chromium` (or apt-get install chromium)", chromiumPath)
	}
	opts := append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(chromiumPath),
		chromedp.Flag("headless", "new"),
		chromedp.NoSandbox,
		chromedp.DisableGPU,
		chromedp.Flag("disable-dev-shm-usage", true),
		chromedp.Flag("ignore-certificate-errors", true),
		chromedp.WindowSize(1366, 768),
	)
	actx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	ctx, cancel := chromedp.NewContext(actx)
	t.Cleanup(func() {
		cancel()
		cancelAlloc()
	})
	if err := chromedp.Do(ctx, chromedp.Navigate("about:blank")); err != nil {
		t.Fatalf("start chromium: %v", err)
	}
	messages := chromedp.Console(ctx)
	go func() {
		for m, err := range messages {
			if err != nil {
				return
			}
			if m.IsException() {
				t.Errorf("the page threw: %s", m)
			}
		}
	}()
	dir := os.Getenv("WEFT_SCREENSHOT_DIR")
	if dir == "" {
		var err error
		if dir, err = os.MkdirTemp("", "weft-ui-screenshots-"); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	t.Logf("screenshots go to %s", dir)
	return &browser{t: t, ctx: ctx, base: base, dir: dir}
}

// run runs browser actions with a deadline.
func (b *browser) run(steps ...chromedp.Action[chromedp.Void]) {
	b.t.Helper()
	ctx, cancel := context.WithTimeout(b.ctx, 30*time.Second)
	defer cancel()
	if err := chromedp.Do(ctx, steps...); err != nil {
		b.t.Fatal(err)
	}
}

// open loads a UI path as a user typing it would (a full page load).
func (b *browser) open(path string) {
	b.t.Helper()
	b.run(chromedp.Navigate(b.base + path))
}

// click clicks the first element sel matches, as a user would.
func (b *browser) click(sel string) {
	b.t.Helper()
	b.run(chromedp.WaitVisible(chromedp.CSS(sel)), chromedp.Click(chromedp.CSS(sel)))
}

// eval evaluates a JavaScript expression in the page into out.
func eval[T any](b *browser, js string) (T, error) {
	ctx, cancel := context.WithTimeout(b.ctx, 10*time.Second)
	defer cancel()
	return chromedp.Run(ctx, chromedp.Evaluate[T](js))
}

// path is the page's location path and query.
func (b *browser) path() string {
	p, err := eval[string](b, "location.pathname + location.search")
	if err != nil {
		b.t.Fatal(err)
	}
	return p
}

// shot saves a full-page screenshot as name.png at width×height.
func (b *browser) shot(name string, width, height int64) {
	b.t.Helper()
	ctx, cancel := context.WithTimeout(b.ctx, 30*time.Second)
	defer cancel()
	if err := chromedp.Do(ctx, chromedp.EmulateViewport(width, height)); err != nil {
		b.t.Fatal(err)
	}
	png, err := chromedp.Run(ctx, chromedp.FullScreenshot(100))
	if err != nil {
		b.t.Fatal(err)
	}
	path := filepath.Join(b.dir, name+".png")
	if err := os.WriteFile(path, png, 0o644); err != nil {
		b.t.Fatal(err)
	}
	b.t.Logf("screenshot %s", path)
}

// httpClient reads the cluster's HTTP API as the browser does, with the
// ACL token, verifying the server certificate against the test's CA.
type httpClient struct {
	t     *testing.T
	base  string
	token string
	c     *http.Client
}

func newHTTPClient(t *testing.T, w *world, base string) *httpClient {
	t.Helper()
	tr := &http.Transport{}
	if w.sec != nil {
		pem, err := os.ReadFile(w.sec.file("weft-agent-ca.pem"))
		if err != nil {
			t.Fatal(err)
		}
		pool := x509.NewCertPool()
		pool.AppendCertsFromPEM(pem)
		tr.TLSClientConfig = &tls.Config{RootCAs: pool, ServerName: "localhost"}
	}
	return &httpClient{t: t, base: base, token: os.Getenv("WEFT_TOKEN"), c: &http.Client{Transport: tr, Timeout: 30 * time.Second}}
}

// get decodes GET path into out.
func (c *httpClient) get(path string, out any) error {
	req, err := http.NewRequest(http.MethodGet, c.base+path, nil)
	if err != nil {
		return err
	}
	if c.token != "" {
		req.Header.Set("X-Weft-Token", c.token)
	}
	resp, err := c.c.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("GET %s: %s: %s", path, resp.Status, strings.TrimSpace(string(body)))
	}
	return json.Unmarshal(body, out)
}

// must is get that fails the test on an error.
func (c *httpClient) must(path string, out any) {
	c.t.Helper()
	if err := c.get(path, out); err != nil {
		c.t.Fatal(err)
	}
}

var httpURLLine = regexp.MustCompile(`HTTP API listening.*url=(\S+)`)

// httpURL is the base URL of server id's HTTP API, as its log states it.
func (w *world) httpURL(id string) string {
	w.t.Helper()
	var u string
	waitFor(w.t, 30*time.Second, id+"'s HTTP API", func() error {
		b, err := os.ReadFile(w.procs[id].log)
		if err != nil {
			return err
		}
		m := httpURLLine.FindSubmatch(b)
		if m == nil {
			return errors.New("its log names no HTTP API URL yet")
		}
		u = strings.Trim(string(m[1]), `"`)
		return nil
	})
	return u
}

func sameSet(what string, got, want []string) error {
	got, want = slices.Clone(got), slices.Clone(want)
	sort.Strings(got)
	sort.Strings(want)
	if !slices.Equal(got, want) {
		return fmt.Errorf("%s: the page shows %v, the API %v", what, got, want)
	}
	return nil
}

// rows lists the data-KEY attribute of each table row the page shows.
func rows(b *browser, key string) ([]string, error) {
	return eval[[]string](b, fmt.Sprintf(`[...document.querySelectorAll("tr[data-%s]")].map(r => r.dataset.%s)`, key, key))
}

// The web UI against a real secure cluster: the token prompt, then every
// page with real data, checked against the API, following links from the
// apps list to an app, a container and its log.
func TestWebUI(t *testing.T) {
	w := startWorld(t)
	w.applyQueues(`queue "root" {
  policy = "drf"
  queue "prod" {
    weight = 3
    policy = "drf"
  }
  queue "dev" {
    weight = 1
  }
  queue "default" {}
}
`)
	// A long app in prod whose tasks say who they are, a short one in dev
	// that finishes, and opportunistic work in dev.
	long := w.submit("-name", "wordcount", "-queue", "root.prod", "-num-containers", "4", "-memory-mb", "256", "--",
		"sh", "-c", `echo "hello from $WEFT_CONTAINER_ID"; sleep 300`)
	short := w.submit("-name", "etl-nightly", "-queue", "root.dev", "-num-containers", "2", "-memory-mb", "256", "--",
		"sh", "-c", `echo "done $WEFT_CONTAINER_ID"`)
	opp := w.submit("-name", "backfill", "-queue", "root.dev", "-container-type", "OPPORTUNISTIC", "-num-containers", "3", "-memory-mb", "256", "--",
		"sh", "-c", `echo "opportunistic $WEFT_CONTAINER_ID"; sleep 300`)
	waitFor(t, 60*time.Second, "the long app's four tasks to run", func() error {
		if n := countTasks(w.containers(long), "RUNNING", ""); n != 4 {
			return fmt.Errorf("%d running", n)
		}
		return nil
	})
	if a := w.waitApp(short, 60*time.Second); a.State != "FINISHED" {
		t.Fatalf("app %s ended %s: %s", short, a.State, a.Diagnostics)
	}
	waitFor(t, 60*time.Second, "the opportunistic app's tasks to run", func() error {
		if n := countTasks(w.containers(opp), "RUNNING", "OPPORTUNISTIC"); n != 3 {
			return fmt.Errorf("%d running", n)
		}
		return nil
	})

	base := w.httpURL("s1")
	api := newHTTPClient(t, w, base)
	b := startBrowser(t, base)

	t.Run("token prompt", func(t *testing.T) {
		b.t = t
		b.open("/ui/")
		waitFor(t, 20*time.Second, "the token prompt", func() error {
			open, err := eval[bool](b, `document.getElementById("token-dialog").open`)
			if err != nil || !open {
				return fmt.Errorf("dialog open %v (%v)", open, err)
			}
			return nil
		})
		why, _ := eval[string](b, `document.getElementById("token-why").textContent`)
		if !strings.Contains(why, "ACL") || !strings.Contains(why, "token") {
			t.Errorf("the prompt says %q; want it to ask for an ACL token", why)
		}
		b.shot("token-prompt", 1366, 768)
		b.run(chromedp.SendKeys(chromedp.CSS("#token-input"), api.token), chromedp.Click(chromedp.CSS("#token-save")))
		waitFor(t, 20*time.Second, "the overview with the token", func() error {
			var st struct {
				Servers []peer `json:"servers"`
			}
			api.must("/v1/status", &st)
			var want string
			for _, s := range st.Servers {
				if s.State == "leader" {
					want = s.ID
				}
			}
			leader, err := eval[string](b, `document.querySelector('[data-stat="leader"] .card-value')?.textContent || ""`)
			if err != nil {
				return err
			}
			if leader != want || want == "" {
				return fmt.Errorf("leader card %q, API's leader %q", leader, want)
			}
			return nil
		})
		if stored, _ := eval[string](b, `localStorage.getItem("weft.token") || ""`); stored != api.token {
			t.Errorf("the token was not remembered in localStorage")
		}
	})

	t.Run("overview", func(t *testing.T) {
		b.t = t
		waitFor(t, 20*time.Second, "ready nodes and app counts as the API has them", func() error {
			var st struct {
				Nodes struct {
					Ready int `json:"ready"`
				} `json:"nodes"`
				Apps map[string]int `json:"apps"`
			}
			api.must("/v1/status", &st)
			nodes, err := eval[string](b, `document.querySelector('[data-stat="nodes"] .card-value .num')?.textContent || ""`)
			if err != nil {
				return err
			}
			if nodes != fmt.Sprint(st.Nodes.Ready) {
				return fmt.Errorf("nodes card %q, API %d ready", nodes, st.Nodes.Ready)
			}
			counts, err := eval[map[string]int](b, `Object.fromEntries([...document.querySelectorAll(".state-counts li")].map(li => [li.querySelector(".badge").textContent, Number(li.querySelector(".num").textContent)]))`)
			if err != nil {
				return err
			}
			want := map[string]int{}
			for s, n := range st.Apps {
				if n > 0 {
					want[s] = n
				}
			}
			if fmt.Sprint(counts) != fmt.Sprint(want) {
				return fmt.Errorf("apps by state %v, API %v", counts, want)
			}
			return nil
		})
	})

	t.Run("nodes", func(t *testing.T) {
		b.t = t
		b.click(`nav a[data-nav="nodes"]`)
		waitFor(t, 20*time.Second, "the nodes table to match GET /v1/nodes", func() error {
			var nodes []struct {
				ID                   string `json:"id"`
				RunningGuaranteed    int    `json:"running_guaranteed"`
				RunningOpportunistic int    `json:"running_opportunistic"`
			}
			api.must("/v1/nodes", &nodes)
			var ids, want []string
			for _, n := range nodes {
				ids = append(ids, n.ID)
				want = append(want, fmt.Sprintf("%s:%d:%d", n.ID, n.RunningGuaranteed, n.RunningOpportunistic))
			}
			got, err := rows(b, "node")
			if err != nil {
				return err
			}
			if err := sameSet("node IDs", got, ids); err != nil {
				return err
			}
			// Columns 4 and 5 are running (G) and running (O).
			cells, err := eval[[]string](b, `[...document.querySelectorAll("tr[data-node]")].map(r => r.dataset.node + ":" + r.cells[3].textContent + ":" + r.cells[4].textContent)`)
			if err != nil {
				return err
			}
			return sameSet("running (G) and (O) per node", cells, want)
		})
		heads, _ := eval[[]string](b, `[...document.querySelectorAll("table.nodes th")].map(th => th.textContent)`)
		for _, h := range []string{"Running (G)", "Running (O)", "Memory (G)", "Memory (O)", "vcores (G)", "vcores (O)", "Queued"} {
			if !slices.Contains(heads, h) {
				t.Errorf("the nodes table has no %q column: %v", h, heads)
			}
		}
		b.shot("nodes", 1366, 768)
		b.shot("nodes-1920", 1920, 1080)
	})

	t.Run("queues", func(t *testing.T) {
		b.t = t
		b.click(`nav a[data-nav="queues"]`)
		waitFor(t, 20*time.Second, "the queue tree to match GET /v1/queues", func() error {
			var qs []queueInfo
			api.must("/v1/queues", &qs)
			var want []string
			for _, q := range qs {
				want = append(want, q.Name)
			}
			got, err := rows(b, "queue")
			if err != nil {
				return err
			}
			return sameSet("queues", got, want)
		})
		bars, err := eval[int](b, `document.querySelectorAll('tr[data-queue="root.prod"] .bar .seg.used').length`)
		if err != nil || bars != 1 {
			t.Errorf("root.prod shows %d used bars (%v); its app runs there", bars, err)
		}
		b.shot("queues", 1366, 768)
	})

	t.Run("apps", func(t *testing.T) {
		b.t = t
		b.click(`nav a[data-nav="apps"]`)
		waitFor(t, 20*time.Second, "the apps list to match GET /v1/apps", func() error {
			var apps []appInfo
			api.must("/v1/apps", &apps)
			var want []string
			for _, a := range apps {
				want = append(want, a.ID)
			}
			got, err := rows(b, "app")
			if err != nil {
				return err
			}
			return sameSet("apps", got, want)
		})
		// Filter by queue as a user would: the select, then the list.
		if _, err := eval[bool](b, `(() => { const s = document.getElementById("f-queue"); s.value = "root.dev"; s.dispatchEvent(new Event("change")); return true })()`); err != nil {
			t.Fatal(err)
		}
		waitFor(t, 20*time.Second, "the apps of root.dev", func() error {
			var apps []appInfo
			api.must("/v1/apps?queue=root.dev", &apps)
			var want []string
			for _, a := range apps {
				want = append(want, a.ID)
			}
			got, err := rows(b, "app")
			if err != nil {
				return err
			}
			if err := sameSet("apps of root.dev", got, want); err != nil {
				return err
			}
			if !slices.Contains(got, short) || slices.Contains(got, long) {
				return fmt.Errorf("root.dev lists %v; want %s and not %s", got, short, long)
			}
			return nil
		})
		if p := b.path(); p != "/ui/apps?queue=root.dev" {
			t.Errorf("the filter is not in the URL: %s", p)
		}
		b.shot("apps-filtered", 1366, 768)
		b.click(`nav a[data-nav="apps"]`)
		waitFor(t, 20*time.Second, "every app listed again", func() error {
			got, err := rows(b, "app")
			if err != nil || !slices.Contains(got, long) {
				return fmt.Errorf("apps %v (%v)", got, err)
			}
			return nil
		})
		b.shot("apps", 1366, 768)
	})

	var task string
	t.Run("app page", func(t *testing.T) {
		b.t = t
		b.click(fmt.Sprintf(`tr[data-app=%q] td:first-child a`, long))
		if p := b.path(); p != "/ui/apps/"+long {
			t.Fatalf("the app link led to %s", p)
		}
		waitFor(t, 20*time.Second, "the app page to match GET /v1/app/"+long, func() error {
			var a appInfo
			api.must("/v1/app/"+long, &a)
			var cs []containerInfo
			api.must("/v1/app/"+long+"/containers", &cs)
			state, err := eval[string](b, `document.querySelector('[data-fact="state"] .badge')?.textContent || ""`)
			if err != nil {
				return err
			}
			if state != a.State {
				return fmt.Errorf("state %q, API %q", state, a.State)
			}
			var want []string
			for _, c := range cs {
				want = append(want, c.ID)
			}
			got, err := rows(b, "container")
			if err != nil {
				return err
			}
			return sameSet("the app's containers", got, want)
		})
		for _, sel := range []string{"svg.timeline", "ol.events", "pre.log"} {
			if n, _ := eval[int](b, fmt.Sprintf(`document.querySelectorAll(%q).length`, sel)); n == 0 {
				t.Errorf("the app page has no %s", sel)
			}
		}
		attempts, _ := eval[string](b, `[...document.querySelectorAll(".panel-title")].map(e => e.textContent).join("|")`)
		if !strings.Contains(attempts, "AM attempts (1)") {
			t.Errorf("panels %q: want AM attempts (1)", attempts)
		}
		// The embedded log viewer shows a task's output.
		waitFor(t, 20*time.Second, "the app page's log viewer", func() error {
			txt, err := eval[string](b, `(() => { const p = document.querySelector("pre.log"); return p ? p.dataset.container + "|" + p.textContent : "" })()`)
			if err != nil {
				return err
			}
			id, out, _ := strings.Cut(txt, "|")
			if !strings.Contains(out, "hello from "+id) {
				return fmt.Errorf("log of %s shows %q", id, out)
			}
			return nil
		})
		b.shot("app", 1366, 768)
		b.shot("app-1920", 1920, 1080)
		for _, c := range tasks(w.containers(long)) {
			if c.State == "RUNNING" {
				task = c.ID
				break
			}
		}
		if task == "" {
			t.Fatal("no running task")
		}
	})

	t.Run("container logs", func(t *testing.T) {
		b.t = t
		b.click(fmt.Sprintf(`tr[data-container=%q] td:first-child a`, task))
		if p := b.path(); p != "/ui/containers/"+task+"?app="+url.QueryEscape(long) {
			t.Fatalf("the container link led to %s", p)
		}
		waitFor(t, 20*time.Second, "the container's log", func() error {
			out, err := eval[string](b, `document.querySelector("pre.log")?.textContent || ""`)
			if err != nil {
				return err
			}
			if !strings.Contains(out, "hello from "+task) {
				return fmt.Errorf("log shows %q", out)
			}
			return nil
		})
		status, _ := eval[string](b, `document.querySelector(".log-status").textContent`)
		if !strings.Contains(status, "following") {
			t.Errorf("a running container's log should follow; status %q", status)
		}
		b.shot("container-logs", 1366, 768)
	})

	t.Run("containers", func(t *testing.T) {
		b.t = t
		b.open("/ui/containers?app=" + short)
		waitFor(t, 20*time.Second, "the containers of "+short, func() error {
			var cs []containerInfo
			api.must("/v1/containers?app="+short, &cs)
			var want []string
			for _, c := range cs {
				want = append(want, c.ID)
			}
			got, err := rows(b, "container")
			if err != nil {
				return err
			}
			if len(got) == 0 {
				return errors.New("no rows yet")
			}
			return sameSet("containers of "+short, got, want)
		})
		b.open("/ui/containers")
		waitFor(t, 20*time.Second, "every container", func() error {
			got, err := rows(b, "container")
			if err != nil || len(got) < 10 {
				return fmt.Errorf("%d rows (%v)", len(got), err)
			}
			return nil
		})
		b.shot("containers", 1366, 768)
	})

	t.Run("overview shot", func(t *testing.T) {
		b.t = t
		b.click(`nav a[data-nav="overview"]`)
		waitFor(t, 20*time.Second, "the utilisation chart", func() error {
			n, err := eval[int](b, `document.querySelectorAll("svg.chart path.area-g").length`)
			if err != nil || n != 1 {
				return fmt.Errorf("%d chart areas (%v)", n, err)
			}
			return nil
		})
		b.shot("overview", 1366, 768)
		b.shot("overview-1920", 1920, 1080)
	})
}
