// Package am holds weft's built-in application masters. Each is written
// only against the public AM protocol client in package rpc (rpc.AMClient),
// as any third-party framework would be:
//
//   - DShell, the distributed shell (SPEC §8), runs a command in
//     num_containers containers and runs again the work of containers that
//     were taken away.
//   - MapReduce (SPEC §19) runs a job's map tasks near their splits (map
//     asks name the split's nodes and racks; delay scheduling decides),
//     then one reduce task per partition, asked for with the bytes each node
//     holds for it so that the scheduler places it at their center of
//     gravity (or anywhere). Its tasks are MapTask and ReduceTask, which
//     `weft am map-task` and `weft am reduce-task` run in the containers:
//     maps partition `key<TAB>value` output by key hash into sorted files
//     in their work directories; reduces fetch their partition from every
//     map's agent (Container.Output), merge them by key and run the reduce
//     command. A reduce that cannot fetch a map's output names the map and
//     exits ExitFetchFailed; the AM runs the map again, then the reduce.
//     The job's counters (map locality, shuffle bytes by distance, TND and
//     WTND per reduce) go to the servers with the AM's calls.
//
// Both run again, at once and without counting a failure, the work of
// containers taken away in good order (their node stopped or was drained,
// they were preempted...); a container that failed for its node's sake
// (it would not start there, was lost with the node, never started in
// time) delays its task's next try by an exponential backoff with jitter
// and counts against the node, which the AM blacklists for its app after
// max_failures_per_node such failures (retry.go).
//
// An AM here must never reach into a server's or an agent's internals; it
// speaks the AM protocol to its node's AMRMProxy and the container
// protocol to the nodes its containers are on.
package am
