// Package fedstate is the routers' replicated state (SPEC §18): the
// federation's sub-clusters and what their last heartbeats said, the
// home sub-cluster of every app submitted through a router (recorded
// before the app is submitted there), the queues' router policies, and the
// weights the global policy generator wrote. The routers' Raft log applies
// to it as the servers' log applies to package fsm, with the same rules:
// commands are a type byte and a msgpack body, Apply reads no clock (the
// leader's time travels in each command), every decision that depends on
// the state is made inside Apply (the ranking of a new app's candidates is
// scheduler/federation.Rank, integer-only), and what is published is an
// immutable State that readers hold without locks.
//
// Every table is bounded (limits.go): a command that would pass a bound is
// refused in Apply, the same way on every router.
package fedstate
