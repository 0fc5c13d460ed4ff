// Package inflight counts calls in flight — in all, and per key such as a
// caller's address or token — and refuses one that would take either count
// past its bound, at once: a caller over its share is answered, never
// queued. Servers use it to bound the blocking queries each caller holds
// and the calls a follower forwards to its leader.
//
// It must never block, and never hold anything for a key with no call in
// flight.
package inflight
