// Package identity is weft's workload and node identity: the signed AM,
// container and node-join tokens that servers mint, the node certificates
// with which an agent's AMRMProxy mints its opportunistic containers'
// tokens itself, and the node secrets that bind a node's name to the agent
// that first registered it.
//
// Tokens are signed with Ed25519. Servers hold the private keys (Keyring);
// agents hold only the public ones (Verifier), so an agent can check a
// token but never make one in the servers' name. A node signs with its
// own key, certified by the servers (NodeCert), and only opportunistic
// container tokens. Many tokens can share one signature (SignBatch: a
// Merkle tree of their bodies), so minting stays cheap on a busy leader.
//
// Parsing is bounded by MaxTokenLength and accepts only canonical
// encodings. The package is pure: it reads no clock (times are passed in)
// and does no I/O; only NewKeySecret, NewNodeKey and NewNodeSecret draw
// from crypto/rand. It must never log or return a key or a secret in an
// error.
package identity
