package sim

import (
	"bufio"
	"encoding/json"
	"io"
	"os"
	"time"
)

// ServerRestart is one server's return from a restart, read from its log
// (JSON lines at info level). Times are in milliseconds from when the
// servers were signalled.
type ServerRestart struct {
	ID string `json:"id"`
	// SnapshotIndex and SnapshotBytes describe the snapshot it restored
	// (zero: it had none and replays its whole log); RestoreMS is how long
	// reading it into the state took, and Nodes, Apps and Containers what
	// it held, as the server logged them.
	SnapshotIndex uint64  `json:"snapshot_index"`
	SnapshotBytes int64   `json:"snapshot_bytes"`
	RestoreMS     float64 `json:"restore_ms"`
	Nodes         int     `json:"nodes_restored"`
	Apps          int     `json:"apps_restored"`
	Containers    int     `json:"containers_restored"`
	// StartedMS is when it served RPC, its snapshot restored.
	StartedMS float64 `json:"started_ms"`
	// LeaderMS, ReadyMS and ReadyIndex are set on a server that led:
	// when it first took leadership, when it first had applied its
	// barrier and the index applied then (the entries after SnapshotIndex
	// were replayed from the log). Leaderships counts the times it took
	// leadership: more than one across the servers is a leader that lost
	// it again.
	LeaderMS    float64 `json:"leader_ms,omitempty"`
	ReadyMS     float64 `json:"ready_ms,omitempty"`
	ReadyIndex  uint64  `json:"ready_index,omitempty"`
	Leaderships int     `json:"leaderships"`
}

// hclogTime is hclog's default timestamp layout, for a server that does
// not write RFC 3339 ones.
const hclogTime = "2006-01-02T15:04:05.000Z0700"

// logOffsets returns each server's log size: what a restart appends
// starts there.
func (s *Servers) logOffsets() []int64 {
	out := make([]int64, len(s.ids))
	for i := range s.ids {
		if fi, err := os.Stat(s.LogFile(i)); err == nil {
			out[i] = fi.Size()
		}
	}
	return out
}

// restartLogs reads what each server logged from offsets on.
func (s *Servers) restartLogs(offsets []int64, began time.Time) []ServerRestart {
	out := make([]ServerRestart, len(s.ids))
	for i, id := range s.ids {
		out[i].ID = id
		f, err := os.Open(s.LogFile(i))
		if err != nil {
			continue
		}
		if _, err := f.Seek(offsets[i], io.SeekStart); err == nil {
			parseRestartLog(f, began, &out[i])
		}
		f.Close()
	}
	return out
}

// parseRestartLog fills sr from a server's JSON log lines written after
// began: the snapshot raft restored, the FSM's restore line, the server's
// start, and its first leadership and readiness. Lines it does not know, or
// cannot read, are skipped: a figure missing from the log stays zero.
func parseRestartLog(r io.Reader, began time.Time, sr *ServerRestart) {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		var line map[string]any
		if json.Unmarshal(sc.Bytes(), &line) != nil {
			continue
		}
		msg, _ := line["@message"].(string)
		stamp, _ := line["@timestamp"].(string)
		at, err := time.Parse(time.RFC3339Nano, stamp)
		if err != nil {
			if at, err = time.Parse(hclogTime, stamp); err != nil {
				continue
			}
		}
		since := ms(at.Sub(began))
		num := func(key string) float64 { v, _ := line[key].(float64); return v }
		switch msg {
		case "starting restore from snapshot": // hashicorp/raft
			sr.SnapshotIndex, sr.SnapshotBytes = uint64(num("last-index")), int64(num("size-in-bytes"))
		case "restored snapshot": // fsm.Restore
			sr.RestoreMS = num("duration_ms")
			sr.Nodes, sr.Apps, sr.Containers = int(num("nodes")), int(num("apps")), int(num("containers"))
		case "server started":
			sr.StartedMS = since
		case "cluster leadership acquired":
			if sr.Leaderships == 0 {
				sr.LeaderMS = since
			}
			sr.Leaderships++
		case "leader is ready":
			if sr.ReadyIndex == 0 {
				sr.ReadyMS, sr.ReadyIndex = since, uint64(num("index"))
			}
		}
	}
}
