package metrics

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// latencyBuckets spans 250µs to about 16s, doubling: a scheduling pass over
// a small cluster and a blocking query that waits out its timeout both land
// in a bucket of their own.
var latencyBuckets = prometheus.ExponentialBuckets(0.00025, 2, 17)

var (
	schedulingPass = prometheus.NewHistogram(prometheus.HistogramOpts{
		Namespace: Namespace, Subsystem: "scheduler", Name: "pass_seconds",
		Help:    "Time the leader spent in one guaranteed scheduling pass (scheduler.Schedule), plan commit excluded.",
		Buckets: latencyBuckets,
	})
	placements = prometheus.NewCounter(prometheus.CounterOpts{
		Namespace: Namespace, Subsystem: "scheduler", Name: "placements_total",
		Help: "Guaranteed containers placed: placements of committed plans the FSM accepted.",
	})
	placementsRefused = prometheus.NewCounter(prometheus.CounterOpts{
		Namespace: Namespace, Subsystem: "scheduler", Name: "placements_refused_total",
		Help: "Placements of committed plans the FSM refused (the state changed under the pass).",
	})
	planApply = prometheus.NewHistogram(prometheus.HistogramOpts{
		Namespace: Namespace, Subsystem: "scheduler", Name: "plan_apply_seconds",
		Help:    "Time from proposing a scheduling plan to Raft until the FSM applied it on the leader.",
		Buckets: latencyBuckets,
	})
	preemptions = prometheus.NewCounterVec(prometheus.CounterOpts{
		Namespace: Namespace, Name: "preemptions_total",
		Help: "Containers the leader marked for fair-share preemption, by why their taker starved (fair_share, min_share).",
	}, []string{"reason"})
	rpcRequests = prometheus.NewCounterVec(prometheus.CounterOpts{
		Namespace: Namespace, Subsystem: "rpc", Name: "requests_total",
		Help: "RPC requests handled by this process, by method and answer code (ok, or the error's code).",
	}, []string{"method", "code"})
	rpcLatency = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Namespace: Namespace, Subsystem: "rpc", Name: "request_seconds",
		Help:    "Time to answer an RPC request, authorization and forwarding included, by method.",
		Buckets: latencyBuckets,
	}, []string{"method"})
	fsmApply = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Namespace: Namespace, Subsystem: "fsm", Name: "apply_seconds",
		Help:    "Time to apply one committed command to the replicated state, by command type.",
		Buckets: latencyBuckets,
	}, []string{"command"})
	snapshotLogBytes = prometheus.NewGauge(prometheus.GaugeOpts{
		Namespace: Namespace, Subsystem: "snapshot", Name: "log_bytes",
		Help: "Bytes of Raft log this server applied since its last snapshot: what a restart would replay (as of its last snapshot check).",
	})
	snapshotSize = prometheus.NewGauge(prometheus.GaugeOpts{
		Namespace: Namespace, Subsystem: "snapshot", Name: "size_bytes",
		Help: "Size of this server's last Raft snapshot (taken, restored or installed); 0 before the first.",
	})
	amrmAllocate = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Namespace: Namespace, Subsystem: "amrmproxy", Name: "allocate_seconds",
		Help:    "Time an agent's AMRMProxy took to answer AM.Allocate, by who served it (local: the distributed scheduler alone; servers: relayed).",
		Buckets: latencyBuckets,
	}, []string{"served"})
)

// eventSeries are the series recorded as things happen.
var eventSeries = []prometheus.Collector{
	schedulingPass, placements, placementsRefused, planApply, preemptions, rpcRequests, rpcLatency, fsmApply, amrmAllocate,
	snapshotLogBytes, snapshotSize, reportsRefused,
}

// Timer measures one duration for a series. Start one with Start.
type Timer struct{ start time.Time }

// Start begins a Timer.
func Start() Timer { return Timer{start: time.Now()} }

func (t Timer) seconds() float64 { return time.Since(t.start).Seconds() }

// SchedulingPass records one scheduling pass begun at t.
func SchedulingPass(t Timer) { schedulingPass.Observe(t.seconds()) }

// PlanCommitted records a plan proposed at t whose placements the FSM
// accepted (placed) or refused.
func PlanCommitted(t Timer, placed, refused int) {
	planApply.Observe(t.seconds())
	placements.Add(float64(placed))
	placementsRefused.Add(float64(refused))
}

// PreemptionReason is why a starving app took containers: the label of
// weft_preemptions_total.
type PreemptionReason string

// Preemption reasons.
const (
	PreemptFairShare PreemptionReason = "fair_share" // an app below its fair share
	PreemptMinShare  PreemptionReason = "min_share"  // a queue below its min share
	PreemptOther     PreemptionReason = "other"      // a reason this build does not name
)

// Preempted records n containers marked for preemption for reason.
func Preempted(reason PreemptionReason, n int) {
	preemptions.WithLabelValues(string(reason)).Add(float64(n))
}

// RPC records one request to method (a registered method name, never
// caller text) begun at t and answered with code ("ok", or its error code).
func RPC(method, code string, t Timer) {
	rpcLatency.WithLabelValues(method).Observe(t.seconds())
	rpcRequests.WithLabelValues(method, code).Inc()
}

// FSMApply begins timing the application of one command of the named type
// (from the fixed set of command types); the returned function ends it.
func FSMApply(command string) (done func()) {
	t := Start()
	return func() { fsmApply.WithLabelValues(command).Observe(t.seconds()) }
}

// AllocateServedBy is who answered an AMRMProxy allocation.
type AllocateServedBy string

// Who answers an AMRMProxy allocation.
const (
	ServedLocal   AllocateServedBy = "local"   // the agent's distributed scheduler, without waiting for the servers
	ServedServers AllocateServedBy = "servers" // the servers, through a relayed AM.Allocate
)

// AMRMProxyAllocate records one AM.Allocate the AMRMProxy answered, begun
// at t.
func AMRMProxyAllocate(t Timer, served AllocateServedBy) {
	amrmAllocate.WithLabelValues(string(served)).Observe(t.seconds())
}

// SnapshotLog records, at a server's snapshot check, the Raft log it
// applied since its last snapshot and that snapshot's size, in bytes.
func SnapshotLog(logBytes, snapshotBytes uint64) {
	snapshotLogBytes.Set(float64(logBytes))
	snapshotSize.Set(float64(snapshotBytes))
}

// ReportRefusal is why the leader did not record a container an agent
// reported: the label of weft_node_reports_refused_total.
type ReportRefusal string

// Why a reported container was not recorded.
const (
	RefusedMalformed ReportRefusal = "malformed"   // not a valid record, or of an unknown app
	RefusedNoToken   ReportRefusal = "no_token"    // an opportunistic container reported without its token
	RefusedBadToken  ReportRefusal = "bad_token"   // a token that does not verify, or is not the container's
	RefusedNotMinter ReportRefusal = "not_minter"  // minted by a node that does not run the app attempt's AM
	RefusedDeferred  ReportRefusal = "over_budget" // past what one heartbeat may add; the agent reports it again
)

var reportsRefused = prometheus.NewCounterVec(prometheus.CounterOpts{
	Namespace: Namespace, Subsystem: "node", Name: "reports_refused_total",
	Help: "Containers agents reported that the leader did not record, by why (over_budget ones are recorded from a later heartbeat).",
}, []string{"reason"})

// ReportsRefused records n reported containers not recorded for reason.
func ReportsRefused(reason ReportRefusal, n int) {
	if n > 0 {
		reportsRefused.WithLabelValues(string(reason)).Add(float64(n))
	}
}
