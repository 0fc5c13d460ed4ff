package sim

import (
	"errors"
	"math"
	"sync"
	"time"

	wrpc "github.com/weft-sched/weft/rpc"
	"github.com/weft-sched/weft/scheduler"
)

// Hist is a histogram of durations in logarithmic buckets (about 4%
// apart, from 10 µs up), so percentiles of millions of samples cost a few
// kilobytes. The zero value is empty and ready.
type Hist struct {
	counts [histBuckets]uint64
	n      uint64
	max    time.Duration
}

const (
	histBuckets = 600
	histMin     = 10 * time.Microsecond
	histGrowth  = 1.04
)

func histBucket(d time.Duration) int {
	if d <= histMin {
		return 0
	}
	b := int(math.Log(float64(d)/float64(histMin))/math.Log(histGrowth)) + 1
	return min(b, histBuckets-1)
}

// Add records one sample.
func (h *Hist) Add(d time.Duration) {
	h.counts[histBucket(d)]++
	h.n++
	h.max = max(h.max, d)
}

// Merge adds o's samples to h.
func (h *Hist) Merge(o *Hist) {
	for i, c := range o.counts {
		h.counts[i] += c
	}
	h.n += o.n
	h.max = max(h.max, o.max)
}

// Count returns the number of samples.
func (h *Hist) Count() uint64 { return h.n }

// Quantile returns the q-quantile (0 < q ≤ 1) to within a bucket's width
// (the bucket's upper bound, never above the largest sample); 0 if empty.
func (h *Hist) Quantile(q float64) time.Duration {
	if h.n == 0 {
		return 0
	}
	want := uint64(math.Ceil(q * float64(h.n)))
	var seen uint64
	for i, c := range h.counts {
		seen += c
		if seen >= want {
			upper := time.Duration(float64(histMin) * math.Pow(histGrowth, float64(i)))
			return min(upper, h.max)
		}
	}
	return h.max
}

// allocKind is who allocated a container, and of which type.
type allocKind int

const (
	allocGuaranteed allocKind = iota // by the leader, guaranteed
	allocOppCentral                  // by the leader, opportunistic
	allocOppProxy                    // by an AMRMProxy, opportunistic
)

// Second is what one second of a run saw.
type Second struct {
	Allocations uint64
	// AtProxy are the allocations an AMRMProxy made, and ProxyAlloc their
	// ask → allocation times.
	AtProxy     uint64
	ProxyAlloc  Hist
	Completions uint64
	Heartbeats  Hist
	// Running, Utilisation (vcores allocated to running containers) and
	// InUse (vcores they are measured to use: a simulated AM uses none)
	// are sampled about once a second: Samples says how many samples of
	// this second the last two average (a second the sampler's ticks
	// missed has none, and counts in no mean).
	Running     int
	Utilisation float64
	InUse       float64
	Samples     int
}

// Stats gathers a run's measurements, per second from its start. It is
// safe for concurrent use.
type Stats struct {
	mu                 sync.Mutex
	start              time.Time
	seconds            []*Second
	heartbeats         Hist
	heartbeatFailures  uint64
	heartbeatFailedBy  map[string]uint64 // by failureKind: a handful of keys
	askToAlloc         Hist
	byKind             [3]Hist // ask → allocation by allocKind
	tasksRetried       uint64
	retriedBy          map[scheduler.ExitReason]uint64
	allocations        uint64
	tasksDone          uint64
	appsSubmitted      uint64
	appsFinished       uint64
	appsFailed         uint64
	tasksSubmitted     uint64
	tasksOfFinished    uint64
	tasksDoneFinished  uint64
	leaderChanges      int
	submitErrors       uint64
	lastSubmitErr      string
	opportunisticAlloc uint64
	// ticks counts allocations per fillTick from start: the fill rate is
	// measured finer than the per-second series allows.
	ticks []uint32
	// frozen is set when the measured time ends: later heartbeats, as the
	// run winds down, are not counted.
	frozen bool
}

// Freeze ends the measured time.
func (s *Stats) Freeze() {
	s.mu.Lock()
	s.frozen = true
	s.mu.Unlock()
}

// restart forgets everything gathered and gathers afresh from now on.
func (s *Stats) restart(now time.Time) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.start, s.seconds, s.ticks = now, nil, nil
	s.heartbeats, s.heartbeatFailures, s.heartbeatFailedBy = Hist{}, 0, nil
	s.askToAlloc, s.byKind = Hist{}, [3]Hist{}
	s.tasksRetried, s.retriedBy, s.allocations, s.tasksDone, s.opportunisticAlloc = 0, nil, 0, 0, 0
	s.appsSubmitted, s.appsFinished, s.appsFailed, s.tasksSubmitted = 0, 0, 0, 0
	s.tasksOfFinished, s.tasksDoneFinished, s.leaderChanges, s.submitErrors, s.lastSubmitErr = 0, 0, 0, 0, ""
}

// Start returns when the measured time began.
func (s *Stats) Start() time.Time {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.start
}

// NewStats starts gathering at start.
func NewStats(start time.Time) *Stats { return &Stats{start: start} }

func (s *Stats) second(now time.Time) *Second {
	i := max(0, int(now.Sub(s.start)/time.Second))
	for len(s.seconds) <= i {
		s.seconds = append(s.seconds, &Second{})
	}
	return s.seconds[i]
}

