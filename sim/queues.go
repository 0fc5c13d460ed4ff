package sim

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"sync"
	"time"

	wrpc "github.com/weft-sched/weft/rpc"
)

// Each queue's share over time against its fair share (SPEC §17): every
// second the simulator asks the servers for the queue tree (Queue.List)
// and records, for each leaf queue, its used vcores, instantaneous fair
// share and steady fair share as fractions of the simulated cluster's
// vcores, and whether it had demand pending.

// QueuePoint is one leaf queue in one second of the run.
type QueuePoint struct {
	Second  int
	Queue   string
	Used    float64 // vcores used ÷ the cluster's vcores
	Fair    float64 // instantaneous fair share ÷ the cluster's vcores
	Steady  float64 // steady fair share ÷ the cluster's vcores
	Pending bool    // it asked for more than it had
}

// QueueSummary is a leaf queue's share over the run.
type QueueSummary struct {
	Queue      string  `json:"queue"`
	UsedMean   float64 `json:"used_share_mean"`
	FairMean   float64 `json:"fair_share_mean"`
	SteadyMean float64 `json:"steady_fair_share_mean"`
	// StarvedSeconds counts the seconds in which the queue had demand
	// pending and held less than half its fair share (the default
	// fair_share_preemption_threshold): what fair-share preemption is for.
	StarvedSeconds int `json:"starved_seconds"`
}

// queueWatch holds the samples; one goroutine adds, the result reads.
type queueWatch struct {
	mu     sync.Mutex
	points []QueuePoint
}

// watchQueues samples the queues every second until ctx ends; capacity is
// the simulated cluster's vcores.
func (r *Run) watchQueues(ctx context.Context, capacity int64) {
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	for {
		select {
		case <-tick.C:
		case <-ctx.Done():
			return
		}
		callCtx, cancel := context.WithTimeout(ctx, 2*time.Second)
		var resp wrpc.QueueListResponse
		err := r.client.Call(callCtx, "Queue.List", &wrpc.QueueListRequest{}, &resp)
		cancel()
		if err != nil {
			continue // a second without a sample: the leader was busy or changing
		}
		if r.warming.Load() {
			continue
		}
		second := int(time.Since(r.stats.Start()) / time.Second)
		share := func(v int64) float64 { return float64(v) / float64(max(1, capacity)) }
		r.queues.mu.Lock()
		for _, q := range resp.Queues {
			if !q.Leaf {
				continue
			}
			r.queues.points = append(r.queues.points, QueuePoint{Second: second, Queue: q.Name, Used: share(q.Used.Vcores),
				Fair: share(q.InstantaneousFairShare.Vcores), Steady: share(q.SteadyFairShare.Vcores), Pending: !q.Pending.IsZero()})
		}
		r.queues.mu.Unlock()
	}
}

// summarise returns the points and each queue's summary, by queue name.
func (w *queueWatch) summarise() ([]QueuePoint, []QueueSummary) {
	w.mu.Lock()
	points := slices.Clone(w.points)
	w.mu.Unlock()
	by := map[string]*QueueSummary{}
	n := map[string]int{}
	for _, p := range points {
		s := by[p.Queue]
		if s == nil {
			s = &QueueSummary{Queue: p.Queue}
			by[p.Queue] = s
		}
		n[p.Queue]++
		s.UsedMean += p.Used
		s.FairMean += p.Fair
		s.SteadyMean += p.Steady
		if p.Pending && p.Used < p.Fair/2 {
			s.StarvedSeconds++
		}
	}
	out := make([]QueueSummary, 0, len(by))
	for q, s := range by {
		k := float64(n[q])
		s.UsedMean, s.FairMean, s.SteadyMean = s.UsedMean/k, s.FairMean/k, s.SteadyMean/k
		out = append(out, *s)
	}
	slices.SortFunc(out, func(a, b QueueSummary) int { return cmp.Compare(a.Queue, b.Queue) })
	return points, out
}

// queuesCSV renders the points as queues.csv.
func queuesCSV(points []QueuePoint) string {
	b := []byte("second,queue,used_share,fair_share,steady_fair_share,pending\n")
	for _, p := range points {
		b = fmt.Appendf(b, "%d,%s,%.4f,%.4f,%.4f,%t\n", p.Second, p.Queue, p.Used, p.Fair, p.Steady, p.Pending)
	}
	return string(b)
}

// queueChart draws each queue's used share (solid) against its
// instantaneous fair share (dashed, same colour), in percent.
func queueChart(points []QueuePoint, summaries []QueueSummary) string {
	seconds := 0
	for _, p := range points {
		seconds = max(seconds, p.Second+1)
	}
	var lines []Line
	for i, s := range summaries {
		used, fair := make([]float64, seconds), make([]float64, seconds)
		for _, p := range points {
			if p.Queue == s.Queue {
				used[p.Second], fair[p.Second] = 100*p.Used, 100*p.Fair
			}
		}
		color := palette[i%len(palette)]
		lines = append(lines, Line{Name: s.Queue + " used", Color: color, Ys: used}, Line{Name: "fair share", Color: color, Ys: fair, Dashed: true})
	}
	return Chart("Each queue's share of the cluster against its fair share", "% of vcores", lines)
}
