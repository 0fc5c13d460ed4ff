// Package agent is a weft node: it runs the containers the servers place
// on it and serves the application masters of its apps.
//
// An agent joins the serf pool, registers with the servers and heartbeats
// to them, proving with the node secret in its data dir that it is the
// node it registered as (identity.go; a new node also needs an operator's
// join token). It holds only the servers' public keys, and a key of its
// own that the servers certify, with which its AMRMProxy signs the tokens
// of the opportunistic containers it allocates.
//
// Containers run as process groups through the pure
// scheduler.LocalScheduler (manager.go: launch, queue, evict, pause, shed,
// kill, logs; measure.go: what each container's process tree uses, from
// /proc, for overcommit). Each runs as the account runAsPolicy picks (runas.go: the uid the
// servers gave its app, its user's account, never root unless allow_root),
// with its credentials as files only that account reads (secrets.go), and,
// where the kernel allows, in PID and mount namespaces of its own
// (isolation.go, package internal/containerinit), held to its memory and
// CPU by cgroups v2 or v1 where the agent may write them (cgroups.go: a
// kernel OOM kill ends it as oom; the freezer pauses it). The agent serves a
// completed container's files to its app's AM (output.go: the MapReduce
// shuffle).
//
// Its RPC port serves the AM protocol (the AMRMProxy, amrmproxy.go: local
// opportunistic allocation from the leader's least-loaded list, the rest
// relayed to the servers; amrmfed.go: asks split across a federation's
// sub-clusters) and container management. A container start needs a
// container token for exactly that container; every other call an AM token
// of the container's app, from a process running as that app's account
// (peeruid.go). With TLS on, a caller without a certificate is served only
// from the agent's own host, and a container's calls for other nodes are
// relayed with the agent's certificate (relay.go).
//
// A graceful stop (Leave) drains the node, stops its containers as
// node_stopped (which AMs run again without counting a failure), reports
// them and takes the node out of service.
//
// The agent must never write replicated state except through server RPCs,
// run a command without a verified token, or let a container outlive its
// knowledge of it (a restarted agent kills what its previous run left). No
// caller text becomes a path: every ID is checked with scheduler.ValidateID
// at the RPC boundary and again where a path is built (paths.go,
// cgroups.go).
package agent
