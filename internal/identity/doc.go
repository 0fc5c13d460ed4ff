// Package identity is weft's workload and node identity (SPEC §15): the
// signed AM and container tokens that servers mint and that servers,
// agents and AMRMProxies verify, the keyring that signs them, and the node
// secrets that bind a node's name to the agent that first registered it.
//
// A token is HMAC-SHA256 over a canonical binary encoding of its claims
// (kind, app, attempt, container, node, resources, execution type, user,
// expiry and the ID of the key that signed it), encoded base64url with its
// MAC.
// Parsing is bounded by MaxTokenLength and verification compares MACs in
// constant time.
//
// The package is pure: it reads no clock (times are passed in) and does
// no I/O; only NewKeySecret and NewNodeSecret draw from crypto/rand. It
// must never log or return a key or a secret in an error.
package identity
