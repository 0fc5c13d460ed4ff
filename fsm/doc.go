// Package fsm is weft's replicated state machine: the tables every server
// holds (queue configuration, nodes, apps, containers and their indexes —
// among them the time-ordered indexes of containers marked for preemption
// and of allocations not started, which let the leader's duties read only
// what is due; each app's containers by modify index, from which an AM's
// answer reads only what changed since its index; and of DRAINING nodes, DOWN nodes by when they went down
// and finished apps by finish time, from which drain and garbage
// collection read, ops.go), the request IDs of recent client writes (so a retried
// write is applied once and answered as the first time), the workload
// signing keys and each node's secret hash (SPEC §15), the typed
// commands that change them, Raft's Apply, and snapshot/restore. Its State
// satisfies scheduler.State. An app holds its current AM attempt's node
// blacklist (AppBlacklistRequest), bounded, and its attempts say which
// count against max_am_attempts. Among the apps are unmanaged AMs' (SPEC §18):
// an app spanning into this sub-cluster from its home, with no AM
// container, whose attempts follow the home's (AppSubmitUnmanagedRequest)
// and whose containers' IDs carry the sub-cluster. A rejected command is
// a *Rejection whose kind (not found, conflict, invalid, stale) a server
// turns into its answer's code.
//
// A command is one type byte followed by a msgpack body. Apply is
// deterministic: it never reads the clock, draws random numbers or depends on
// map order; times arrive inside commands. A command that would break an
// invariant is rejected on every server alike and the rejection is returned
// through the apply future.
//
// A committed entry this binary cannot apply — an unknown command type
// without IgnoreUnknownTypeFlag, or a body that does not decode — halts the
// FSM before it changes anything: the entry and every later one are left
// unapplied (skipping them would fork the replicas, and applying garbage
// would too), Halted is closed and HaltErr says which entry and why, so the
// server can stop with that message. Every server running the same binary
// halts at the same entry with the same state, and a restart halts there
// again; the recovery is a binary that knows the entry, or WithSkipIndex on
// every server. Anyone who can append to the log (every open cluster) can
// commit such an entry, so it must never panic the process.
//
// Readers never lock: the store publishes immutable State values, so a read
// (or the scheduler) works on a consistent snapshot while Apply goes on.
// The tables are persistent trees that a transaction copies on write, so a
// new State shares everything it did not change with the one before. The
// six container indexes (by ID, by app, by app and modify index, live by
// node, marked for preemption, unstarted), which every container change
// writes, are copy-on-write B+ trees of this package (index.go): a
// transaction copies a node the first time it changes it and changes its
// copy in place after, and restore builds them from sorted keys. The
// other tables are go-immutable-radix trees.
// This package must never do network I/O or reach outside the state it owns.
package fsm
