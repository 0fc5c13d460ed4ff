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

// shot saves a full-page screenshot as name.png at width×height: the
// viewport is made as tall as the page first, so what is fixed to the
// viewport (the left bar) spans the whole picture as it would on a tall
// screen. The viewport is 1366×768 again afterwards.
func (b *browser) shot(name string, width, height int64) {
	b.t.Helper()
	ctx, cancel := context.WithTimeout(b.ctx, 30*time.Second)
	defer cancel()
	if err := chromedp.Do(ctx, chromedp.EmulateViewport(width, height)); err != nil {
		b.t.Fatal(err)
	}
	full, err := chromedp.Run(ctx, chromedp.Evaluate[int64](`Math.ceil(document.documentElement.scrollHeight)`))
	if err != nil {
		b.t.Fatal(err)
	}
	if err := chromedp.Do(ctx, chromedp.EmulateViewport(width, max(height, full))); err != nil {
		b.t.Fatal(err)
	}
	png, err := chromedp.Run(ctx, chromedp.FullScreenshot(100))
	if err != nil {
		b.t.Fatal(err)
	}
	if err := chromedp.Do(ctx, chromedp.EmulateViewport(1366, 768)); err != nil {
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
