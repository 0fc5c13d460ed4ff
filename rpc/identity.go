package rpc

import "time"

// WorkloadKey is the public half of one of the servers' workload token
// signing keys (Ed25519), as servers hand it to agents: agents verify AM,
// container and node-join tokens and node certificates with it, and can
// sign nothing with it.
type WorkloadKey struct {
	ID        uint32 `codec:"id"`
	PublicKey []byte `codec:"public_key"`
}

// NodeResetSecretRequest forgets a DOWN node's secret (Node.ResetSecret),
// so that an agent that lost its data dir may register under the node's
// name again with a new one.
type NodeResetSecretRequest struct {
	RequestHeader
	ID string `codec:"id" json:"id"`
}

// WorkloadKeyRotateResponse answers Operator.WorkloadKeyRotate: the new
// active key's ID, and how many keys the servers now hold (the retired
// ones still verify the tokens they signed).
type WorkloadKeyRotateResponse struct {
	Index   uint64 `codec:"index" json:"index"`
	KeyID   uint32 `codec:"key_id" json:"key_id"`
	NumKeys int    `codec:"num_keys" json:"num_keys"`
}

// JoinTokenCreateRequest asks for a node-join token (Node.JoinTokenCreate,
// node:write): what an agent needs to register a node the servers do not
// know yet, with ACLs on.
type JoinTokenCreateRequest struct {
	RequestHeader
	// Node, if set, is the only node name the token may register.
	Node string `codec:"node" json:"node,omitempty"`
	// TTL is how long the token is valid [1 h, at most 24 h].
	TTL time.Duration `codec:"ttl" json:"ttl"`
}

// JoinTokenCreateResponse carries a new node-join token. Its secret is
// shown only here: the servers keep nothing of it and check its signature.
type JoinTokenCreateResponse struct {
	Token     string `codec:"token" json:"token"`
	Node      string `codec:"node" json:"node,omitempty"`
	ExpiresAt int64  `codec:"expires_at" json:"expires_at"` // Unix ns
}
