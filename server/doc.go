// Package server is a weft server: Raft through the plumbing it shares
// with routers (internal/raftnode: raft-boltdb, file snapshots taken when
// the log since the last one outgrows a share of its size, bootstrap,
// reconciliation with serf, forwarding to the leader), the serf LAN pool,
// the RPC listener that multiplexes msgpack RPC and Raft
// on one port (inside mutual TLS when configured: Raft only with server
// certificates, node endpoints only with agent certificates, and no serf
// member enters the Raft configuration without proving a server
// certificate), the RPC endpoints, follower-to-leader forwarding within each
// request's deadline (agents' heartbeats group-committed into one
// Node.HeartbeatBatch call per batch; clients' calls bounded, on
// connections of their own), blocking reads answered from the server's
// own state while it is fresh and bounded per client address and per
// token (blocking_limits.go), client writes proposed with their request IDs, and the
// leader's duties: Raft membership reconciliation, the scheduling loop that
// commits plans, preemption, node liveness (a Tick(now) state machine that
// marks a node DOWN only on evidence a healthy node cannot produce),
// recording what agents report (including the opportunistic containers
// AMRMProxies allocated; concurrent heartbeats' changes are group-committed
// as few Raft entries of at most 4,096 changes, each heartbeat answered
// once its batch is applied,
// and no heartbeat is answered before the leader's barrier), the
// least-loaded node list dealt out in windows to the agents that run AMs
// (opportunistic.go: left out when unchanged, grown at once for the demand
// a heartbeat reports) and queue limit pushed to agents, centralized opportunistic allocation and promotions, the
// drain of a node (Node.Drain; at its deadline what still runs there is
// killed as drained) and garbage collection of finished apps and DOWN
// nodes by one leader-proposed command naming exactly what to remove
// (SPEC §20). The
// duties run under a context per leadership, on an injected clock. Servers
// hold workload identity (identity.go): the leader creates the Ed25519
// signing key, servers mint AM, container and node-join tokens and certify
// each node's own minting key, give agents only public keys, check AM
// tokens on the AM protocol, node secrets and join tokens on registration
// (and max_node_resources), and record an opportunistic container an
// agent reports only with the token its AM's node minted for it; they give
// each app a uid from dynamic_uid_range while it runs.
// In a federation (SPEC §18, -subcluster-id) the leader reports the
// cluster to the routers, every agent's registration and heartbeat answer
// names the sub-cluster and its routers, and the servers take part in
// apps spanning sub-clusters (unmanaged.go): a home's servers vouch for
// an AM's token to the routers (AM.Verify), another sub-cluster's create
// the app's unmanaged AM there for them (App.SubmitUnmanaged) — an app
// with no AM container whose AMRMProxy speaks the AM protocol with a
// token they minted, whose containers' IDs carry the sub-cluster — and
// the leader kills an unmanaged AM not heard from for
// unmanaged_am_timeout.
// A server whose FSM halts on a committed entry it cannot apply stops by itself
// (Halted) with the entry's index and the recovery, its state intact.
// Any server rotates the gossip keys of the whole pool, no leader
// needed, by calling every member's keyring method over mutual TLS.
//
// The server is plumbing around fsm and scheduler: every decision about
// resources belongs to the scheduler package, and every change to the
// replicated state goes through a Raft command. The server must never change
// replicated state outside Raft, never decide scheduling policy itself, and
// never let a malformed request take the process down.
package server
