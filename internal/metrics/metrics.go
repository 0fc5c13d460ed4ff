package metrics

import (
	"fmt"
	"net/http"
	"sync"

	gometrics "github.com/hashicorp/go-metrics/compat"
	gmprom "github.com/hashicorp/go-metrics/compat/prometheus"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// Namespace prefixes every series weft exports, its own and (as the
// go-metrics service name) Raft's, serf's and memberlist's: raft.commitTime
// is exported as weft_raft_commitTime.
const Namespace = "weft"

// registry holds every series of this process. It exists from package
// initialisation, so recording never waits for Init. (Built in init, after
// every package variable: the collectors' descriptors are among them.)
var registry *prometheus.Registry

func init() { registry = newRegistry() }

func newRegistry() *prometheus.Registry {
	r := prometheus.NewRegistry()
	r.MustRegister(
		collectors.NewGoCollector(),
		collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}),
		state,
	)
	for _, c := range eventSeries {
		r.MustRegister(c)
	}
	return r
}

var (
	initOnce sync.Once
	initErr  error
)

// Init makes the go-metrics global sink (which Raft, serf and memberlist
// write to) feed this process's registry, so their series appear in
// Handler. Call it once a process, before starting a server or agent:
// what they emit before it is lost. Later calls do nothing and return the
// first call's result, so every server and agent of one process (weft dev,
// in-process tests) may call it.
func Init() error {
	initOnce.Do(func() { initErr = installGlobalSink(registry) })
	return initErr
}

// installGlobalSink registers a go-metrics Prometheus sink with reg and
// makes it the global sink. Its series never expire: a counter that
// vanished after a quiet minute would read as a reset (Raft's leader
// counters change once an election); the cost is that a leader-only Raft
// gauge keeps its last value on a server that lost leadership.
func installGlobalSink(reg prometheus.Registerer) error {
	sink, err := gmprom.NewPrometheusSinkFrom(gmprom.PrometheusOpts{
		Name:       Namespace + "_go_metrics_sink",
		Registerer: reg,
	})
	if err != nil {
		return fmt.Errorf("register the go-metrics Prometheus sink: %w", err)
	}
	cfg := gometrics.DefaultConfig(Namespace)
	cfg.EnableHostname = false       // no host name in series names; Prometheus labels the instance
	cfg.EnableRuntimeMetrics = false // the Go collector reports the runtime
	if _, err := gometrics.NewGlobal(cfg, sink); err != nil {
		return fmt.Errorf("install the go-metrics global sink: %w", err)
	}
	return nil
}

// Handler serves every series of this process in the Prometheus text
// format (or OpenMetrics, when the scraper asks for it). A series that
// fails to collect is reported in the response, never as a panic.
func Handler() http.Handler {
	return promhttp.HandlerFor(registry, promhttp.HandlerOpts{ErrorHandling: promhttp.ContinueOnError})
}
