// Package e2e holds black-box tests that build the weft binary and run it as
// real processes on loopback addresses (127.0.0.1, 127.0.0.2, …): servers
// that bootstrap a Raft quorum over TCP, gossip with serf, and are killed,
// paused and restarted. Tests talk to them only through the weft command
// line and the rpc client, never through internal packages. The
// fault-injection suite, with each process on its own network namespace,
// is e2e/chaos.
package e2e
