package raftnode

import (
	"errors"
	"io"
	"math"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/raft"
)

// When a server takes a Raft snapshot (docs/operations.md, "Snapshots and
// restart time"). A restart restores the last snapshot and replays the log
// committed since, so it costs restore(state) + replay(log since); a
// snapshot costs an encoding of the whole state. Counting entries, as
// Raft's own policy does, measures neither: an entry is a few hundred bytes
// (a node's report) or 400 KB (a plan of 4,096 placements). So a server
// counts the bytes of log it applied since its last snapshot, and takes one
// when they pass a share of that snapshot's size (never less than a floor):
// the replay stays a bounded share of the restore, and encoding a state of S
// bytes once per share × S bytes of log costs a bounded amount per byte
// written, whatever S grows to. Redis rewrites its append-only file on the
// same rule (auto-aof-rewrite-percentage, with a minimum size).

// Snapshot policy defaults; internal/config holds the same values for
// the servers' and routers' settings.
const (
	DefaultSnapshotInterval    = 2 * time.Second
	DefaultSnapshotMinLogBytes = 4 << 20
	DefaultSnapshotLogPercent  = 5
	DefaultSnapshotMaxEntries  = 8192
)

// SnapshotPolicy decides when the log since the last snapshot is worth
// compacting into a new one.
type SnapshotPolicy struct {
	// MinLogBytes is the least log that is worth a snapshot: a young
	// cluster's first snapshot comes once this much was committed.
	MinLogBytes uint64
	// LogPercent is the share of the last snapshot's size, in percent,
	// that the log since it must reach.
	LogPercent uint64
	// MaxEntries snapshots once this many entries are new, whatever their
	// bytes: each entry costs a replay something besides its bytes.
	MaxEntries uint64
}

// LogSince is what a server committed since its last snapshot (or
// since the snapshot it restored or installed), and that snapshot's size.
type LogSince struct {
	Bytes, Entries uint64
	// SnapshotBytes is the size of the last snapshot; 0 before the first.
	SnapshotBytes uint64
	// LastTook is how long this server's last snapshot check that took
	// one spent on it (0 if none did), Rested how long ago it ended.
	LastTook, Rested time.Duration
}

// snapshotRestFactor keeps a server from snapshotting more than a quarter
// of the time: after a snapshot that took d, the next waits 3 × d. Where
// the log grows as fast as the state it is a share of (a state of a
// million containers taking 25,000 more a second), the byte rule alone
// would snapshot back to back.
const snapshotRestFactor = 3

// thresholdBytes is the log the policy lets grow behind a snapshot of
// snapshotBytes: max(MinLogBytes, LogPercent% of it).
func (p SnapshotPolicy) thresholdBytes(snapshotBytes uint64) uint64 {
	share := float64(snapshotBytes) * float64(p.LogPercent) / 100
	if share >= math.MaxUint64 {
		return math.MaxUint64
	}
	return max(p.MinLogBytes, uint64(share))
}

// Due reports whether l calls for a snapshot: something is new, the new
// log passes the byte threshold or the entry cap, and the server rested
// snapshotRestFactor times the last snapshot's duration since it.
func (p SnapshotPolicy) Due(l LogSince) bool {
	if l.Entries == 0 || l.Rested < snapshotRestFactor*l.LastTook {
		return false
	}
	return l.Bytes >= p.thresholdBytes(l.SnapshotBytes) || l.Entries >= p.MaxEntries
}

// LogMeter counts the log a server applies and where its last snapshot
// stands in that count. The FSM goroutine adds to it; the snapshot loop
// and metrics read it.
type LogMeter struct {
	bytes, entries atomic.Uint64 // applied since this server started

	mu sync.Mutex
	// at is the count when the state of the last snapshot (taken,
	// restored or installed) was captured; size is that snapshot's size.
	at        logMark
	size      uint64
	snapshots uint64 // snapshots this server wrote
	// lastEnd and lastTook time the snapshot loop's last snapshot.
	lastEnd  time.Time
	lastTook time.Duration
}

// logMark is a point in a LogMeter's counts.
type logMark struct{ bytes, entries uint64 }

func (m *LogMeter) applied(logs []*raft.Log) {
	var n uint64
	for _, l := range logs {
		n += uint64(len(l.Data))
	}
	m.bytes.Add(n)
	m.entries.Add(uint64(len(logs)))
}

func (m *LogMeter) mark() logMark {
	return logMark{bytes: m.bytes.Load(), entries: m.entries.Load()}
}

// snapshotted records a snapshot of size bytes of the state captured at
// mark. A snapshot of a state older than the last one recorded (a
// restore overtook it) changes nothing.
func (m *LogMeter) snapshotted(at logMark, size uint64) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.snapshots++
	if at.bytes < m.at.bytes {
		return
	}
	m.at, m.size = at, size
}

// restored records that the state was replaced by a snapshot of size bytes.
func (m *LogMeter) restored(size uint64) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.at, m.size = m.mark(), size
}

// Since returns the log applied since the last snapshot.
func (m *LogMeter) Since() LogSince {
	now := m.mark()
	m.mu.Lock()
	defer m.mu.Unlock()
	return LogSince{Bytes: now.bytes - m.at.bytes, Entries: now.entries - m.at.entries, SnapshotBytes: m.size}
}

// timed records that the snapshot loop's snapshot ended at end and took took.
func (m *LogMeter) timed(end time.Time, took time.Duration) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.lastEnd, m.lastTook = end, took
}

// rest returns how long the loop's last snapshot took and how long before
// now it ended (0, 0 if there was none).
func (m *LogMeter) rest(now time.Time) (took, rested time.Duration) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.lastEnd.IsZero() {
		return 0, 0
	}
	return m.lastTook, now.Sub(m.lastEnd)
}

