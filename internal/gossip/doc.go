// Package gossip holds what servers and agents share about the serf LAN
// pool: the member tags of SPEC §3, the serf/memberlist configuration, and
// a join loop that retries until a member answers. It must never decide
// anything about cluster state; it only builds and names gossip plumbing.
package gossip
