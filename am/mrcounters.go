package am

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"time"

	wrpc "github.com/weft-sched/weft/rpc"
	"github.com/weft-sched/weft/scheduler"
)

// Counter names of a MapReduce job (SPEC §19), reported to the servers.
const (
	CounterMapsDataLocal  = "maps.data_local"
	CounterMapsRackLocal  = "maps.rack_local"
	CounterMapsOffRack    = "maps.off_rack"
	CounterMapsAnywhere   = "maps.anywhere" // splits that name no node or rack
	CounterMapsLostRerun  = "maps.rerun_lost_output"
	CounterMaps           = "maps.total"
	CounterReduces        = "reduces.total"
	CounterMapsDone       = "maps.done"
	CounterReducesDone    = "reduces.done"
	CounterMapInputBytes  = "map.input_bytes"
	CounterMapRecords     = "map.output_records"
	CounterShuffleNode    = "shuffle.bytes.node_local"
	CounterShuffleRack    = "shuffle.bytes.rack_local"
	CounterShuffleOffRack = "shuffle.bytes.off_rack"
	CounterShuffleTND     = "shuffle.tnd"
	CounterShuffleWTND    = "shuffle.wtnd"
	CounterMapPhaseMS     = "time.map_phase_ms"
	CounterJobMS          = "time.job_ms"
)

// ReduceCounter is the name of reduce r's counter what ("tnd", "wtnd").
func ReduceCounter(r int, what string) string { return fmt.Sprintf("reduce.%05d.%s", r, what) }

// countShuffle adds reduce r's shuffle to the counters: bytes by distance,
// and its TND and WTND from the nodes it fetched from (SPEC §19).
func (d *MapReduce) countShuffle(r int, c wrpc.ContainerInfo, fetched []int64) {
	t := &d.reduces[r]
	byNode := map[string]int64{}
	for k, node := range t.feedNodes {
		b := d.maps[t.feeds[k].Map].sizes[r] // what the map wrote
		if fetched != nil {
			b = fetched[k] // what the reduce read
		}
		byNode[node] += b
		switch scheduler.Distance(node, c.NodeID, d.rackOf) {
		case scheduler.NDSameNode:
			d.counters[CounterShuffleNode] += b
		case scheduler.NDSameRack:
			d.counters[CounterShuffleRack] += b
		default:
			d.counters[CounterShuffleOffRack] += b
		}
	}
	feeders := make([]scheduler.Feeder, 0, len(byNode))
	for n, b := range byNode {
		feeders = append(feeders, scheduler.Feeder{Node: n, Bytes: b})
	}
	tnd, wtnd := scheduler.TND(feeders, c.NodeID, d.rackOf), scheduler.WTND(feeders, c.NodeID, d.rackOf)
	d.counters[ReduceCounter(r, "tnd")], d.counters[ReduceCounter(r, "wtnd")] = tnd, wtnd
	d.counters[CounterShuffleTND] += tnd
	d.counters[CounterShuffleWTND] += wtnd
	d.logger.Info("reduce done", "reduce", r, "node", c.NodeID, "tnd", tnd, "wtnd", wtnd)
}

func (d *MapReduce) readIndex(ctx context.Context, c wrpc.ContainerInfo) (*mapIndex, error) {
	var idx mapIndex
	if err := d.readJSON(ctx, c, mapIndexFile, &idx); err != nil {
		return nil, err
	}
	if len(idx.Partitions) != len(d.reduces) {
		return nil, fmt.Errorf("the index has %d partitions, not %d", len(idx.Partitions), len(d.reduces))
	}
	return &idx, nil
}

// maxReport bounds a task's report file the AM reads.
const maxReport = 4 << 20

// readJSON reads a small file a completed task left and decodes it.
func (d *MapReduce) readJSON(ctx context.Context, c wrpc.ContainerInfo, path string, v any) error {
	var buf []byte
	for {
		rctx, cancel := context.WithTimeout(ctx, 30*time.Second)
		resp, err := d.client.ContainerOutput(rctx, c, wrpc.ContainerOutputRequest{Path: path, Offset: int64(len(buf))})
		cancel()
		if err != nil {
			return err
		}
		if resp.Size > maxReport {
			return fmt.Errorf("%s is %d bytes; at most %d", path, resp.Size, maxReport)
		}
		buf = append(buf, resp.Data...)
		if int64(len(buf)) >= resp.Size || len(resp.Data) == 0 {
			break
		}
	}
	return json.Unmarshal(buf, v)
}

func (d *MapReduce) exitWhy(ctx context.Context, c wrpc.ContainerInfo) string {
	why := fmt.Sprintf("exit code %s", fmtExit(c.ExitCode))
	if scheduler.ExitReason(c.Reason) != scheduler.ReasonExited {
		why = c.Reason
	}
	if line := d.lastStderrLine(ctx, c); line != "" {
		return why + ": " + line
	}
	if c.Diagnostics != "" && c.Diagnostics != why {
		why += ": " + c.Diagnostics
	}
	return why
}

// lastStderrLine is the last line a task wrote to stderr (its first 64
// KiB), which says why it failed far better than its exit code; "" when
// it cannot be read.
func (d *MapReduce) lastStderrLine(ctx context.Context, c wrpc.ContainerInfo) string {
	rctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	resp, err := d.client.ContainerLogs(rctx, c, wrpc.ContainerLogsRequest{Stream: wrpc.StreamStderr, Limit: 64 << 10})
	if err != nil {
		return ""
	}
	lines := strings.Split(strings.TrimSpace(string(resp.Data)), "\n")
	line := strings.TrimSpace(lines[len(lines)-1])
	if len(line) > 512 {
		line = line[:512] + "…"
	}
	return line
}
