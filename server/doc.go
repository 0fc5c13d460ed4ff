// Package server is a weft server: Raft on raft-boltdb with file snapshots,
// the serf LAN pool, the RPC listener that multiplexes msgpack RPC and Raft
// on one port, the RPC endpoints, follower-to-leader forwarding within each
// request's deadline, client writes proposed with their request IDs, and the
// leader's duties: Raft membership reconciliation, the scheduling loop that
// commits plans, preemption, node liveness (a Tick(now) state machine that
// marks a node DOWN only on evidence a healthy node cannot produce),
// recording what agents report (including the opportunistic containers
// AMRMProxies allocated), the least-loaded node list and queue limit pushed
// to agents, centralized opportunistic allocation and promotions. The
// duties run under a context per leadership, on an injected clock. Any
// server rotates the gossip keys of the whole pool over serf, no leader
// needed.
//
// The server is plumbing around fsm and scheduler: every decision about
// resources belongs to the scheduler package, and every change to the
// replicated state goes through a Raft command. The server must never change
// replicated state outside Raft, never decide scheduling policy itself, and
// never let a malformed request take the process down.
package server
