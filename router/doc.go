// Package router is `weft router` (SPEC §18): a process that forms a Raft
// quorum with the other routers, through the same plumbing as the servers
// (internal/raftnode), and holds the federation's state in its own FSM
// (router/fedstate): the sub-clusters and what their leaders' heartbeats
// say, the home of every app submitted through a router, the queues'
// policies and the generated weights. Its leader marks silent
// sub-clusters LOST (leader.go) and runs the global policy generator
// (scheduler/federation.GenerateWeights) every gpg_interval.
//
// Endpoints (endpoints.go): Status.* as on servers; Federation.Heartbeat
// (a server's or router's certificate) for sub-clusters' leaders;
// Federation.Subclusters, PolicyApply and PolicyList for operators.
package router
