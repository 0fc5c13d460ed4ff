package sim

import (
	"encoding/json"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/weft-sched/weft/scheduler"
)

// Result is what a run measured: Summary as summary.txt and summary.json,
// Series as series.csv and the charts.
type Result struct {
	Summary Summary
	Series  []SeriesPoint
	// Queues is each leaf queue's share every second, as queues.csv and
	// queue_shares.svg.
	Queues []QueuePoint
}

// Summary is a run's totals. Durations are in milliseconds in JSON.
type Summary struct {
	Nodes           int     `json:"nodes"`
	NodesRegistered int     `json:"nodes_registered"`
	DurationSeconds float64 `json:"duration_seconds"`
	RegisterSeconds float64 `json:"register_seconds"`
	// WarmupSeconds is how long the workload ran, after registration,
	// before the measured time began (Config.Warmup).
	WarmupSeconds   float64 `json:"warmup_seconds,omitempty"`
	AppsSubmitted   uint64  `json:"apps_submitted"`
	AppsFinished    uint64  `json:"apps_finished"`
	AppsFailed      uint64  `json:"apps_failed"`
	SubmitErrors    uint64  `json:"submit_errors"`
	LastSubmitError string  `json:"last_submit_error,omitempty"`
	AMsStarted      int64   `json:"ams_started"`
	TasksSubmitted  uint64  `json:"tasks_submitted"`
	TasksFinished   uint64  `json:"tasks_finished"`
	TasksOfFinished uint64  `json:"tasks_of_finished_apps"`
	TasksDoneOfFin  uint64  `json:"tasks_done_of_finished_apps"`
	Allocations     uint64  `json:"allocations"`
	Opportunistic   uint64  `json:"opportunistic_allocations"`
	AllocationsPerS float64 `json:"allocations_per_second"`
	AllocationsPeak uint64  `json:"allocations_peak_second"`
	AskToAllocP50MS float64 `json:"ask_to_allocation_p50_ms"`
	AskToAllocP99MS float64 `json:"ask_to_allocation_p99_ms"`
	// By who allocated: guaranteed containers (the leader), opportunistic
	// ones the leader allocated, and opportunistic ones AMRMProxies did.
	GuaranteedP50MS float64 `json:"guaranteed_ask_to_allocation_p50_ms"`
	GuaranteedP99MS float64 `json:"guaranteed_ask_to_allocation_p99_ms"`
	OppCentral      uint64  `json:"opportunistic_allocations_at_leader"`
	OppCentralP50MS float64 `json:"opportunistic_leader_ask_to_allocation_p50_ms"`
	OppCentralP99MS float64 `json:"opportunistic_leader_ask_to_allocation_p99_ms"`
	OppProxy        uint64  `json:"opportunistic_allocations_at_proxy"`
	OppProxyP50MS   float64 `json:"opportunistic_proxy_ask_to_allocation_p50_ms"`
	OppProxyP99MS   float64 `json:"opportunistic_proxy_ask_to_allocation_p99_ms"`
	TasksPerS       float64 `json:"tasks_finished_per_second"`
	TasksRetried    uint64  `json:"tasks_asked_again"`
	// RetriedBy counts the tasks asked again by why their container ended:
	// rejected (a node's queue was full when it was started), evicted,
	// shed, preempted, lost.
	RetriedBy       map[string]uint64 `json:"tasks_asked_again_by_reason,omitempty"`
	HeartbeatCount  uint64            `json:"heartbeats"`
	HeartbeatFailed uint64            `json:"heartbeats_failed"`
	// HeartbeatFailedBy counts the failed heartbeats by why: the error
	// code a server answered (no_leader, not_ready, ...), timeout, or
	// connection (refused, reset, closed).
	HeartbeatFailedBy map[string]uint64 `json:"heartbeats_failed_by,omitempty"`
	HeartbeatP50MS    float64           `json:"heartbeat_p50_ms"`
	HeartbeatP99MS    float64           `json:"heartbeat_p99_ms"`
	HeartbeatMaxMS    float64           `json:"heartbeat_max_ms"`
	UtilisationMean   float64           `json:"utilisation_mean"`
	UtilisationPeak   float64           `json:"utilisation_peak"`
	// InUseMean is the mean fraction of the cluster's vcores its
	// containers were measured to use (a simulated AM holds a vcore and
	// uses none): the work done, where utilisation is what was allocated.
	InUseMean        float64 `json:"in_use_mean"`
	SpuriousDown     int     `json:"spurious_down_nodes"`
	DownCheckError   string  `json:"down_check_error,omitempty"`
	Reregistrations  int     `json:"reregistrations"`
	LeaderChanges    int     `json:"leadership_changes"`
	MeasuredFromNote string  `json:"note"`
	// FillSeconds is how long the AMs took to receive 99% of the run's
	// allocations, from the first (to 10 ms), and FillPerS those
	// allocations per second over that window (Stats.Fill): the rate the
	// AMs saw while the servers were allocating, which the rate over the
	// whole run hides once the cluster is full.
	FillSeconds float64 `json:"allocations_fill_seconds"`
	FillPerS    float64 `json:"allocations_fill_per_second"`
	// Queues is each leaf queue's share of the cluster over the run
	// against its fair share; Preemptions counts the containers the AMs
	// saw preempted (and asked for again).
	Queues      []QueueSummary `json:"queues,omitempty"`
	Preemptions uint64         `json:"preemptions"`
	// Servers is the CPU each server the simulator started used over the
	// measured run (cores), the leader marked.
	Servers []ServerCPU `json:"servers_cpu,omitempty"`
	// Restart is set when the run restarted its servers (restart.go).
	Restart *RestartSummary `json:"restart,omitempty"`
}

