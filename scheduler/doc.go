// Package scheduler is weft's domain model and the home of every scheduling
// policy. It holds:
//
//   - resource vectors, the queue tree and its configuration; nodes, apps,
//     asks and containers;
//   - fair shares by water-filling (fairshare.go) and FIFO/fair/DRF ordering
//     (policy.go);
//   - capacity queues: capacity and max capacity (capacity.go), YARN's user
//     limits and headroom (userlimit.go), and node reservations for
//     containers that fit nowhere yet (reservation.go);
//   - the guaranteed scheduling pass with its limits, delay scheduling and
//     spread/binpack (placement.go, hierarchy.go, locality.go), the passes
//     pipelined on plans in flight (planned.go), center-of-gravity reduce
//     placement (cogrs.go) and the AM limit (amshare.go);
//   - preemption planning (preemption.go) and why an app is not placed
//     (pending.go);
//   - opportunistic containers: the least-loaded node list, its windows
//     dealt to the agents that run AMs (listwindows.go), the room and
//     allocation rule shared by AMRMProxies and the leader (distroom.go,
//     opportunistic.go), promotion checks (promotion.go) and the agent-side
//     container scheduler that orders its queue, evicts the least waste,
//     pauses, overcommits on measured use and sheds (localsched.go);
//   - apps' node blacklists (blacklist.go), the count of placements an AM
//     has not heard of yet (container.go), what a new queue configuration
//     would do (dryrun.go), the order of IDs and the parsers of states
//     (order.go), and the check that an ID is safe as a path element
//     (ids.go).
//
// Every function here is a pure function of its inputs: a read-only state
// snapshot, a request and the current time passed in as a value. The package
// must never do I/O, start goroutines, take locks, read the clock, log, or
// import any other weft package. If a scheduler test needs a server, the
// boundary is in the wrong place.
package scheduler