// Taken returns how many snapshots this server wrote.
func (m *LogMeter) Taken() uint64 {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.snapshots
}

// meteredFSM is the FSM as Raft sees it: the process's, with every applied entry,
// snapshot and restore counted in a LogMeter. Raft applies, captures
// snapshots and restores on one goroutine, so the count at a capture is
// exactly the log the snapshot holds.
type meteredFSM struct {
	raft.BatchingFSM
	meter *LogMeter
}

var _ raft.BatchingFSM = (*meteredFSM)(nil)

// Metered returns f with every entry it applies, snapshot and restore
// counted in m, as a Node runs it (benchmarks of the snapshot policy use
// it without a Node).
func Metered(f raft.BatchingFSM, m *LogMeter) raft.BatchingFSM {
	return &meteredFSM{BatchingFSM: f, meter: m}
}

// Apply counts and applies one entry.
func (m *meteredFSM) Apply(l *raft.Log) any { return m.ApplyBatch([]*raft.Log{l})[0] }

// ApplyBatch counts and applies entries.
func (m *meteredFSM) ApplyBatch(logs []*raft.Log) []any {
	m.meter.applied(logs)
	return m.BatchingFSM.ApplyBatch(logs)
}

// Snapshot captures the state and the count it stands at.
func (m *meteredFSM) Snapshot() (raft.FSMSnapshot, error) {
	snap, err := m.BatchingFSM.Snapshot()
	if err != nil {
		return nil, err
	}
	return &meteredSnapshot{FSMSnapshot: snap, meter: m.meter, at: m.meter.mark()}, nil
}

// Restore replaces the state and starts the count since a snapshot anew.
func (m *meteredFSM) Restore(r io.ReadCloser) error {
	cr := &countingReader{ReadCloser: r}
	if err := m.BatchingFSM.Restore(cr); err != nil {
		return err
	}
	m.meter.restored(cr.n)
	return nil
}

// meteredSnapshot records its size in the meter once it is written.
type meteredSnapshot struct {
	raft.FSMSnapshot
	meter *LogMeter
	at    logMark
}

func (s *meteredSnapshot) Persist(sink raft.SnapshotSink) error {
	cs := &countingSink{SnapshotSink: sink}
	if err := s.FSMSnapshot.Persist(cs); err != nil {
		return err
	}
	s.meter.snapshotted(s.at, cs.n)
	return nil
}

type countingSink struct {
	raft.SnapshotSink
	n uint64
}

func (c *countingSink) Write(p []byte) (int, error) {
	n, err := c.SnapshotSink.Write(p)
	c.n += uint64(n)
	return n, err
}

type countingReader struct {
	io.ReadCloser
	n uint64
}

func (c *countingReader) Read(p []byte) (int, error) {
	n, err := c.ReadCloser.Read(p)
	c.n += uint64(n)
	return n, err
}

// snapshotLoop checks the policy every interval to twice it (random, so
// that servers applying the same log do not all snapshot at once) until
// shutdown. Raft's own snapshot policy is off (New): every snapshot but a
// follower's install comes from here, one at a time.
func (n *Node) snapshotLoop(shutdown <-chan struct{}) {
	failures := 0
	for {
		select {
		case <-shutdown:
			return
		case <-n.clock.After(snapshotCheckWait(n.cfg.SnapshotInterval, failures, rand.Float64())):
		}
		switch _, err := n.MaybeSnapshot(); {
		case err != nil:
			failures++
		default:
			failures = 0
		}
	}
}

// maxSnapshotBackoff bounds how much longer than usual the check after
// failed snapshots waits: at most 32 intervals (64–128 s at 2 s).
const maxSnapshotBackoff = 5

// snapshotCheckWait is the wait before the next check: interval times
// 1 + jitter (jitter in [0, 1)), doubled for each snapshot that failed in
// a row, up to 2^maxSnapshotBackoff times, so that a failing disk is not
// handed a whole state to encode every few seconds.
func snapshotCheckWait(interval time.Duration, failures int, jitter float64) time.Duration {
	return time.Duration(float64(interval<<min(failures, maxSnapshotBackoff)) * (1 + jitter))
}

// MaybeSnapshot takes a snapshot if the policy calls for one and reports
// whether it did. A failure is logged and returned; the next check tries
// again.
func (n *Node) MaybeSnapshot() (bool, error) {
	if n.halted() {
		return false, nil // a halted FSM refuses snapshots
	}
	since := n.meter.Since()
	start := n.clock.Now()
	since.LastTook, since.Rested = n.meter.rest(start)
	n.snapshotLog(since.Bytes, since.SnapshotBytes)
	if !n.cfg.Snapshots.Due(since) {
		return false, nil
	}
	err := n.raft.Snapshot().Error()
	end := n.clock.Now()
	n.meter.timed(end, end.Sub(start))
	switch {
	case errors.Is(err, raft.ErrNothingNewToSnapshot), errors.Is(err, raft.ErrRaftShutdown):
		return false, nil
	case err != nil:
		n.logger.Warn("raft snapshot failed; a later check tries again", "error", err,
			"log_bytes", since.Bytes, "log_entries", since.Entries)
		return false, err
	}
	after := n.meter.Since()
	n.snapshotLog(after.Bytes, after.SnapshotBytes)
	n.logger.Info("took a raft snapshot", "log_bytes", since.Bytes, "log_entries", since.Entries,
		"previous_snapshot_bytes", since.SnapshotBytes, "snapshot_bytes", after.SnapshotBytes, "took", end.Sub(start))
	return true, nil
}
