package config

import (
	"flag"
	"io"
	"strings"
	"testing"
	"time"
)

// The Raft snapshot settings come from the file or the flags (flags win),
// with defaults, and a bad one is refused by name.
func TestServerRaftSnapshotSettings(t *testing.T) {
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
	if i, th, tr, _ := cfg.RaftSnapshots(); i != DefaultRaftSnapshotInterval || th != DefaultRaftSnapshotThreshold || tr != DefaultRaftTrailingLogs {
		t.Fatalf("defaults %s %d %d", i, th, tr)
	}
	cfg, err = load("raft_snapshot_interval = \"30s\"\nraft_snapshot_threshold = 100\nraft_trailing_logs = 50\n", "-raft-snapshot-threshold", "200")
	if err != nil {
		t.Fatal(err)
	}
	if i, th, tr, _ := cfg.RaftSnapshots(); i != 30*time.Second || th != 200 || tr != 50 {
		t.Fatalf("from the file and flags: %s %d %d", i, th, tr)
	}
	for file, want := range map[string]string{
		"raft_snapshot_interval = \"soon\"": "raft_snapshot_interval",
		"raft_snapshot_interval = \"1ms\"":  "raft_snapshot_interval",
		"raft_snapshot_threshold = 0":       "raft_snapshot_threshold",
		"raft_trailing_logs = 0":            "raft_trailing_logs",
	} {
		if _, err := load(file); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: %v, want an error naming %s", file, err, want)
		}
	}
}
