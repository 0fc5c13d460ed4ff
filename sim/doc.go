// Package sim is weft's load simulator (SPEC §17): simulated nodes and
// simulated application masters that speak the real node and AM protocols
// to a real server quorum, so that the servers can be measured at
// thousands of nodes with no real processes or containers.
//
// A Node registers and heartbeats over one connection of its own, as an
// agent does, and "runs" the containers started on it for their task's
// duration, deciding what starts, queues or is evicted with the agents'
// own scheduler.LocalScheduler: a container ends when its time is up and
// what was queued behind it starts then; the node reports each completion
// in its next heartbeat. Each node may have a Proxy, a simulated
// AMRMProxy: it holds the least-loaded list the leader pushes in the
// node's heartbeat answers and allocates its AMs' opportunistic asks from
// it with the agents' own scheduler.DistributedRoom, forwarding the rest.
// When the servers tell a node to launch an app's AM, the simulation
// starts an AM in-process with the launch's token; it asks for its tasks'
// containers (through its node's proxy, if any), records how long each
// ask took to be allocated and by whom, starts them on their simulated
// nodes, asks again for those turned away, evicted or lost, and finishes
// the app when every task has completed. Workloads come from a synthetic generator or a YARN
// SLS JSON trace. Simulate runs one scenario and returns a Result, which
// writes a summary, a per-second CSV, each leaf queue's share against its
// fair share every second (queues.go) and SVG charts; report.go turns the
// results of `make sim-bench` into docs/scale.md's tables. The simulated clock
// is the real one. Servers starts a quorum of `weft server` processes;
// with Config.Restart a run stops all of them at once and starts them
// again on the same data while its nodes and AMs carry on, and measures
// their return (restart.go, with each server's restore read from its
// log, serverlog.go).
//
// sim must never be imported by the servers or agents: it is a client of
// theirs, and what it measures is only as true as its protocols are the
// real ones.
package sim
