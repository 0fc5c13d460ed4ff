// Package gossip holds what servers and agents share about the serf LAN
// pool: the member tags of SPEC §3, the serf/memberlist configuration, the
// gossip encryption keyring and its file (SPEC §15), changed only by the
// member's Keyring.Apply (serf's own key queries are refused wherever they
// arrive), a transport that inspects every gossip packet and stream before
// memberlist decodes it (opening encrypted ones with the keyring to see
// what they carry), and a join loop that retries until a member answers.
//
// It must never decide anything about cluster state; it only builds and
// names gossip plumbing. What arrives on a gossip port is anyone's until a
// key authenticates it, so nothing here (nor in memberlist behind it) may
// allocate on the word of an unauthenticated header more than the bounds in
// inspect.go.
package gossip
