// Package scheduler is weft's domain model and the home of every scheduling
// policy: resource vectors; the queue tree and its configuration; nodes,
// apps, asks and containers; fair-share computation by water-filling
// (fairshare.go); FIFO/fair/DRF ordering (policy.go); capacity queues
// with their capacity, max capacity and user limits (capacity.go);
// center-of-gravity reduce placement by weighted network distance
// (cogrs.go); the guaranteed
// scheduling pass with limits, delay scheduling and spread/binpack
// (placement.go, hierarchy.go, locality.go); the AM limit of max_am_share
// (amshare.go); preemption planning (preemption.go); why an app is not
// placed (pending.go); opportunistic containers: the least-loaded node list,
// the room and allocation rule shared by AMRMProxies and the leader, an
// AMRMProxy's list, room and recent placements (distroom.go), the
// fallback of unplaceable opportunistic asks to guaranteed, the queue limit
// and the queue-wait estimate (opportunistic.go), and promotion checks
// (promotion.go); apps' node blacklists, what they bar and when they are
// ignored (blacklist.go); the count of placements an AM has not heard of yet
// (container.go); the agent-side container scheduler that queues,
// evicts and sheds (localsched.go); what a new queue configuration would
// do to fair shares and which running apps it would make preemptable
// (dryrun.go, `weft queue apply -dry-run`); the numeric order of IDs and
// the parsers of app, container and node states that every listing uses
// (order.go); and the check that an ID is safe to become a path element
// (ids.go).
//
// Every function here is a pure function of its inputs: a read-only state
// snapshot, a request and the current time passed in as a value. The package
// must never do I/O, start goroutines, take locks, read the clock, log, or
// import any other weft package. If a scheduler test needs a server, the
// boundary is in the wrong place.
package scheduler
