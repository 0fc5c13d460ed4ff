// Package chaos is weft's fault-injection suite (`make chaos`, `make
// chaos-short`; docs/chaos.md). It starts three `weft server` and four
// `weft agent` processes, each in a network namespace of its own on a
// bridge, drives them through the `weft` command line with app
// submissions, queue configuration writes and consistent reads, and in
// every round injects one or two faults chosen by a seeded random number
// generator: partitions of the leader (both directions and each one-way),
// of single agents, SIGKILL and SIGSTOP of leaders and agents, and a full
// disk on a server. Afterwards it checks what weft promises: every
// acknowledged write on every server, no app submitted once that appears
// twice, a linearizable history of queue writes and reads (porcupine), no
// guaranteed overcommit of any node in the servers' records or in the
// real processes, at most one leader per Raft term, no healthy node marked
// DOWN, and every app FINISHED.
//
// It needs root, the ip and iptables commands and a kernel with network
// namespaces, so it runs only when asked (-chaos.rounds or
// WEFT_CHAOS_ROUNDS); it must never touch anything it did not create: every
// namespace, link, iptables rule and mount it makes carries its run's
// "weftc-<run>" name, and a run cleans only what a dead run left behind.
package chaos
