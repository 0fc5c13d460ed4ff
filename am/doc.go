// Package am holds weft's built-in application masters. Each is written
// only against the public AM protocol client in package rpc (rpc.AMClient),
// as any third-party framework would be: DShell, the distributed shell
// (SPEC §8), runs a command in num_containers containers and runs again
// the work of containers that were taken away.
//
// An AM here must never reach into a server's or an agent's internals; it
// speaks the AM protocol to its node's AMRMProxy and the container
// protocol to the nodes its containers are on.
package am
