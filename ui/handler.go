package ui

import (
	"bytes"
	"crypto/sha256"
	"embed"
	"encoding/hex"
	"io/fs"
	"mime"
	"net/http"
	"path"
	"strings"
	"time"
)

//go:embed assets
var assets embed.FS

// Prefix is the URL path the UI lives under.
const Prefix = "/ui/"

// contentSecurityPolicy lets a page load only what this handler serves and
// talk only to its own origin (the JSON API): no inline scripts or styles,
// no frames, no external fonts, scripts or images.
const contentSecurityPolicy = "default-src 'self'; img-src 'self' data:; object-src 'none'; base-uri 'none'; frame-ancestors 'none'; form-action 'none'"

// asset is one embedded file, ready to serve.
type asset struct {
	body        []byte
	contentType string
	etag        string
}

// Handler serves the UI under /ui/: the embedded files by their path, and
// index.html for any other path below /ui/ (the pages route in the
// browser), so a reload or a shared link of /ui/apps/app-7 or
// /ui/nodes/sc1.a1 opens that page. A missing file (isAsset) is a 404. Every answer carries a Content-Security-Policy of 'self' only;
// files revalidate by ETag on each load, so a new binary's UI is seen at
// once. It answers GET and HEAD only.
func Handler() http.Handler {
	files := map[string]*asset{}
	err := fs.WalkDir(assets, "assets", func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		body, err := assets.ReadFile(p)
		if err != nil {
			return err
		}
		sum := sha256.Sum256(body)
		files[strings.TrimPrefix(p, "assets/")] = &asset{
			body:        body,
			contentType: contentType(p),
			etag:        `"` + hex.EncodeToString(sum[:8]) + `"`,
		}
		return nil
	})
	if err != nil || files["index.html"] == nil {
		panic("ui: embedded assets unreadable: " + errString(err))
	}
	dirs := map[string]bool{}
	for name := range files {
		if dir, _, ok := strings.Cut(name, "/"); ok {
			dirs[dir] = true
		}
	}
	return &handler{files: files, dirs: dirs}
}

type handler struct {
	files map[string]*asset
	dirs  map[string]bool // the files' top-level directories (js)
}

func (h *handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	hdr := w.Header()
	hdr.Set("Content-Security-Policy", contentSecurityPolicy)
	hdr.Set("X-Content-Type-Options", "nosniff")
	hdr.Set("Referrer-Policy", "no-referrer")
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		hdr.Set("Allow", "GET, HEAD")
		http.Error(w, "the UI answers GET and HEAD only", http.StatusMethodNotAllowed)
		return
	}
	if r.URL.Path == strings.TrimSuffix(Prefix, "/") {
		http.Redirect(w, r, Prefix, http.StatusMovedPermanently)
		return
	}
	rel, ok := strings.CutPrefix(r.URL.Path, Prefix)
	if !ok {
		http.NotFound(w, r)
		return
	}
	rel = strings.TrimPrefix(path.Clean("/"+rel), "/")
	a := h.files[rel]
	if a == nil || rel == "index.html" {
		if h.isAsset(rel) && rel != "index.html" {
			http.NotFound(w, r)
			return
		}
		a = h.files["index.html"]
	}
	hdr.Set("Content-Type", a.contentType)
	hdr.Set("Cache-Control", "no-cache")
	hdr.Set("ETag", a.etag)
	http.ServeContent(w, r, "", time.Time{}, bytes.NewReader(a.body))
}

// contentType names the type of an embedded file by its extension, with
// the types the UI uses spelled out so the answer does not depend on the
// host's MIME tables.
func contentType(name string) string {
	switch path.Ext(name) {
	case ".html":
		return "text/html; charset=utf-8"
	case ".css":
		return "text/css; charset=utf-8"
	case ".js":
		return "text/javascript; charset=utf-8"
	case ".svg":
		return "image/svg+xml"
	case ".png":
		return "image/png"
	case ".json":
		return "application/json"
	}
	if t := mime.TypeByExtension(path.Ext(name)); t != "" {
		return t
	}
	return "application/octet-stream"
}

func errString(err error) string {
	if err == nil {
		return "no index.html"
	}
	return err.Error()
}

// isAsset reports whether a path below /ui/ names a file (missing: a 404)
// rather than a page: it has an extension and is at the top level or in
// one of the files' directories. A page's path may hold dots — a node
// named by its host name, a federation's SUBCLUSTER.NODE — and is a page.
func (h *handler) isAsset(rel string) bool {
	if path.Ext(rel) == "" {
		return false
	}
	dir, _, nested := strings.Cut(rel, "/")
	return !nested || h.dirs[dir]
}