// Heartbeat records one answered heartbeat and how long it took.
func (s *Stats) Heartbeat(d time.Duration) {
	if s == nil {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.frozen {
		return
	}
	s.heartbeats.Add(d)
	s.second(time.Now()).Heartbeats.Add(d)
}

// HeartbeatFailed records a heartbeat that failed with err.
func (s *Stats) HeartbeatFailed(err error) {
	if s == nil {
		return
	}
	kind := failureKind(err)
	s.mu.Lock()
	if !s.frozen {
		s.heartbeatFailures++
		if s.heartbeatFailedBy == nil {
			s.heartbeatFailedBy = map[string]uint64{}
		}
		s.heartbeatFailedBy[kind]++
	}
	s.mu.Unlock()
}

// failureKind names why a call failed, from a fixed set: the error code a
// server answered, "timeout" for a deadline, "connection" for a
// connection that failed or broke otherwise.
func failureKind(err error) string {
	if c := wrpc.ErrorCode(err); c != wrpc.CodeUnknown {
		return string(c)
	}
	var te *wrpc.TransportError
	if errors.As(err, &te) {
		return "connection"
	}
	return string(wrpc.CodeUnknown)
}

// Allocated records a container an AM received, d after it asked, and
// who allocated it.
func (s *Stats) Allocated(d time.Duration, kind allocKind) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.frozen {
		return
	}
	s.askToAlloc.Add(d)
	s.byKind[kind].Add(d)
	s.allocations++
	if kind != allocGuaranteed {
		s.opportunisticAlloc++
	}
	now := time.Now()
	sec := s.second(now)
	sec.Allocations++
	if t := int(now.Sub(s.start) / fillTick); t >= 0 && t < maxFillTicks {
		if t >= len(s.ticks) {
			s.ticks = append(s.ticks, make([]uint32, t+1-len(s.ticks))...)
		}
		s.ticks[t]++
	}
	if kind == allocOppProxy {
		sec.AtProxy++
		sec.ProxyAlloc.Add(d)
	}
}

// fillTick is the resolution of the fill measurement, and maxFillTicks
// bounds how long it follows a run (an hour).
const (
	fillTick     = 10 * time.Millisecond
	maxFillTicks = int(time.Hour / fillTick)
)

// Fill measures the allocations' burst: from the first allocation an AM
// received to the one that made 99% of them (to 10 ms), and the
// allocations made in that window per second: the rate the AMs saw while the
// servers were allocating, which neither the whole run's average (the
// cluster may fill in seconds of a minute's run) nor whole seconds (the
// asks arrive partway into one) show.
func (s *Stats) Fill() (window time.Duration, perSecond float64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.fill()
}

func (s *Stats) fill() (window time.Duration, perSecond float64) {
	var total uint64
	first := -1
	for i, n := range s.ticks {
		if n > 0 && first < 0 {
			first = i
		}
		total += uint64(n)
	}
	if total == 0 {
		return 0, 0
	}
	want := (total*99 + 99) / 100
	var sum uint64
	for i := first; i < len(s.ticks); i++ {
		if sum += uint64(s.ticks[i]); sum >= want {
			window = time.Duration(i+1-first) * fillTick
			return window, float64(sum) / window.Seconds()
		}
	}
	return 0, 0
}

// TaskRetried records a task whose container was taken away (turned
// away, evicted, preempted, lost), asked for again, and why.
func (s *Stats) TaskRetried(why scheduler.ExitReason) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.frozen {
		return
	}
	s.tasksRetried++
	if s.retriedBy == nil {
		s.retriedBy = map[scheduler.ExitReason]uint64{}
	}
	s.retriedBy[why]++
}

// TaskDone records a task an AM saw complete.
func (s *Stats) TaskDone() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.frozen {
		return
	}
	s.tasksDone++
	s.second(time.Now()).Completions++
}

// AppSubmitted records an app submitted with tasks tasks.
func (s *Stats) AppSubmitted(tasks int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.frozen {
		return
	}
	s.appsSubmitted++
	s.tasksSubmitted += uint64(tasks)
}

// SubmitFailed records an app the servers would not take.
func (s *Stats) SubmitFailed(err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.submitErrors++
	s.lastSubmitErr = err.Error()
}

// AppEnded records an app whose AM finished it: tasks it had, done of
// them completed; ok is false if it failed.
func (s *Stats) AppEnded(tasks, done int, ok bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.frozen {
		return
	}
	if !ok {
		s.appsFailed++
		return
	}
	s.appsFinished++
	s.tasksOfFinished += uint64(tasks)
	s.tasksDoneFinished += uint64(done)
}

// LeaderChanged records that the servers' leader changed.
func (s *Stats) LeaderChanged() {
	s.mu.Lock()
	s.leaderChanges++
	s.mu.Unlock()
}

// Sample records the cluster's running containers, its utilisation (the
// vcores allocated to them) and the vcores in use now, as fractions.
func (s *Stats) Sample(now time.Time, running int, utilisation, inUse float64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	sec := s.second(now)
	sec.Samples++
	n := float64(sec.Samples)
	sec.Running = running
	sec.Utilisation += (utilisation - sec.Utilisation) / n
	sec.InUse += (inUse - sec.InUse) / n
}
