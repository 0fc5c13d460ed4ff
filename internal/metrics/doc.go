// Package metrics is weft's Prometheus instrumentation (SPEC §16): one
// registry per process holding weft's own series, Go and process
// statistics, and — through the go-metrics global sink that Init installs —
// the series Raft, serf and memberlist emit themselves; Handler serves it
// in the Prometheus text format for /v1/metrics.
//
// Event series (scheduling passes, placements, plan commits, preemptions,
// RPCs, FSM applies, AMRMProxy allocations) are recorded by the code paths
// that cause them, through the functions here. State series (per-queue
// usage, demand and fair shares, nodes by state, opportunistic queue
// lengths) are computed at scrape time from the sources that servers and
// agents register, so they cost nothing between scrapes and never go stale.
// Every label takes values from a bounded set: registered RPC methods and
// error codes, FSM command types, configured queues and resources, node
// states, preemption kinds.
//
// Durations are read from the monotonic wall clock: they are observations,
// never inputs to a decision. This package must never decide anything,
// hold cluster state between scrapes, or import the packages it measures
// (server, agent, fsm, rpc, scheduler): they call it, or hand it plain
// samples.
package metrics