// SeriesPoint is one second of the run.
type SeriesPoint struct {
	Second         int
	Allocations    uint64
	AtProxy        uint64
	ProxyP99MS     float64
	Completions    uint64
	Running        int
	Utilisation    float64
	HeartbeatP99MS float64
}

func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }

func (r *Run) result(end time.Time) *Result {
	s := r.stats
	s.mu.Lock()
	defer s.mu.Unlock()
	dur := end.Sub(s.start)
	sum := Summary{
		Nodes: len(r.nodes), NodesRegistered: r.registered, DurationSeconds: dur.Seconds(), RegisterSeconds: r.registerTook.Seconds(),
		WarmupSeconds: r.cfg.Warmup.Seconds(),
		AppsSubmitted: s.appsSubmitted, AppsFinished: s.appsFinished, AppsFailed: s.appsFailed, SubmitErrors: s.submitErrors,
		LastSubmitError: s.lastSubmitErr, AMsStarted: r.amsStarted.Load(), TasksSubmitted: s.tasksSubmitted,
		TasksFinished: s.tasksDone, TasksOfFinished: s.tasksOfFinished, TasksDoneOfFin: s.tasksDoneFinished,
		Allocations: s.allocations, Opportunistic: s.opportunisticAlloc,
		AllocationsPerS: float64(s.allocations) / max(dur.Seconds(), 1e-9),
		AskToAllocP50MS: ms(s.askToAlloc.Quantile(0.5)), AskToAllocP99MS: ms(s.askToAlloc.Quantile(0.99)),
		GuaranteedP50MS: ms(s.byKind[allocGuaranteed].Quantile(0.5)), GuaranteedP99MS: ms(s.byKind[allocGuaranteed].Quantile(0.99)),
		OppCentral: s.byKind[allocOppCentral].Count(), OppCentralP50MS: ms(s.byKind[allocOppCentral].Quantile(0.5)),
		OppCentralP99MS: ms(s.byKind[allocOppCentral].Quantile(0.99)),
		OppProxy:        s.byKind[allocOppProxy].Count(), OppProxyP50MS: ms(s.byKind[allocOppProxy].Quantile(0.5)),
		OppProxyP99MS: ms(s.byKind[allocOppProxy].Quantile(0.99)),
		TasksPerS:     float64(s.tasksDone) / max(dur.Seconds(), 1e-9), TasksRetried: s.tasksRetried,
		HeartbeatCount: s.heartbeats.Count(), HeartbeatFailed: s.heartbeatFailures,
		HeartbeatP50MS: ms(s.heartbeats.Quantile(0.5)), HeartbeatP99MS: ms(s.heartbeats.Quantile(0.99)), HeartbeatMaxMS: ms(s.heartbeats.max),
		SpuriousDown: r.downNodes, Reregistrations: r.rereg, LeaderChanges: s.leaderChanges,
		MeasuredFromNote: "measured from when every node had registered (or a minute after the last started); the simulator shares the machine with the servers",
	}
	if r.downErr != nil {
		sum.DownCheckError = r.downErr.Error()
	}
	sum.HeartbeatFailedBy = maps.Clone(s.heartbeatFailedBy)
	sum.RetriedBy = make(map[string]uint64, len(s.retriedBy))
	for why, n := range s.retriedBy {
		sum.RetriedBy[string(why)] = n
	}
	sum.Restart = r.restart
	sum.Servers = r.serverCPU
	sum.Preemptions = s.retriedBy[scheduler.ReasonPreempted]
	res := &Result{Summary: sum}
	res.Queues, res.Summary.Queues = r.queues.summarise()
	var utilSum, inUseSum float64
	sampled := 0
	// Heartbeats answered while the run winds down are not in the series.
	secs := s.seconds[:min(len(s.seconds), int(dur/time.Second)+1)]
	for i, sec := range secs {
		res.Series = append(res.Series, SeriesPoint{Second: i, Allocations: sec.Allocations, AtProxy: sec.AtProxy,
			ProxyP99MS: ms(sec.ProxyAlloc.Quantile(0.99)), Completions: sec.Completions,
			Running: sec.Running, Utilisation: sec.Utilisation, HeartbeatP99MS: ms(sec.Heartbeats.Quantile(0.99))})
		res.Summary.AllocationsPeak = max(res.Summary.AllocationsPeak, sec.Allocations)
		if sec.Samples == 0 {
			continue // the sampler's ticks missed this second: it is no idle second
		}
		sampled++
		utilSum += sec.Utilisation
		inUseSum += sec.InUse
		res.Summary.UtilisationPeak = max(res.Summary.UtilisationPeak, sec.Utilisation)
	}
	if sampled > 0 {
		res.Summary.UtilisationMean = utilSum / float64(sampled)
		res.Summary.InUseMean = inUseSum / float64(sampled)
	}
	window, perS := s.fill()
	res.Summary.FillSeconds, res.Summary.FillPerS = window.Seconds(), perS
	return res
}

