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
	want := RaftSnapshot{Interval: DefaultRaftSnapshotInterval, LogPercent: DefaultRaftSnapshotLogPercent,
		MinLogBytes: DefaultRaftSnapshotMinLogBytes, Threshold: DefaultRaftSnapshotThreshold, TrailingLogs: DefaultRaftTrailingLogs}
	if got, _ := cfg.RaftSnapshots(); got != want {
		t.Fatalf("defaults %+v, want %+v", got, want)
	}
	// A file written before the byte policy (interval, threshold and
	// trailing logs only) still loads, its threshold an entry cap.
	cfg, err = load("raft_snapshot_interval = \"30s\"\nraft_snapshot_threshold = 100\nraft_trailing_logs = 50\n", "-raft-snapshot-threshold", "200")
	if err != nil {
		t.Fatal(err)
	}
	want = RaftSnapshot{Interval: 30 * time.Second, LogPercent: DefaultRaftSnapshotLogPercent,
		MinLogBytes: DefaultRaftSnapshotMinLogBytes, Threshold: 200, TrailingLogs: 50}
	if got, _ := cfg.RaftSnapshots(); got != want {
		t.Fatalf("from the file and flags: %+v, want %+v", got, want)
	}
	cfg, err = load("raft_snapshot_log_percent = 50\nraft_snapshot_min_log_bytes = 1048576\n", "-raft-snapshot-log-percent", "25")
	if err != nil {
		t.Fatal(err)
	}
	if got, _ := cfg.RaftSnapshots(); got.LogPercent != 25 || got.MinLogBytes != 1<<20 {
		t.Fatalf("byte policy from the file and flags: %+v", got)
	}
	for file, want := range map[string]string{
		"raft_snapshot_interval = \"soon\"": "raft_snapshot_interval",
		"raft_snapshot_interval = \"1ms\"":  "raft_snapshot_interval",
		"raft_snapshot_threshold = 0":       "raft_snapshot_threshold",
		"raft_snapshot_log_percent = 0":     "raft_snapshot_log_percent",
		"raft_snapshot_log_percent = 10001": "raft_snapshot_log_percent",
		"raft_snapshot_min_log_bytes = 100": "raft_snapshot_min_log_bytes",
		"raft_trailing_logs = 0":            "raft_trailing_logs",
	} {
		if _, err := load(file); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: %v, want an error naming %s", file, err, want)
		}
	}
}
