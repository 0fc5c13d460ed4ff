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
	"github.com/weft-sched/weft/internal/raftnode"
	"github.com/weft-sched/weft/internal/testutil"
	"github.com/weft-sched/weft/scheduler"
)

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
	start := s.logMeter.Since()
	if start.SnapshotBytes != 0 || s.logMeter.Taken() != 0 {
		t.Fatalf("a new cluster: %+v, %d snapshots", start, s.logMeter.Taken())
	}
	var taken []raftnode.LogSince // the log at each snapshot
	var written, sinceSnap uint64
	for i := 0; i < 200; i++ {
		n := writeNode(t, s, i, 1000)
		written += n
		sinceSnap += n
		before := s.logMeter.Since()
		if before.Bytes != start.Bytes+sinceSnap {
			t.Fatalf("write %d: the meter counts %d bytes since the snapshot, the log holds %d", i, before.Bytes, start.Bytes+sinceSnap)
		}
		want := s.snapPolicy.Due(before)
		if got, err := s.node.MaybeSnapshot(); got != want || err != nil {
			t.Fatalf("write %d: snapshot %v (%v) with %+v, the policy says %v", i, got, err, before, want)
		}
		if !want {
			continue
		}
		taken = append(taken, before)
		after := s.logMeter.Since()
		meta := lastSnapshot(t, s)
		if after.Bytes != 0 || after.Entries != 0 || after.SnapshotBytes != uint64(meta.Size) || meta.Index != s.State().Index() {
			t.Fatalf("after snapshot %d: meter %+v, newest snapshot index %d size %d, state index %d",
				len(taken), after, meta.Index, meta.Size, s.State().Index())
		}
		start, sinceSnap = after, 0
	}
	if uint64(len(taken)) != s.logMeter.Taken() || len(taken) < 3 {
		t.Fatalf("%d snapshots seen, %d counted: want at least 3", len(taken), s.logMeter.Taken())
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
	got := s.logMeter.Since()
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
	if n := s.logMeter.Taken(); n != 0 {
		t.Fatalf("%d snapshots of %d bytes of log, under the 16 KiB floor", n, s.logMeter.Since().Bytes)
	}
	for i := 1; s.logMeter.Since().Bytes < 16<<10; i++ {
		writeNode(t, s, i, 1000)
	}
	testutil.WaitFor(t, 10*time.Second, func() bool {
		fake.Advance(2 * time.Second)
		return s.logMeter.Taken() == 1
	})
	if l := s.logMeter.Since(); l.Bytes != 0 || l.SnapshotBytes == 0 {
		t.Fatalf("after the loop's snapshot: %+v", l)
	}
}