// Text renders the summary for people.
func (s *Summary) Text() string {
	var b strings.Builder
	p := func(format string, a ...any) { fmt.Fprintf(&b, format+"\n", a...) }
	warm := ""
	if s.WarmupSeconds > 0 {
		warm = fmt.Sprintf(" and %.0f s of warm-up", s.WarmupSeconds)
	}
	p("weft sim: %d nodes (%d registered), %.0f s measured (after %.1f s of registrations%s)", s.Nodes, s.NodesRegistered, s.DurationSeconds, s.RegisterSeconds, warm)
	p("apps:        %d submitted, %d finished, %d failed, %d refused (AMs started: %d)", s.AppsSubmitted, s.AppsFinished, s.AppsFailed, s.SubmitErrors, s.AMsStarted)
	if s.LastSubmitError != "" {
		p("             last refusal: %s", s.LastSubmitError)
	}
	p("tasks:       %d submitted, %d finished (%.1f/s); finished apps: %d of %d tasks done; %d asked again%s", s.TasksSubmitted, s.TasksFinished,
		s.TasksPerS, s.TasksDoneOfFin, s.TasksOfFinished, s.TasksRetried, countsBy(s.RetriedBy))
	p("allocations: %d (%d opportunistic: %d at AMRMProxies, %d at the leader), %.1f/s over the run, %d in the busiest second",
		s.Allocations, s.Opportunistic, s.OppProxy, s.OppCentral, s.AllocationsPerS, s.AllocationsPeak)
	if s.FillSeconds > 0 {
		p("             99%% of them within %.2f s of the first: %.0f/s while they were allocated", s.FillSeconds, s.FillPerS)
	}
	p("ask→alloc:   p50 %.1f ms, p99 %.1f ms; guaranteed p50 %.1f ms, p99 %.1f ms", s.AskToAllocP50MS, s.AskToAllocP99MS, s.GuaranteedP50MS, s.GuaranteedP99MS)
	if s.OppProxy > 0 || s.OppCentral > 0 {
		p("opportunistic ask→alloc: at AMRMProxies p50 %.1f ms, p99 %.1f ms; at the leader p50 %.1f ms, p99 %.1f ms",
			s.OppProxyP50MS, s.OppProxyP99MS, s.OppCentralP50MS, s.OppCentralP99MS)
	}
	p("heartbeats:  %d, %d failed%s; p50 %.1f ms, p99 %.1f ms, max %.1f ms", s.HeartbeatCount, s.HeartbeatFailed, countsBy(s.HeartbeatFailedBy), s.HeartbeatP50MS, s.HeartbeatP99MS, s.HeartbeatMaxMS)
	p("utilisation: mean %.1f%%, peak %.1f%% (vcores allocated); in use %.1f%% (vcores measured busy)", 100*s.UtilisationMean, 100*s.UtilisationPeak, 100*s.InUseMean)
	down := fmt.Sprint(s.SpuriousDown)
	if s.DownCheckError != "" {
		down = "unknown (" + s.DownCheckError + ")"
	}
	p("nodes:       spurious DOWN at the end %s; re-registrations asked %d", down, s.Reregistrations)
	p("leadership:  %d changes seen", s.LeaderChanges)
	p("preemptions: %d containers preempted", s.Preemptions)
	for _, q := range s.Queues {
		p("queue %-8s used %.1f%% of the cluster on average, fair share %.1f%% (steady %.1f%%); %d s with demand below half its fair share",
			q.Queue, 100*q.UsedMean, 100*q.FairMean, 100*q.SteadyMean, q.StarvedSeconds)
	}
	if len(s.Servers) > 0 {
		var parts []string
		for _, c := range s.Servers {
			role := ""
			if c.Leader {
				role = " (leader)"
			}
			parts = append(parts, fmt.Sprintf("%s%s %.2f", c.ID, role, c.Cores))
		}
		p("server CPU:  %s cores over the measured run", strings.Join(parts, ", "))
	}
	p("note:        %s", s.MeasuredFromNote)
	if s.Restart != nil {
		b.WriteString(s.Restart.Text())
	}
	return b.String()
}

