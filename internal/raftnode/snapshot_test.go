package raftnode

import (
	"math"
	"testing"
	"time"

	"github.com/hashicorp/raft"
)

func TestSnapshotPolicyDue(t *testing.T) {
	p := SnapshotPolicy{MinLogBytes: 1000, LogPercent: 50, MaxEntries: 100}
	def := SnapshotPolicy{MinLogBytes: DefaultSnapshotMinLogBytes, LogPercent: DefaultSnapshotLogPercent, MaxEntries: DefaultSnapshotMaxEntries}
	for _, tc := range []struct {
		name string
		p    SnapshotPolicy
		l    LogSince
		want bool
	}{
		{"nothing new", p, LogSince{}, false},
		{"nothing new, a snapshot behind", p, LogSince{SnapshotBytes: 1}, false},
		{"young cluster below the floor", p, LogSince{Bytes: 999, Entries: 10}, false},
		{"young cluster at the floor", p, LogSince{Bytes: 1000, Entries: 10}, true},
		{"small state: the floor, not the share", p, LogSince{Bytes: 999, Entries: 10, SnapshotBytes: 100}, false},
		{"large state below its share", p, LogSince{Bytes: 4999, Entries: 99, SnapshotBytes: 10000}, false},
		{"large state at its share", p, LogSince{Bytes: 5000, Entries: 1, SnapshotBytes: 10000}, true},
		{"entry cap, few bytes", p, LogSince{Bytes: 10, Entries: 100, SnapshotBytes: 10000}, true},
		{"one below the entry cap", p, LogSince{Bytes: 10, Entries: 99}, false},
		{"share overflows", SnapshotPolicy{MinLogBytes: 1, LogPercent: 10000, MaxEntries: math.MaxUint64},
			LogSince{Bytes: math.MaxUint64 - 1, Entries: 1, SnapshotBytes: math.MaxUint64}, false},
		// Defaults, with the 1 M container state of docs/operations.md
		// (a 350 MB snapshot): 17.5 MB of log, ~48 plans of 4,096.
		{"defaults: 1M containers, 17 MB of plans", def, LogSince{Bytes: 17 << 20, Entries: 46, SnapshotBytes: 350 << 20}, false},
		{"defaults: 1M containers, 17.5 MB of plans", def, LogSince{Bytes: 17.5 * (1 << 20), Entries: 48, SnapshotBytes: 350 << 20}, true},
		{"defaults: young cluster, 3 MB", def, LogSince{Bytes: 3 << 20, Entries: 500}, false},
		{"defaults: young cluster, 4 MB", def, LogSince{Bytes: 4 << 20, Entries: 500}, true},
		{"defaults: 80 MB state, 3.9 MB of log", def, LogSince{Bytes: 39 << 20 / 10, Entries: 500, SnapshotBytes: 80 << 20}, false},
		{"defaults: 100 MB state, 4.9 MB of log", def, LogSince{Bytes: 49 << 20 / 10, Entries: 500, SnapshotBytes: 100 << 20}, false},
		{"defaults: 100 MB state, 5 MB of log", def, LogSince{Bytes: 5 << 20, Entries: 500, SnapshotBytes: 100 << 20}, true},
		{"rested 3 times the last snapshot", p, LogSince{Bytes: 1000, Entries: 1, LastTook: time.Second, Rested: 3 * time.Second}, true},
		{"rested less", p, LogSince{Bytes: 1000, Entries: 1, LastTook: time.Second, Rested: 3*time.Second - 1}, false},
		{"rested less, entry cap", p, LogSince{Bytes: 10, Entries: 1000, LastTook: time.Second, Rested: time.Second}, false},
		{"defaults: many small entries", def, LogSince{Bytes: 2 << 20, Entries: 8192, SnapshotBytes: 350 << 20}, true},
	} {
		if got := tc.p.Due(tc.l); got != tc.want {
			t.Errorf("%s: due(%+v) = %v, want %v (threshold %d bytes)", tc.name, tc.l, got, tc.want, tc.p.thresholdBytes(tc.l.SnapshotBytes))
		}
	}
}

// After failed snapshots the checks wait longer, doubling, to a bound.
func TestSnapshotCheckWait(t *testing.T) {
	for _, tc := range []struct {
		failures int
		jitter   float64
		want     time.Duration
	}{
		{0, 0, 2 * time.Second}, {0, 0.5, 3 * time.Second}, {1, 0, 4 * time.Second},
		{3, 0, 16 * time.Second}, {5, 0.5, 96 * time.Second}, {40, 0.5, 96 * time.Second},
	} {
		if got := snapshotCheckWait(2*time.Second, tc.failures, tc.jitter); got != tc.want {
			t.Errorf("%d failures, jitter %v: wait %s, want %s", tc.failures, tc.jitter, got, tc.want)
		}
	}
}

// The meter counts from the state each snapshot captured, not from when
// the snapshot finished, and a restore starts it anew.
func TestLogMeter(t *testing.T) {
	var m LogMeter
	entry := func(n int) *raft.Log { return &raft.Log{Data: make([]byte, n)} }
	m.applied([]*raft.Log{entry(10), entry(20)})
	at := m.mark()
	m.applied([]*raft.Log{entry(5)}) // applied while the snapshot is written
	m.snapshotted(at, 1000)
	if got, want := m.Since(), (LogSince{Bytes: 5, Entries: 1, SnapshotBytes: 1000}); got != want {
		t.Fatalf("after a snapshot: %+v, want %+v", got, want)
	}
	m.applied([]*raft.Log{entry(7)})
	m.restored(300)
	if got, want := m.Since(), (LogSince{SnapshotBytes: 300}); got != want {
		t.Fatalf("after a restore: %+v, want %+v", got, want)
	}
	if took, rested := m.rest(time.Unix(10, 0)); took != 0 || rested != 0 {
		t.Fatalf("before any timed snapshot: took %s, rested %s", took, rested)
	}
	m.timed(time.Unix(10, 0), time.Second)
	if took, rested := m.rest(time.Unix(12, 0)); took != time.Second || rested != 2*time.Second {
		t.Fatalf("took %s, rested %s; want 1s, 2s", took, rested)
	}
	m.snapshotted(at, 2000) // captured before the restore: changes nothing but the count
	m.applied([]*raft.Log{entry(1)})
	if got, want := m.Since(), (LogSince{Bytes: 1, Entries: 1, SnapshotBytes: 300}); got != want || m.Taken() != 2 {
		t.Fatalf("after a stale snapshot: %+v (%d taken), want %+v (2)", got, m.Taken(), want)
	}
}
