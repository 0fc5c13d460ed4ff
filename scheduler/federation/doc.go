// Package federation holds the pure parts of weft's federation (SPEC §18,
// seed 001): the life of a sub-cluster as its routers see it (state.go),
// the router policies that rank sub-clusters for a new app (policy.go), and
// the global policy generator that derives every queue's weights from the
// sub-clusters' headroom and pending demand (gpg.go), and the AMRMProxy
// policies that split a spanning app's asks between its home and
// secondary sub-clusters (split.go; federation part 2), and the form of
// the app IDs the routers mint, which servers check (ids.go).
//
// As in package scheduler, every function is a pure function of its
// arguments: no I/O, goroutines, locks, clock or logging. Rank runs inside
// the routers' Raft Apply, so it also uses integer arithmetic only and
// visits sub-clusters in ID order, never in map order: every router must
// reach the same ranking from the same log, whatever machine it runs on.
// The generator runs on the router leader only and writes its result
// through Raft, so it may use floating point.
package federation