// countsBy lists counts by reason, " (3 lost, 12 rejected)", or nothing
// when there are none.
func countsBy(by map[string]uint64) string {
	if len(by) == 0 {
		return ""
	}
	why := make([]string, 0, len(by))
	for _, r := range slices.Sorted(maps.Keys(by)) {
		why = append(why, fmt.Sprintf("%d %s", by[r], r))
	}
	return " (" + strings.Join(why, ", ") + ")"
}

// WriteFiles writes summary.txt, summary.json, series.csv and the SVG
// charts into dir, creating it.
func (r *Result) WriteFiles(dir string) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	js, err := json.MarshalIndent(r.Summary, "", "  ")
	if err != nil {
		return err
	}
	var csv strings.Builder
	csv.WriteString("second,allocations,allocations_at_proxy,proxy_ask_to_allocation_p99_ms,completions,running,utilisation,heartbeat_p99_ms\n")
	for _, p := range r.Series {
		fmt.Fprintf(&csv, "%d,%d,%d,%.3f,%d,%d,%.4f,%.3f\n", p.Second, p.Allocations, p.AtProxy, p.ProxyP99MS, p.Completions, p.Running,
			p.Utilisation, p.HeartbeatP99MS)
	}
	files := map[string]string{
		"summary.txt":  r.Summary.Text(),
		"summary.json": string(js) + "\n",
		"series.csv":   csv.String(),
	}
	for name, c := range r.charts() {
		files[name] = c
	}
	if len(r.Queues) > 0 {
		files["queues.csv"] = queuesCSV(r.Queues)
		files["queue_shares.svg"] = queueChart(r.Queues, r.Summary.Queues)
	}
	for name, content := range files {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(content), 0o644); err != nil {
			return err
		}
	}
	return nil
}
