package sim

import (
	"strings"
	"testing"
	"time"
)

// A restarted leader's log, as weft server writes it with -log-json at
// info level: the snapshot raft restored, the FSM's restore line, the
// start, and leadership then readiness — the first, of two. Lines of no interest and lines
// that are not JSON are passed over.
func TestParseRestartLog(t *testing.T) {
	began := time.Date(2026, 11, 23, 10, 0, 0, 0, time.UTC)
	log := strings.Join([]string{
		`{"@level":"info","@message":"starting restore from snapshot","@module":"weft.raft","@timestamp":"2026-11-23T10:00:00.100000Z","id":"2-497-1","last-index":497,"last-term":2,"size-in-bytes":326418}`,
		`{"@level":"info","@message":"restored snapshot","@module":"weft.fsm","@timestamp":"2026-11-23T10:00:00.116000Z","index":497,"duration_ms":16,"nodes":50,"apps":20,"containers":760}`,
		`panic: not a log line`,
		`{"@level":"info","@message":"server started","@module":"weft.server","@timestamp":"2026-11-23T10:00:00.201000Z"}`,
		`{"@level":"info","@message":"entering follower state","@module":"weft.raft","@timestamp":"2026-11-23T10:00:00.202000Z"}`,
		`{"@level":"info","@message":"cluster leadership acquired","@module":"weft.server","@timestamp":"2026-11-23T10:00:01.546000Z"}`,
		`{"@level":"info","@message":"leader is ready","@module":"weft.server","@timestamp":"2026-11-23T10:00:01.646+0000","index":510}`,
		`{"@level":"info","@message":"cluster leadership lost","@module":"weft.server","@timestamp":"2026-11-23T10:00:03.000000Z"}`,
		`{"@level":"info","@message":"cluster leadership acquired","@module":"weft.server","@timestamp":"2026-11-23T10:00:05.000000Z"}`,
		`{"@level":"info","@message":"leader is ready","@module":"weft.server","@timestamp":"2026-11-23T10:00:05.100000Z","index":530}`,
	}, "\n")
	var got ServerRestart
	parseRestartLog(strings.NewReader(log), began, &got)
	want := ServerRestart{SnapshotIndex: 497, SnapshotBytes: 326418, RestoreMS: 16, Nodes: 50, Apps: 20, Containers: 760,
		StartedMS: 201, LeaderMS: 1546, ReadyMS: 1646, ReadyIndex: 510, Leaderships: 2}
	if got != want {
		t.Errorf("parsed\n%+v\nwant\n%+v", got, want)
	}
}
