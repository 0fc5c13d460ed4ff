package server

import (
	"context"
	"math"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/raft"
	"github.com/weft-sched/weft/fsm"
	"github.com/weft-sched/weft/internal/clock"
	"github.com/weft-sched/weft/internal/testutil"
	"github.com/weft-sched/weft/scheduler"
)

func TestSnapshotPolicyDue(t *testing.T) {
	p := snapshotPolicy{MinLogBytes: 1000, LogPercent: 50, MaxEntries: 100}
	def := snapshotPolicy{MinLogBytes: DefaultSnapshotMinLogBytes, LogPercent: DefaultSnapshotLogPercent, MaxEntries: DefaultSnapshotMaxEntries}
	for _, tc := range []struct {
		name string
		p    snapshotPolicy
		l    logSinceSnapshot
		want bool
	}{
		{"nothing new", p, logSinceSnapshot{}, false},
		{"nothing new, a snapshot behind", p, logSinceSnapshot{SnapshotBytes: 1}, false},
		{"young cluster below the floor", p, logSinceSnapshot{Bytes: 999, Entries: 10}, false},
		{"young cluster at the floor", p, logSinceSnapshot{Bytes: 1000, Entries: 10}, true},
		{"small state: the floor, not the share", p, logSinceSnapshot{Bytes: 999, Entries: 10, SnapshotBytes: 100}, false},
		{"large state below its share", p, logSinceSnapshot{Bytes: 4999, Entries: 99, SnapshotBytes: 10000}, false},
		{"large state at its share", p, logSinceSnapshot{Bytes: 5000, Entries: 1, SnapshotBytes: 10000}, true},
		{"entry cap, few bytes", p, logSinceSnapshot{Bytes: 10, Entries: 100, SnapshotBytes: 10000}, true},
		{"one below the entry cap", p, logSinceSnapshot{Bytes: 10, Entries: 99}, false},
		{"share overflows", snapshotPolicy{MinLogBytes: 1, LogPercent: 10000, MaxEntries: math.MaxUint64},
			logSinceSnapshot{Bytes: math.MaxUint64 - 1, Entries: 1, SnapshotBytes: math.MaxUint64}, false},
		// Defaults, with the 1 M container state of docs/operations.md
		// (a 350 MB snapshot): 17.5 MB of log, ~48 plans of 4,096.
		{"defaults: 1M containers, 17 MB of plans", def, logSinceSnapshot{Bytes: 17 << 20, Entries: 46, SnapshotBytes: 350 << 20}, false},
		{"defaults: 1M containers, 17.5 MB of plans", def, logSinceSnapshot{Bytes: 17.5 * (1 << 20), Entries: 48, SnapshotBytes: 350 << 20}, true},
		{"defaults: young cluster, 3 MB", def, logSinceSnapshot{Bytes: 3 << 20, Entries: 500}, false},
		{"defaults: young cluster, 4 MB", def, logSinceSnapshot{Bytes: 4 << 20, Entries: 500}, true},
		{"defaults: 80 MB state, 3.9 MB of log", def, logSinceSnapshot{Bytes: 39 << 20 / 10, Entries: 500, SnapshotBytes: 80 << 20}, false},
		{"defaults: 100 MB state, 4.9 MB of log", def, logSinceSnapshot{Bytes: 49 << 20 / 10, Entries: 500, SnapshotBytes: 100 << 20}, false},
		{"defaults: 100 MB state, 5 MB of log", def, logSinceSnapshot{Bytes: 5 << 20, Entries: 500, SnapshotBytes: 100 << 20}, true},
		{"rested 3 times the last snapshot", p, logSinceSnapshot{Bytes: 1000, Entries: 1, LastTook: time.Second, Rested: 3 * time.Second}, true},
		{"rested less", p, logSinceSnapshot{Bytes: 1000, Entries: 1, LastTook: time.Second, Rested: 3*time.Second - 1}, false},
		{"rested less, entry cap", p, logSinceSnapshot{Bytes: 10, Entries: 1000, LastTook: time.Second, Rested: time.Second}, false},
		{"defaults: many small entries", def, logSinceSnapshot{Bytes: 2 << 20, Entries: 8192, SnapshotBytes: 350 << 20}, true},
	} {
		if got := tc.p.due(tc.l); got != tc.want {
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
	var m logMeter
	entry := func(n int) *raft.Log { return &raft.Log{Data: make([]byte, n)} }
	m.applied([]*raft.Log{entry(10), entry(20)})
	at := m.mark()
	m.applied([]*raft.Log{entry(5)}) // applied while the snapshot is written
	m.snapshotted(at, 1000)
	if got, want := m.since(), (logSinceSnapshot{Bytes: 5, Entries: 1, SnapshotBytes: 1000}); got != want {
		t.Fatalf("after a snapshot: %+v, want %+v", got, want)
	}
	m.applied([]*raft.Log{entry(7)})
	m.restored(300)
	if got, want := m.since(), (logSinceSnapshot{SnapshotBytes: 300}); got != want {
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
	if got, want := m.since(), (logSinceSnapshot{Bytes: 1, Entries: 1, SnapshotBytes: 300}); got != want || m.taken() != 2 {
		t.Fatalf("after a stale snapshot: %+v (%d taken), want %+v (2)", got, m.taken(), want)
	}
}

// snapshotServer starts one server whose snapshot loop runs on a fake
// clock (so only the test's checks, or its advancing of the clock, take
// snapshots), with a 16 KiB floor, a share of 100% and no entry cap.
func snapshotServer(t *testing.T) (*testCluster, *Server, *clock.Fake) {
	c := newTestCluster(t)
	fake := clock.NewFake(time.Unix(2_000_000_000, 0))
	c.clock = fake
	c.tune = func(cfg *Config) {
		cfg.RaftSnapshotInterval = time.Second
		cfg.RaftSnapshotMinLogBytes = 16 << 10
		cfg.RaftSnapshotLogPercent = 100
		cfg.RaftSnapshotThreshold = math.MaxUint64
	}
	s := c.start("s1", 1)
	c.waitForLeader()
	return c, s, fake
}

// writeNode commits a node registration of about size bytes and returns
// the entry's length.
func writeNode(t *testing.T, s *Server, i, size int) uint64 {
	t.Helper()
	buf, err := fsm.Encode(fsm.NodeRegisterType, &fsm.NodeRegisterRequest{ID: "n" + strconv.Itoa(i),
		Address: "127.0.0.1:8049", Rack: strings.Repeat("r", size), Capacity: scheduler.Resources{MemoryMB: 1024, Vcores: 1}})
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := s.apply(context.Background(), buf); err != nil {
		t.Fatal(err)
	}
	return uint64(len(buf))
}

// lastSnapshot returns the newest snapshot in s's data dir.
func lastSnapshot(t *testing.T, s *Server) *raft.SnapshotMeta {
	t.Helper()
	store, err := raft.NewFileSnapshotStore(s.config.DataDir+"/raft", 2, nil)
	if err != nil {
		t.Fatal(err)
	}
	metas, err := store.List()
	if err != nil || len(metas) == 0 {
		t.Fatalf("snapshots: %v (%d)", err, len(metas))
	}
	return metas[0]
}

// Under a stream of writes of growing state, a server snapshots exactly
// when the policy says: first at the floor, then each time the log since
// reaches the last snapshot's size; the meter's figures are the log's bytes
// and the snapshot's size on disk; and a restart restores that snapshot
// and counts what it replays.
func TestServerSnapshotsWhenTheLogOutgrowsTheSnapshot(t *testing.T) {
	c, s, _ := snapshotServer(t)
	start := s.logMeter.since()
	if start.SnapshotBytes != 0 || s.logMeter.taken() != 0 {
		t.Fatalf("a new cluster: %+v, %d snapshots", start, s.logMeter.taken())
	}
	var taken []logSinceSnapshot // the log at each snapshot
	var written, sinceSnap uint64
	for i := 0; i < 200; i++ {
		n := writeNode(t, s, i, 1000)
		written += n
		sinceSnap += n
		before := s.logMeter.since()
		if before.Bytes != start.Bytes+sinceSnap {
			t.Fatalf("write %d: the meter counts %d bytes since the snapshot, the log holds %d", i, before.Bytes, start.Bytes+sinceSnap)
		}
		want := s.snapPolicy.due(before)
		if got, err := s.maybeSnapshot(); got != want || err != nil {
			t.Fatalf("write %d: snapshot %v (%v) with %+v, the policy says %v", i, got, err, before, want)
		}
		if !want {
			continue
		}
		taken = append(taken, before)
		after := s.logMeter.since()
		meta := lastSnapshot(t, s)
		if after.Bytes != 0 || after.Entries != 0 || after.SnapshotBytes != uint64(meta.Size) || meta.Index != s.State().Index() {
			t.Fatalf("after snapshot %d: meter %+v, newest snapshot index %d size %d, state index %d",
				len(taken), after, meta.Index, meta.Size, s.State().Index())
		}
		start, sinceSnap = after, 0
	}
	if uint64(len(taken)) != s.logMeter.taken() || len(taken) < 3 {
		t.Fatalf("%d snapshots seen, %d counted: want at least 3", len(taken), s.logMeter.taken())
	}
	// The first came at the floor; each later one at the last one's size.
	if taken[0].SnapshotBytes != 0 || taken[0].Bytes < 16<<10 || taken[0].Bytes >= 16<<10+1100 {
		t.Fatalf("first snapshot at %+v, want just past the 16 KiB floor", taken[0])
	}
	for _, l := range taken[1:] {
		if min := max(16<<10, l.SnapshotBytes); l.Bytes < min || l.Bytes >= min+1100 {
			t.Fatalf("snapshot at %+v, want just past %d bytes", l, min)
		}
	}

	// Restarted, it restores the newest snapshot and replays the rest.
	meta := lastSnapshot(t, s)
	c.stop("s1")
	s = c.start("s1", 1)
	c.waitForLeader()
	got := s.logMeter.since()
	if got.SnapshotBytes != uint64(meta.Size) || got.Bytes < sinceSnap || got.Bytes > sinceSnap+4096 {
		t.Fatalf("after a restart: %+v, want the %d byte snapshot and ~%d bytes replayed", got, meta.Size, sinceSnap)
	}
}

// The loop checks on its own, on the server's clock, and takes no
// snapshot while the policy says no.
func TestSnapshotLoopChecksOnTheClock(t *testing.T) {
	_, s, fake := snapshotServer(t)
	writeNode(t, s, 0, 100)
	for i := 0; i < 5; i++ {
		fake.Advance(2 * time.Second)
	}
	if n := s.logMeter.taken(); n != 0 {
		t.Fatalf("%d snapshots of %d bytes of log, under the 16 KiB floor", n, s.logMeter.since().Bytes)
	}
	for i := 1; s.logMeter.since().Bytes < 16<<10; i++ {
		writeNode(t, s, i, 1000)
	}
	testutil.WaitFor(t, 10*time.Second, func() bool {
		fake.Advance(2 * time.Second)
		return s.logMeter.taken() == 1
	})
	if l := s.logMeter.since(); l.Bytes != 0 || l.SnapshotBytes == 0 {
		t.Fatalf("after the loop's snapshot: %+v", l)
	}
}
