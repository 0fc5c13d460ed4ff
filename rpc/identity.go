package rpc

// WorkloadKey is a workload token signing key as servers hand it to
// agents (SPEC §15): agents verify container and AM tokens with it, and
// their AMRMProxies sign the container tokens of what they allocate.
type WorkloadKey struct {
	ID     uint32 `codec:"id"`
	Secret []byte `codec:"secret" json:"-"`
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
