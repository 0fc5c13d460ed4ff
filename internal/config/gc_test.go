package config

import (
	"flag"
	"io"
	"strings"
	"testing"
	"time"
)

// The garbage collection settings come from the file or the flags, with
// the SPEC defaults, and a bad one is refused by name.
func TestServerGCSettings(t *testing.T) {
	load := func(file string, args ...string) (*Server, error) {
		cfg := DefaultServer()
		cfg.DataDir = "/tmp/x"
		fs := flag.NewFlagSet("server", flag.ContinueOnError)
		fs.SetOutput(io.Discard)
		RegisterFlags(fs, cfg)
		if err := fs.Parse(args); err != nil {
			return nil, err
		}
		set := map[string]bool{}
		fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
		if err := MergeFile(cfg, "s.hcl", []byte(file), set); err != nil {
			return nil, err
		}
		return cfg, cfg.Validate()
	}
	cfg, err := load("")
	if err != nil {
		t.Fatal(err)
	}
	if n, a, d, _ := cfg.GC(); n != 10000 || a != 24*time.Hour || d != 24*time.Hour {
		t.Fatalf("defaults %d %s %s", n, a, d)
	}
	cfg, err = load("max_completed_apps = 50\napp_gc_threshold = \"2h\"\n", "-node-gc-threshold", "30m")
	if err != nil {
		t.Fatal(err)
	}
	if n, a, d, _ := cfg.GC(); n != 50 || a != 2*time.Hour || d != 30*time.Minute {
		t.Fatalf("merged %d %s %s", n, a, d)
	}
	if cfg.GCPercent != 0 {
		t.Fatalf("gc_percent defaults to %d, want 0 (Go's own)", cfg.GCPercent)
	}
	if cfg, err = load("gc_percent = 400"); err != nil || cfg.GCPercent != 400 {
		t.Fatalf("gc_percent = 400: %v, %d", err, cfg.GCPercent)
	}
	for file, want := range map[string]string{
		"max_completed_apps = 0":    "max_completed_apps (-max-completed-apps) must be positive",
		`app_gc_threshold = "soon"`: `app_gc_threshold (-app-gc-threshold) "soon"`,
		`node_gc_threshold = "-1h"`: `node_gc_threshold (-node-gc-threshold) "-1h"`,
		"gc_percent = 5":            "gc_percent (-gc-percent) 5",
		"gc_percent = -1":           "gc_percent (-gc-percent) -1",
		"gc_percent = 20000":        "gc_percent (-gc-percent) 20000",
	} {
		if _, err := load(file); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: %v, want %q", file, err, want)
		}
	}
}
