// Package agent is a weft node: it joins the serf pool, registers its
// capacity and rack with the servers and heartbeats to them (proving it is
// the node with the node secret it keeps in its data dir), runs containers
// as process groups (launch, queue, evict, shed, kill, logs) through the pure
// scheduler.LocalScheduler, each as the Unix account runAsPolicy picks
// (runas.go: never root unless allow_root) and, where the kernel allows,
// through a container init in PID and mount namespaces of its own, so it
// sees only its own processes and has its own /tmp (isolation.go, package
// internal/containerinit; elsewhere directly, with a warning at start),
// serves the files completed
// containers left in their work directories to their app's AM (the
// MapReduce shuffle, output.go: never a file outside the work directory,
// never one that is not regular), hosts the AMRMProxy that allocates its AMs'
// opportunistic asks itself from the leader's least-loaded list (the
// distributed scheduler, which goes on without a leader) and relays the
// rest of the AM protocol to the servers, and launches AM containers
// (`weft am dshell` or `weft am mapreduce`: the built-in AMs live in
// package am). When its sub-cluster belongs to a
// federation (the servers say so in every heartbeat), the AMRMProxy also
// splits its AMs' guaranteed asks among sub-clusters by the queue's
// AMRMProxy policy and speaks for each app, through an unmanaged AM the
// routers create, to the other sub-clusters' servers, merging their
// answers into the AM's (amrmfed.go). It verifies workload tokens with the
// keys the servers send it (SPEC §15): a container starts only with a
// container token for exactly it on this node, and the AM protocol and
// container calls serve an app only with its AM token. With TLS configured
// it speaks mutual TLS to servers and agents, and its port verifies a
// certificate when one is given (AMs have none). A graceful stop (Leave) stops
// heartbeating first, then every container (reason node_stopped, which AMs
// run again without counting a failure), reports their ends and takes the
// node out of service before it leaves the pool. The AMRMProxy keeps each
// app's opportunistic containers off the nodes its AM blacklisted.
//
// It is plumbing around scheduler decisions: queueing and eviction rules
// live in package scheduler. The agent must never write replicated state
// except through server RPCs, and a container must never outlive the
// agent's knowledge of it: a restarted agent kills what its previous run
// left behind, and a container's namespace ends with its command. No caller text becomes a path: every ID is checked with
// scheduler.ValidateID at the RPC boundary and again where a path is built
// (paths.go, cgroups.go). It must never run a command without a verified
// token.
package agent
