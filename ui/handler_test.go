package ui

import (
	"io"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strings"
	"testing"
)

func get(t *testing.T, h http.Handler, method, path string, hdr map[string]string) *http.Response {
	t.Helper()
	req := httptest.NewRequest(method, path, nil)
	for k, v := range hdr {
		req.Header.Set(k, v)
	}
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	return rec.Result()
}

func body(t *testing.T, r *http.Response) string {
	t.Helper()
	b, err := io.ReadAll(r.Body)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func TestHandlerServesAssetsWithTheirTypes(t *testing.T) {
	h := Handler()
	for _, tc := range []struct{ path, ctype, contains string }{
		{"/ui/", "text/html; charset=utf-8", `<script type="module" src="/ui/js/main.js">`},
		{"/ui/index.html", "text/html; charset=utf-8", "<title>weft</title>"},
		{"/ui/style.css", "text/css; charset=utf-8", ":root"},
		{"/ui/js/main.js", "text/javascript; charset=utf-8", "import"},
		{"/ui/js/pages/nodes.js", "text/javascript; charset=utf-8", "Running (O)"},
		{"/ui/favicon.svg", "image/svg+xml", "<svg"},
	} {
		r := get(t, h, http.MethodGet, tc.path, nil)
		if r.StatusCode != http.StatusOK {
			t.Fatalf("GET %s: %d", tc.path, r.StatusCode)
		}
		if got := r.Header.Get("Content-Type"); got != tc.ctype {
			t.Errorf("GET %s: Content-Type %q, want %q", tc.path, got, tc.ctype)
		}
		if b := body(t, r); !strings.Contains(b, tc.contains) {
			t.Errorf("GET %s: body lacks %q", tc.path, tc.contains)
		}
		if csp := r.Header.Get("Content-Security-Policy"); !strings.HasPrefix(csp, "default-src 'self'") {
			t.Errorf("GET %s: Content-Security-Policy %q", tc.path, csp)
		}
		if r.Header.Get("Cache-Control") != "no-cache" || r.Header.Get("ETag") == "" {
			t.Errorf("GET %s: want revalidation by ETag, got Cache-Control %q ETag %q", tc.path, r.Header.Get("Cache-Control"), r.Header.Get("ETag"))
		}
	}
}

// Pages route in the browser: a reload of any page path gets index.html,
// but a missing file is a 404, not a page.
func TestHandlerServesIndexForPagePaths(t *testing.T) {
	h := Handler()
	for _, p := range []string{"/ui/apps", "/ui/apps/app-7", "/ui/containers/c-12-0", "/ui/nodes/a1?x=1",
		"/ui/nodes/a1.example.com", "/ui/nodes/sc1.a1", "/ui/containers/sc1.c-12-0"} {
		r := get(t, h, http.MethodGet, p, nil)
		if r.StatusCode != http.StatusOK || !strings.Contains(body(t, r), "<title>weft</title>") {
			t.Errorf("GET %s: %d, want index.html", p, r.StatusCode)
		}
	}
	for _, p := range []string{"/ui/missing.js", "/ui/js/nope.css", "/v1/status", "/ui/../go.mod"} {
		if r := get(t, h, http.MethodGet, p, nil); r.StatusCode != http.StatusNotFound {
			t.Errorf("GET %s: %d, want 404", p, r.StatusCode)
		}
	}
	if r := get(t, h, http.MethodGet, "/ui", nil); r.StatusCode != http.StatusMovedPermanently || r.Header.Get("Location") != "/ui/" {
		t.Errorf("GET /ui: %d to %q, want a redirect to /ui/", r.StatusCode, r.Header.Get("Location"))
	}
}

func TestHandlerRevalidatesAndRefusesWrites(t *testing.T) {
	h := Handler()
	etag := get(t, h, http.MethodGet, "/ui/style.css", nil).Header.Get("ETag")
	if r := get(t, h, http.MethodGet, "/ui/style.css", map[string]string{"If-None-Match": etag}); r.StatusCode != http.StatusNotModified {
		t.Errorf("GET with If-None-Match %s: %d, want 304", etag, r.StatusCode)
	}
	if r := get(t, h, http.MethodHead, "/ui/", nil); r.StatusCode != http.StatusOK {
		t.Errorf("HEAD /ui/: %d", r.StatusCode)
	}
	r := get(t, h, http.MethodPost, "/ui/", nil)
	if r.StatusCode != http.StatusMethodNotAllowed || r.Header.Get("Allow") != "GET, HEAD" {
		t.Errorf("POST /ui/: %d Allow %q, want 405 with Allow: GET, HEAD", r.StatusCode, r.Header.Get("Allow"))
	}
}

// The assets must load nothing from elsewhere and carry nothing the
// Content-Security-Policy would block: no remote URLs, inline scripts,
// inline event handlers or style attributes in the HTML.
func TestAssetsAreSelfContained(t *testing.T) {
	remote := regexp.MustCompile(`(?i)(src|href)\s*=\s*["']?(https?:)?//|@import|url\(\s*["']?https?:|fetch\(\s*["']https?:`)
	inline := regexp.MustCompile(`(?i)<script(?:\s[^>]*)?>\s*[^<\s]|\son[a-z]+\s*=|\sstyle\s*=`)
	h := Handler().(*handler)
	for name, a := range h.files {
		if m := remote.Find(a.body); m != nil {
			t.Errorf("%s loads from elsewhere: %q", name, m)
		}
		if strings.HasSuffix(name, ".html") {
			if m := inline.Find(a.body); m != nil {
				t.Errorf("%s has inline code or style the CSP refuses: %q", name, m)
			}
		}
	}
}

// The app page shows the AM's counters (SPEC §19) in a panel of their own,
// a row each marked data-counter for browser tests, only when there are
// some.
func TestAppPageHasTheCountersPanel(t *testing.T) {
	b := body(t, get(t, Handler(), http.MethodGet, "/ui/js/pages/app.js", nil))
	for _, want := range []string{
		"hasCounters(app) ? panel(`Counters (",
		"rowData: (c) => ({ counter: c.name })",
	} {
		if !strings.Contains(b, want) {
			t.Errorf("app.js lacks %q", want)
		}
	}
}
