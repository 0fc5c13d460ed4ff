// Package raftnode is the Raft plumbing a weft server and a weft router
// share (SPEC §4, §18): hashicorp/raft on raft-boltdb in the data
// directory, its transport on the process's RPC port behind the first
// byte ConnRaft with every message bounded (frames.go) and, with TLS on,
// only peers holding a certificate of the quorum's role; bootstrap once
// bootstrap_expect peers of that role are alive in serf, and the leader's
// reconciliation of Raft's configuration with serf (bootstrap.go); the
// leader's barrier before it is ready, and the process's own leadership
// duties run under a context that ends with the leadership
// (leadership.go); forwarding to the leader, writes that wait for their
// entry to apply (forward.go); whether this member is fresh enough to
// answer blocking reads from its own state (fresh.go); the client calls it
// forwards, bounded and on connections of their own so that they never
// take what agents' heartbeats and Raft need (clientcalls.go); snapshots
// taken by bytes of log, not entries (snapshot.go); a graceful leave
// (node.go); and the operator methods on Raft and the gossip pool
// (operator.go) and its keyring, changed on every member over mutual TLS
// (keyring.go), which every such process serves.
//
// What a quorum holds is the process's own: a Node takes any
// raft.BatchingFSM, and the process says with Hooks what a new leader
// does and what its duties are.
package raftnode
