// Package router is `weft router` (SPEC §18): a process that forms a Raft
// quorum with the other routers, through the same plumbing as the servers
// (internal/raftnode), and holds the federation's state in its own FSM
// (router/fedstate): the sub-clusters and what their leaders' heartbeats
// say, the home of every app submitted through a router, the queues'
// policies and the generated weights. Its leader marks silent
// sub-clusters LOST (leader.go) and runs the global policy generator
// (scheduler/federation.GenerateWeights) every gpg_interval.
//
// Endpoints (endpoints.go): the routers' own — Federation.Heartbeat (a
// server's or router's certificate) for sub-clusters' leaders,
// Federation.* for operators, and the Raft, gossip and members methods
// servers share (raftnode.Operator) — and the whole client API, relayed
// to the sub-clusters (relay.go): to an app's home (apps.go), to the
// sub-cluster an ID names, to every one merged (lists.go, containers.go,
// queues.go, status.go) or to every one in turn for a write that
// configures the federation (queues, ACLs: acls.go). Routers hold no ACLs:
// relayed calls carry the caller's token to the sub-cluster, and the
// routers' own are checked against a RUNNING sub-cluster (acl.go).
//
// Apps spanning sub-clusters (spans.go): an AMRMProxy (an agent's
// certificate) reads how to split an app (Federation.SplitView,
// Federation.ResolveNodes) and asks for the app's unmanaged AM in another
// sub-cluster (Federation.RegisterSpan): the routers have the home check
// the AM's token, record the span, and create the unmanaged AM there with
// their own certificate. App status, kill and container lists reach every
// sub-cluster an app spans.
package router
