// Package fsm is weft's replicated state machine: the tables every server
// holds (queue configuration, nodes, apps, containers and their indexes —
// among them the time-ordered indexes of containers marked for preemption
// and of allocations not started, which let the leader's duties read only
// what is due), the request IDs of recent client writes (so a retried
// write is applied once and answered as the first time), the workload
// signing keys and each node's secret hash (SPEC §15), the typed
// commands that change them, Raft's Apply, and snapshot/restore. Its State
// satisfies scheduler.State. A rejected command is a *Rejection whose kind
// (not found, conflict, invalid) a server turns into its answer's code.
//
// A command is one type byte followed by a msgpack body. Apply is
// deterministic: it never reads the clock, draws random numbers or depends on
// map order; times arrive inside commands. A command that would break an
// invariant is rejected on every server alike and the rejection is returned
// through the apply future. A committed entry that cannot be decoded is a
// panic with context: the log is corrupt or the binary is wrong, and going on
// would fork the replicas.
//
// Readers never lock: the store publishes immutable State values, so a read
// (or the scheduler) works on a consistent snapshot while Apply goes on.
// This package must never do network I/O or reach outside the state it owns.
package fsm
